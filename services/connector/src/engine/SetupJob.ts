import type { JsonObject } from "@bufbuild/protobuf"
import type { SqlClient, SqlError } from "@effect/sql"
import { GENERATED_PASSWORD_SCRAM_ITERATIONS, JobFailed, type JobHandler, type OperationEnded, quoteIdent, quoteLiteral, type RpcError, scramVerifier } from "@scion/kit"
import { Config, Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import type { PostgresDetails } from "../connectors/ConnectionDetails.js"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { ConnectorOperations } from "../connectors/Discovery.js"
import { type OperationsUnavailable } from "../domain/errors.js"
import type { Connector } from "../domain/models.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { type Engine, EngineProvisioner } from "./EngineProvisioner.js"
import { type MirrorDdl, qualified, readMirrorDdl, type TableRef, UnsupportedDdl } from "./MirrorSchema.js"
import { dropSubscriptionKeepingSlot, emptyMirroredTables } from "./EngineReplication.js"
import { type EngineSessionOptions, onEngineDatabase, onMirrorUnderLock, type PgSession, PgStepFailed, sourceSession, subscriptionConninfo, withoutStatementLog } from "./PgSession.js"
import { activePipeline, type PipelineNames } from "../replication/PipelineNames.js"
import { dropPipeline, namesOf, shadowPipeline, startPipelineOperation } from "../replication/Pipelines.js"
import { PipelinesRepo } from "../replication/PipelinesRepo.js"
import { EngineSetupRepo } from "./EngineSetupRepo.js"
import type { ReadinessRepo } from "./ReadinessRepo.js"
import { wholeSchemasOf } from "../replication/SourceCaptureSql.js"
import { installMirrorFollowing, prepareCapture, prepareMirror, publishedTables, readSnapshots, recordPublicationScope, type SchemaFollowMode } from "../replication/SourceCapture.js"
import { ENGINE_SETUP_JOB, EngineSetupPayload, type MirrorPlan, setupPrerequisites, stepFailed } from "./SetupPlan.js"
import { recordReadiness } from "./ReadinessEvidence.js"
import { slotPosition } from "../replication/SlotSql.js"

/**
 * The engine setup job (`jobs.connector.engine_setup`) in all its modes — setup, rollout, reset,
 * deep reset — and its configuration: the steps of ARCHITECTURE.md, "The branching engine", each
 * idempotent so a redelivery resumes. Starting it is EngineSetup.ts's; what it checks first is
 * SetupPlan.ts's; the readiness evidence it writes last is ReadinessEvidence.ts's.
 */

export interface EngineSetupOptions {
  readonly connectTimeout: Duration.Duration
  /** Statement timeout on the source (publication, slot, catalog reads). */
  readonly queryTimeout: Duration.Duration
  /** How long the initial copy may take before the setup fails. */
  readonly syncTimeout: Duration.Duration
  /** Table-sync errors the engine may report before the setup gives up. */
  readonly maxSyncErrors: number
  /** How long readiness waits for the mirror to catch up with the source before counting rows. */
  readonly catchUpTimeout: Duration.Duration
}

export class EngineSetupConfig extends Effect.Tag("@scion/connector/EngineSetupConfig")<EngineSetupConfig, EngineSetupOptions>() {
  /** ENGINE_SETUP_* (services/connector/README.md, "Engine setup"). */
  static readonly layerConfig: Layer.Layer<EngineSetupConfig> = Layer.effect(
    EngineSetupConfig,
    Config.all({
      connectTimeout: Config.duration("PREFLIGHT_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5))),
      queryTimeout: Config.duration("ENGINE_SETUP_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.minutes(5))),
      syncTimeout: Config.duration("ENGINE_SETUP_SYNC_TIMEOUT").pipe(Config.withDefault(Duration.hours(2))),
      maxSyncErrors: Config.integer("ENGINE_SETUP_MAX_SYNC_ERRORS").pipe(Config.withDefault(5)),
      catchUpTimeout: Config.duration("ENGINE_SETUP_CATCH_UP_TIMEOUT").pipe(Config.withDefault(Duration.seconds(60)))
    }).pipe(Effect.orDie)
  )
}

/** setup_status: the steps in order and where each is. */
const STEPS = [
  ["source_checks", "Checking the source"],
  ["replica_identity", "Applying replica-identity decisions on the source"],
  ["capture", "Installing schema-change capture on the source"],
  ["publication", "Creating the publication on the source"],
  ["slot", "Creating the replication slot on the source"],
  ["engine", "Provisioning the engine"],
  ["schema", "Creating the mirror's tables"],
  ["subscription", "Subscribing the mirror to the source"],
  ["initial_copy", "Copying the selected tables"],
  ["readiness", "Checking the mirror's readiness"]
] as const
type StepName = (typeof STEPS)[number][0]

const setupStatus = (current: StepName | "done", extra: JsonObject = {}): JsonObject => {
  const index = current === "done" ? STEPS.length : STEPS.findIndex(([name]) => name === current)
  return {
    current_step: current,
    steps: STEPS.map(([name, label], i) => ({ name, label, status: i < index ? "completed" : i === index ? "running" : "pending" })),
    ...extra
  }
}


const PRIVILEGE_ERRORS = new Set(["42501"])

export type EngineSetupJobError = JobFailed | OperationEnded | RpcError | SqlError.SqlError | OperationsUnavailable

type Report = (update: { stage?: string; stageLabel?: string; progress?: number; setupStatus?: JsonObject }) => Effect.Effect<void, OperationEnded | RpcError>

/** One run of the job: what every step needs to know about it. */
interface SetupRun {
  readonly operationId: string
  readonly connectorId: string
  readonly mode: EngineSetupPayload["mode"]
  readonly options: EngineSetupOptions
  /** Reports a step as the current one (setup_status belongs to connector_engine_setup operations only). */
  readonly step: (name: StepName, progress: number, extra?: JsonObject) => Effect.Effect<void, OperationEnded | RpcError>
  readonly report: Report
}

/** What the source_checks step established: the connector, its credentials, the plan and the pipeline the steps build. */
interface SetupBasis {
  readonly connector: Connector
  readonly details: PostgresDetails & { readonly password: string }
  readonly plan: MirrorPlan
  readonly refs: ReadonlyArray<TableRef>
  readonly pipeline: PipelineNames
  readonly sourceOptions: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number }
}

/** What the source side leaves for the engine side: the mirror's DDL and how schema changes are followed. */
type SourcePrepared = MirrorDdl & {
  readonly mode: SchemaFollowMode
  readonly heartbeat: boolean
  readonly capture: Omit<Parameters<typeof prepareMirror>[1], "tables">
}

/**
 * The engine setup (and rollout) job (ARCHITECTURE.md, "The branching engine"). Every step is
 * idempotent, so a redelivery re-runs them and resumes where the work stopped: source checks →
 * replica-identity decisions on the source → publication → slot → engine → mirror DDL →
 * subscription (created, or refreshed for a rollout) → initial copy → readiness evidence →
 * branching_engine_status ready (or failed_validation).
 */
export const engineSetupJob: JobHandler<
  EngineSetupPayload,
  typeof EngineSetupPayload.Encoded,
  EngineSetupJobError,
  ConnectorsRepo | EngineSetupRepo | PipelinesRepo | ReadinessRepo | SecretStore | EngineProvisioner | EngineSetupConfig | SqlClient.SqlClient | ConnectorOperations
> = {
  ...ENGINE_SETUP_JOB,
  payload: EngineSetupPayload,
  run: (job) =>
    Effect.gen(function* () {
      const options = yield* EngineSetupConfig
      const { connector_id: connectorId, mode } = job.payload
      const run: SetupRun = {
        operationId: job.operationId,
        connectorId,
        mode,
        options,
        report: job.report,
        step: (name, progress, extra = {}) =>
          job.report({ stage: name, stageLabel: STEPS.find(([n]) => n === name)![1], progress, ...(mode === "setup" ? { setupStatus: setupStatus(name, extra) } : {}) })
      }
      return yield* runSetup(run).pipe(Effect.tapError((error) => (error._tag === "JobFailed" ? recordFailure(run) : Effect.void)))
    }).pipe(Effect.withSpan("engineSetupJob.run", { attributes: { operationId: job.operationId } }))
}

/** The steps in order; each below is one function. */
const runSetup = (run: SetupRun) =>
  Effect.gen(function* () {
    const basis = yield* checkSource(run)
    if (run.mode === "reset") {
      // The old pipeline goes first: the steps below then make a fresh slot and copy everything.
      yield* run.report({ stage: "reset", stageLabel: "Dropping the subscription and the slot, emptying the mirror", progress: 3 })
      yield* resetPipeline(run, basis)
    }
    // The engine is provisioned while the source steps run (initdb and the certificate take
    // seconds); its step is reported once the source side is done.
    const provisioning = yield* Effect.fork(provisionEngine(run, basis.pipeline))
    const prepared = yield* prepareSource(run, basis)
    yield* run.step("engine", 15)
    const engine = yield* Fiber.join(provisioning)
    const instance = engine.instanceName ?? `engine-${run.connectorId}`
    yield* EngineSetupRepo.recordEngine({
      connectorId: run.connectorId,
      host: engine.host,
      port: engine.port,
      instanceName: instance,
      pipeline: basis.pipeline,
      schemaFollow: prepared.mode,
      heartbeat: prepared.heartbeat
    })
    yield* buildMirror(run, basis, engine, prepared)
    const attemptId = yield* validate(run, basis, engine, instance, prepared.tables.length)
    yield* flushEngine(run, engine)
    return run.mode === "deep_reset" ? yield* handOverShadow(run, basis, attemptId) : yield* markReady(run, basis, attemptId, instance, prepared)
  })

/**
 * The copy leaves the engine's new files written but not flushed, and every branch's template
 * copy starts with a checkpoint: the first branch would fsync the whole initial copy on its own
 * clock (measured: ~130 ms more for 28 MB on this machine's disk, 300–400 ms at 307 MB). So the
 * engine is checkpointed before it is declared ready: the setup pays it once, and the first
 * branch is as fast as the next. A checkpoint that fails only costs that first branch the time.
 */
const flushEngine = (run: SetupRun, engine: Engine) =>
  onEngineDatabase(engine, "postgres", setupSession(run), (admin) => admin.query("checkpoint")).pipe(
    Effect.asVoid,
    Effect.catchAll((e) => Effect.logWarning("the checkpoint before readiness failed; the first branch's copy flushes the mirror instead", e)),
    Effect.annotateLogs({ connector_id: run.connectorId }),
    Effect.withSpan("SetupJob.flushEngine")
  )

/** source_checks: the connector still wants this setup, its credentials, and a plan from its selection and decisions. */
const checkSource = (run: SetupRun) =>
  Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const found = yield* repo.find(run.connectorId)
    if (Option.isNone(found)) return yield* new JobFailed({ message: `Connector ${run.connectorId} no longer exists` })
    const connector = found.value
    if (connector.setupOperationId !== null && connector.setupOperationId !== run.operationId) {
      return yield* new JobFailed({ message: `Superseded by operation ${connector.setupOperationId}` })
    }
    yield* run.step("source_checks", 2)
    const details = yield* storedPostgresDetails(run.connectorId).pipe(Effect.mapError((e) => stepFailed("source_checks", e.reason)))
    const checked = setupPrerequisites(connector, details.database)
    if (Option.isNone(checked.plan)) {
      return yield* stepFailed("source_checks", checked.checks.filter((c) => c.status === "fail").map((c) => c.message).join("; "))
    }
    const plan = checked.plan.value
    // The pipeline the steps build: the active one, or for a deep reset a new generation beside it.
    const pipeline = run.mode === "deep_reset" ? yield* shadowPipeline(run.connectorId, run.operationId) : yield* activePipeline(run.connectorId)
    return {
      connector,
      details,
      plan,
      pipeline,
      refs: plan.tables.map(({ table }) => ({ schema: table.path.split(".")[1]!, name: table.name })),
      sourceOptions: { applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(run.options.connectTimeout), queryMillis: Duration.toMillis(run.options.queryTimeout) }
    } satisfies SetupBasis
  })

/** engine: the engine provisioned (or started) and the pipeline's mirror database made on it. */
const provisionEngine = (run: SetupRun, pipeline: PipelineNames) =>
  Effect.gen(function* () {
    const provisioner = yield* EngineProvisioner
    const engine = yield* provisioner.provision(run.connectorId).pipe(Effect.mapError((e) => stepFailed("engine", e.message)))
    yield* onEngineDatabase(engine, "postgres", setupSession(run), (admin) =>
      Effect.gen(function* () {
        const [exists] = yield* admin.query("select 1 from pg_database where datname = $1", [pipeline.mirrorDatabase])
        if (exists === undefined) yield* admin.query(`create database ${quoteIdent(pipeline.mirrorDatabase)}`)
        // Branch roles log in to this engine with passwords their users hold: the mirror (the
        // org's whole selection) is not theirs to open, so PUBLIC's default CONNECT and TEMP go.
        yield* admin.query(`revoke all on database ${quoteIdent(pipeline.mirrorDatabase)} from public`)
        // initdb stored the superuser's verifier with 4,096 rounds, which every login of the
        // branch unit (each create's first session on its copy) and of this unit pays again;
        // the password is generated, so the rounds protect nothing (kit scram.ts).
        const verifier = yield* scramVerifier(Redacted.value(engine.superuser.password), GENERATED_PASSWORD_SCRAM_ITERATIONS)
        yield* admin.query(`alter role ${quoteIdent(engine.superuser.username)} password ${quoteLiteral(verifier)}`)
      })
    ).pipe(Effect.mapError((e) => stepFailed("engine", e)))
    return engine
  })

/**
 * The source side, on one session: wal_level, replica-identity decisions, schema-change capture,
 * the publication, the slot, then the mirror's DDL read (after decisions changed the source's
 * tables) with the snapshots captured changes are applied against.
 */
const prepareSource = (run: SetupRun, basis: SetupBasis) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { details, pipeline, plan, refs } = basis
      const source = yield* sourceSession(details, details.password, basis.sourceOptions).pipe(Effect.mapError((e) => stepFailed("source_checks", e)))
      const [wal] = yield* source.query<{ wal_level: string }>("select current_setting('wal_level') as wal_level").pipe(Effect.mapError((e) => stepFailed("source_checks", e)))
      if (wal?.wal_level !== "logical") {
        return yield* stepFailed("source_checks", `the source's wal_level is ${wal?.wal_level ?? "unknown"}, not logical (set wal_level = logical and restart the source)`)
      }

      // Decisions: a key or REPLICA IDENTITY FULL on the source, where the role may.
      yield* run.step("replica_identity", 5)
      yield* applyReplicaIdentityDecisions(source, plan, details.username)

      // Schema changes: captured in commit order where the role may install event triggers,
      // otherwise reconciled by the monitor.
      yield* run.step("capture", 7)
      const capturePlan = yield* prepareCapture(source).pipe(Effect.mapError((e) => stepFailed("capture", e)))
      const mode = capturePlan.mode

      yield* run.step("publication", 8)
      const wholeSchemas = wholeSchemasOf(basis.connector.selectedEntityPaths, plan.database)
      yield* publish(source, pipeline, publishedTables(refs.map(qualified), capturePlan), details.username)
      if (mode === "capture") yield* recordPublicationScope(source, pipeline.publication, wholeSchemas).pipe(Effect.mapError((e) => stepFailed("publication", e)))

      // The slot: made before the subscription so the subscription never has to create it.
      yield* run.step("slot", 10)
      yield* createSlot(source, pipeline.slot)

      const mirrorDdl = yield* readMirrorDdl(source.query, refs).pipe(
        Effect.mapError((e) => (e instanceof UnsupportedDdl || e instanceof PgStepFailed ? stepFailed("schema", e) : stepFailed("schema", String(e))))
      )
      // The snapshots serve both ways of following: captured changes are diffed against them,
      // and reconciliation compares the source's catalog with them.
      const snapshots = yield* readSnapshots(source, refs.map(qualified), mode).pipe(Effect.mapError((e) => stepFailed("schema", e)))
      // The mirror keeps the schemas it holds whole in either mode: a table made there joins it
      // (capture's trigger publishes it; reconciliation finds it).
      return { ...mirrorDdl, mode, heartbeat: capturePlan.heartbeat, capture: { ...snapshots, wholeSchemas } } satisfies SourcePrepared
    })
  )

/**
 * Whether the publication exists, and whether it publishes exactly `tables` (whole rows, every
 * action, through partition roots): then setup leaves it as it is, since only its owner may alter
 * it, and the grant script's administrator may have made it for a role that owns none of the tables.
 */
const PUBLICATION_STATE = `
select p.pubviaroot and p.pubinsert and p.pubupdate and p.pubdelete and p.pubtruncate and not p.puballtables
       and not exists (select 1 from pg_publication_rel r where r.prpubid = p.oid and (r.prqual is not null or r.prattrs is not null))
       and not exists (select 1 from pg_publication_namespace n where n.pnpubid = p.oid)
       and coalesce((select array_agg(r.prrelid order by r.prrelid) from pg_publication_rel r where r.prpubid = p.oid), '{}')
         = coalesce((select array_agg(t.relid order by t.relid) from (select distinct name::regclass::oid as relid from unnest($2::text[]) as name) t), '{}') as as_wanted
from pg_publication p where p.pubname = $1`

/** publication: created, or reset to the mirrored tables (and the capture log) unless it holds exactly those. */
const publish = (source: PgSession, pipeline: PipelineNames, tables: ReadonlyArray<string>, username: string) =>
  Effect.gen(function* () {
    const [publication] = yield* source.query<{ as_wanted: boolean }>(PUBLICATION_STATE, [pipeline.publication, [...tables]]).pipe(
      Effect.mapError((e) => stepFailed("publication", e))
    )
    if (publication?.as_wanted === true) return
    // Each table ONLY: an inheritance parent named without it brings its children, which are
    // tables of their own (selected or not; the mirror has none it was not asked for).
    const list = tables.map((table) => `only ${table}`).join(", ")
    const statement =
      publication === undefined
        ? `create publication ${quoteIdent(pipeline.publication)} for table ${list} with (publish_via_partition_root = true)`
        : `alter publication ${quoteIdent(pipeline.publication)} set table ${list}`
    yield* source.query(statement).pipe(
      Effect.mapError((e) =>
        stepFailed(
          "publication",
          PRIVILEGE_ERRORS.has(e.sqlstate ?? "")
            ? `the role ${username} may not publish the selected tables (${e.reason}); run the grant script (POST /v1/connectors/{connector_id}/grant-script) as an administrator, then retry`
            : e.message
        )
      )
    )
  })

/**
 * slot: the pipeline's logical slot on the source, unless it is there. One the source invalidated
 * can stream no more (SlotSql), and a mirror that followed it has missed changes: setup does not
 * quietly replace it under a subscription that would go on from the new one, it says how to copy
 * again (a reset drops the slot first; so does the quarantine monitor's restore).
 */
const createSlot = (source: PgSession, slotName: string) =>
  Effect.gen(function* () {
    const { state } = yield* slotPosition(source, slotName).pipe(Effect.mapError((e) => stepFailed("slot", e)))
    if (state === "invalidated") {
      return yield* stepFailed(
        "slot",
        `the source invalidated the replication slot ${slotName} (its WAL removed past max_slot_wal_keep_size, or idle too long); POST /v1/connectors/{connector_id}/reset drops it and copies the mirror again`
      )
    }
    if (state === "missing") yield* source.query("select pg_create_logical_replication_slot($1, 'pgoutput')", [slotName]).pipe(Effect.mapError((e) => stepFailed("slot", e)))
  })

/** The sessions setup opens on the engine. */
const setupSession = (run: SetupRun): EngineSessionOptions => ({ applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(run.options.connectTimeout) })

/** A failure to reach or use an engine database, as the failure of setup step `step`. */
const asStep =
  (step: string) =>
  <A, E, R>(self: Effect.Effect<A, E, R>) =>
    Effect.catchIf(self, (e): e is Extract<E, PgStepFailed> => e instanceof PgStepFailed, (e) => Effect.fail(stepFailed(step, e)))

/** A setup step's session on the mirror database, for `use` alone. */
const onSetupMirror = <A, E, R>(run: SetupRun, engine: Engine, mirrorDatabase: string, step: string, use: (mirror: PgSession) => Effect.Effect<A, E, R>) =>
  onEngineDatabase(engine, mirrorDatabase, setupSession(run), use).pipe(asStep(step))

/** A setup step's change to the mirror, on a session opened once the subscription lock is held. */
const onSetupMirrorUnderLock = <A, E, R>(run: SetupRun, engine: Engine, mirrorDatabase: string, step: string, use: (mirror: PgSession) => Effect.Effect<A, E, R>) =>
  onMirrorUnderLock(engine, mirrorDatabase, setupSession(run), use).pipe(asStep(step))

/**
 * The engine side: schema → subscription (tables no longer selected leave the mirror) → the
 * initial copy. Each step on a session of the mirror of its own, opened under the copy lock where
 * the step holds it: a roll-out runs on a ready engine, whose branch batches copy the mirror only
 * once no session is connected to it, and wait with the lock held.
 */
const buildMirror = (run: SetupRun, basis: SetupBasis, engine: Engine, prepared: SourcePrepared) =>
  Effect.gen(function* () {
    const tablesTotal = prepared.tables.length
    const database = basis.pipeline.mirrorDatabase
    yield* run.step("schema", 20, { tables_total: tablesTotal })
    // The mirror's schema changes under the subscription lock: a branch batch lists the paused
    // mirror's objects once for all its copies (a roll-out runs on an engine that was ready).
    yield* onSetupMirrorUnderLock(run, engine, database, "schema", (mirror) =>
      Effect.gen(function* () {
        // Scion's objects first (the capture log's apply trigger, in both modes): the schema's
        // types are made by the same function that follows them later.
        yield* installMirrorFollowing(mirror).pipe(Effect.mapError((e) => stepFailed("schema", e)))
        yield* createMirrorTables(mirror, prepared)
        // The mirror's bookkeeping.
        yield* prepareMirror(mirror, { ...prepared.capture, tables: basis.refs.map(qualified) }).pipe(Effect.mapError((e) => stepFailed("schema", e)))
      })
    )

    yield* run.step("subscription", 30, { tables_total: tablesTotal })
    yield* subscribe(run, engine, basis.pipeline, basis.details, prepared.mode)
    const unselected = yield* tablesNoLongerSelected(run.connectorId, basis.plan)
    if (unselected.length > 0) {
      yield* onSetupMirrorUnderLock(run, engine, database, "subscription", (mirror) => dropTables(mirror, unselected))
    }

    // The initial copy: every table of the subscription ready, progress moving with them.
    yield* awaitInitialCopy(run, engine, database, basis.pipeline.subscription, (ready, total) =>
      run.step("initial_copy", 35 + Math.floor((50 * ready) / Math.max(total, 1)), { tables_total: total, tables_ready: ready })
    )
  })

/** Tables the mirror held that are no longer selected: they leave it (the refresh stopped replicating them). */
const tablesNoLongerSelected = (connectorId: string, plan: MirrorPlan) =>
  Effect.map(EngineSetupRepo.mirroredTables(connectorId), (mirrored) => {
    const keep = new Set(plan.tables.map(({ table }) => table.path))
    return mirrored.filter((path) => !keep.has(path))
  })

const dropTables = (mirror: PgSession, paths: ReadonlyArray<string>) =>
  Effect.forEach(
    paths,
    (path) => {
      const [, schema, name] = path.split(".")
      return mirror.query(`drop table if exists ${qualified({ schema: schema!, name: name! })} cascade`).pipe(Effect.mapError((e) => stepFailed("subscription", e)))
    },
    { discard: true }
  )

/** readiness: the evidence recorded; a failed check fails the job (and, outside a deep reset, the engine: failed_validation). */
const validate = (run: SetupRun, basis: SetupBasis, engine: Engine, instance: string, tablesTotal: number) =>
  Effect.gen(function* () {
    yield* run.step("readiness", 88, { tables_total: tablesTotal, tables_ready: tablesTotal })
    const evidence = yield* recordReadiness({
      connectorId: run.connectorId,
      pipeline: basis.pipeline,
      engine,
      instance,
      details: basis.details,
      plan: basis.plan,
      sourceOptions: basis.sourceOptions,
      engineOptions: { applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(run.options.connectTimeout) },
      catchUpTimeout: run.options.catchUpTimeout
    })
    const failed = evidence.checks.filter((c) => c.status === "fail")
    if (failed.length === 0) return evidence.attemptId
    // A deep reset's shadow failing validation leaves the active mirror serving.
    if (run.mode !== "deep_reset") yield* EngineSetupRepo.setEngineStatus(run.connectorId, "failed_validation")
    return yield* new JobFailed({
      message: `Engine validation failed: ${failed.length} of ${evidence.checks.length} readiness checks failed (attempt ${evidence.attemptId}: ${failed
        .slice(0, 3)
        .map((c) => `${c.check_name} on ${c.table_path}`)
        .join(", ")}${failed.length > 3 ? ", …" : ""}); see GET /v1/connectors/${run.connectorId}/readiness-checks?attempt_id=${evidence.attemptId}&only_failed=true`
    })
  })

/**
 * A deep reset's validated shadow: its cutover is an operation of its own. Until then branches are
 * cut from the active mirror, untouched.
 */
const handOverShadow = (run: SetupRun, basis: SetupBasis, attemptId: string) =>
  Effect.gen(function* () {
    const tables = basis.plan.tables.map(({ table }) => table.path)
    yield* PipelinesRepo.markShadow(run.connectorId, basis.pipeline.publication, tables)
    yield* run.report({ stage: "cutover", stageLabel: "The new pipeline is ready: cutting over", progress: 99 })
    const cutover = yield* startPipelineOperation({ connectorId: run.connectorId, orgId: basis.connector.orgId, action: "cutover", pipelineId: basis.pipeline.publication, guard: true })
    yield* Effect.logInfo("shadow pipeline ready").pipe(Effect.annotateLogs({ connector_id: run.connectorId, pipeline: basis.pipeline.publication, cutover_operation_id: cutover }))
    return {
      connector_id: run.connectorId,
      pipeline_id: basis.pipeline.publication,
      mirror_database: basis.pipeline.mirrorDatabase,
      tables,
      readiness_attempt_id: attemptId,
      cutover_operation_id: cutover
    } satisfies JsonObject
  })

/** The verdict of a setup, rollout or reset: ready (degraded while a quarantine stands), indexed. */
const markReady = (run: SetupRun, basis: SetupBasis, attemptId: string, instance: string, prepared: SourcePrepared) =>
  Effect.gen(function* () {
    const tables = basis.plan.tables.map(({ table }) => table.path)
    const tablesTotal = prepared.tables.length
    yield* EngineSetupRepo.markReady({
      connectorId: run.connectorId,
      mirroredTables: tables,
      steps: STEPS.map(([name]) => name),
      // A reset replaced the pipeline a quarantine paused; a rollout on a quarantined mirror leaves it degraded.
      endQuarantine: run.mode === "reset",
      activePipeline: basis.pipeline.publication,
      schemaFollow: prepared.mode,
      attemptId,
      mode: run.mode
    })
    yield* run.report({
      stage: "ready",
      stageLabel: "The engine is ready to branch",
      progress: 99,
      ...(run.mode === "setup" ? { setupStatus: setupStatus("done", { tables_total: tablesTotal, tables_ready: tablesTotal }) } : {})
    })
    yield* Effect.logInfo(run.mode === "setup" ? "engine set up" : "selection rolled out").pipe(
      Effect.annotateLogs({ connector_id: run.connectorId, tables: tablesTotal, attempt_id: attemptId })
    )
    return {
      connector_id: run.connectorId,
      branching_engine_status: "ready",
      mirror_database: basis.pipeline.mirrorDatabase,
      tables,
      excluded_tables: [...basis.plan.excluded],
      readiness_attempt_id: attemptId,
      pod_name: instance
    } satisfies JsonObject
  })

/**
 * A failed run: a deep reset's shadow is dropped (the active mirror keeps serving); otherwise the
 * engine is failed — unless the readiness step already said failed_validation, or a rollout
 * failed, which leaves the engine as it was — and indexing is failed.
 */
const recordFailure = (run: SetupRun): Effect.Effect<void, never, EngineSetupRepo | PipelinesRepo | ConnectorsRepo | SecretStore | EngineProvisioner> =>
  run.mode === "deep_reset"
    ? Effect.gen(function* () {
        const shadow = yield* PipelinesRepo.byOperation(run.operationId)
        if (Option.isNone(shadow)) return
        yield* dropPipeline(run.connectorId, namesOf(shadow.value))
        yield* PipelinesRepo.markFailed(run.operationId)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("a failed shadow pipeline could not be cleaned up", cause)))
    : Effect.gen(function* () {
        const status = yield* EngineSetupRepo.engineStatus(run.connectorId)
        if (Option.isSome(status) && status.value !== "failed_validation" && run.mode !== "rollout") yield* EngineSetupRepo.setEngineStatus(run.connectorId, "failed")
        yield* EngineSetupRepo.markIndexingFailed(run.connectorId)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("a failed setup could not be recorded", cause)))

/** The source's extensions the mirror does not have (the prelude could not make them). */
const missingExtensions = (mirror: PgSession, ddl: MirrorDdl) =>
  mirror
    .query<{ name: string }>("select name from unnest($1::text[]) as name where not exists (select from pg_extension where extname = name) order by 1", [ddl.extensions.map((e) => e.name)])
    .pipe(
      Effect.map((rows) => rows.map((row) => row.name)),
      Effect.orElseSucceed(() => [] as ReadonlyArray<string>)
    )

/** The schema step: extensions, schemas, types and sequences, then each table in one transaction, then the foreign keys. */
const createMirrorTables = (mirror: PgSession, ddl: MirrorDdl) =>
  Effect.gen(function* () {
    const onMirror = (text: string, values: ReadonlyArray<unknown> = []) => mirror.query(text, values).pipe(Effect.mapError((e) => stepFailed("schema", e)))
    for (const schema of ddl.schemas) yield* onMirror(`create schema if not exists ${quoteIdent(schema)}`)
    for (const statement of ddl.prelude) yield* onMirror(statement)
    for (const table of ddl.tables) {
      const [present] = yield* onMirror("select to_regclass($1) is not null as present", [qualified(table.table)])
      if ((present as { present?: boolean } | undefined)?.present === true) continue
      // One transaction per table: a crash leaves it wholly made or not at all.
      yield* mirror.query(`begin; ${table.create.join("; ")}; commit`).pipe(
        Effect.tapError(() => mirror.query("rollback").pipe(Effect.ignore)),
        Effect.catchAll((e) => Effect.flatMap(missingExtensions(mirror, ddl), (missing) => Effect.fail(stepFailed("schema", missing.length === 0 ? e : `${e.reason}; the engine could not make the source's extension(s) ${missing.join(", ")}, which the table may need`))))
      )
    }
    for (const table of ddl.tables) {
      for (const key of table.foreignKeys) {
        const [present] = yield* onMirror("select 1 from pg_constraint where conrelid = $1::regclass and conname = $2", [qualified(table.table), key.name])
        if (present === undefined) yield* onMirror(key.statement)
      }
    }
  })

/**
 * Rows in binary form only where the mirror's columns always have the source's types when they
 * arrive: captured changes apply in commit order with the rows. Reconciliation follows a type
 * change after rows of the new type may have arrived, and a binary value read as the old type
 * decodes silently wrong (a bigint read as numeric: 1999 became 0); in text form such a row
 * fails to apply, which tells the reconciler to apply the change now, and the row then applies.
 */
const binaryTransfer = (mode: SchemaFollowMode) => (mode === "capture" ? "true" : "false")

/**
 * The subscription step, under the subscription lock (never under a branch's template copy, for
 * which the branch unit holds it with the subscription paused): a new subscription copies
 * everything (the capture log and heartbeat from the start too); an existing one is enabled, given
 * the current credentials (a PUT may have changed them) and refreshed (the table set may have).
 */
const subscribe = (run: SetupRun, engine: Engine, pipeline: PipelineNames, details: PostgresDetails, mode: SchemaFollowMode) =>
  onSetupMirrorUnderLock(run, engine, pipeline.mirrorDatabase, "subscription", (mirror) =>
    Effect.gen(function* () {
      const onMirror = <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) =>
        mirror.query<R>(text, values).pipe(Effect.mapError((e) => stepFailed("subscription", e)))
      const conninfo = quoteLiteral(subscriptionConninfo(details, details.password))
      const [subscription] = yield* onMirror<{ enabled: boolean }>("select subenabled as enabled from pg_subscription where subname = $1", [pipeline.subscription])
      if (subscription === undefined) {
        yield* onMirror(
          "do $$ begin if to_regclass('scion.schema_log') is not null then truncate scion.schema_log; end if; if to_regclass('scion.heartbeat') is not null then truncate scion.heartbeat; end if; end $$"
        )
        yield* withoutStatementLog(
          mirror,
          onMirror(
            `create subscription ${quoteIdent(pipeline.subscription)} connection ${conninfo}
             publication ${quoteIdent(pipeline.publication)}
             with (create_slot = false, slot_name = ${quoteLiteral(pipeline.slot)}, copy_data = true, enabled = true, binary = ${binaryTransfer(mode)})`
          )
        )
        return
      }
      if (!subscription.enabled) yield* onMirror(`alter subscription ${quoteIdent(pipeline.subscription)} enable`)
      yield* onMirror(`alter subscription ${quoteIdent(pipeline.subscription)} set (binary = ${binaryTransfer(mode)})`)
      yield* withoutStatementLog(mirror, onMirror(`alter subscription ${quoteIdent(pipeline.subscription)} connection ${conninfo}`))
      yield* onMirror(`alter subscription ${quoteIdent(pipeline.subscription)} refresh publication with (copy_data = true)`)
    })
  )

/** The replica_identity step: each decision applied on the source unless it already holds. */
const applyReplicaIdentityDecisions = (source: PgSession, plan: MirrorPlan, username: string) =>
  Effect.gen(function* () {
    for (const { table, decision } of plan.tables) {
      if (decision === null) continue
      const name = qualified({ schema: table.path.split(".")[1]!, name: table.name })
      const statement =
        decision === "replica_identity_full"
          ? `alter table ${name} replica identity full`
          : `alter table ${name} add column if not exists scion_row_id bigint generated by default as identity, add constraint ${quoteIdent(`${table.name.slice(0, 50)}_scion_pk`)} primary key (scion_row_id)`
      const [current] = yield* source.query<{ identity: string; has_pk: boolean }>(
        "select c.relreplident as identity, exists (select 1 from pg_constraint where conrelid = c.oid and contype = 'p') as has_pk from pg_class c where c.oid = $1::regclass",
        [name]
      ).pipe(Effect.mapError((e) => stepFailed("replica_identity", e)))
      const done = decision === "replica_identity_full" ? current?.identity === "f" : current?.has_pk === true
      if (done) continue
      yield* source.query(statement).pipe(
        Effect.mapError((e) =>
          stepFailed(
            "replica_identity",
            PRIVILEGE_ERRORS.has(e.sqlstate ?? "")
              ? `the role ${username} may not change ${table.path} (decision ${decision}); run as the table's owner: ${statement};`
              : e.message
          )
        )
      )
    }
  })

/** The initial_copy step: waits until every table of the subscription is ready (bounded). */
const awaitInitialCopy = <E>(
  run: SetupRun,
  engine: Engine,
  mirrorDatabase: string,
  subscription: string,
  progress: (ready: number, total: number) => Effect.Effect<void, E>
) =>
  Effect.gen(function* () {
    const options = run.options
    const started = Date.now()
    let lastReady = -1
    for (;;) {
      // A session for each look, not one through the copy (which can take hours): a branch batch
      // copies the mirror only once no session is connected to it. (The tables' states are the
      // mirror database's own catalog: they cannot be read from another database.)
      const [state] = yield* onSetupMirror(run, engine, mirrorDatabase, "initial_copy", (mirror) =>
        mirror.query<{ ready: number; total: number; sync_errors: number }>(
          `select count(*) filter (where r.srsubstate = 'r')::int as ready, count(*)::int as total,
                  coalesce((select sync_error_count from pg_stat_subscription_stats st where st.subname = s.subname), 0)::int as sync_errors
           from pg_subscription s left join pg_subscription_rel r on r.srsubid = s.oid
           where s.subname = $1 group by s.subname`,
          [subscription]
        )
      )
      const ready = state?.ready ?? 0
      const total = state?.total ?? 0
      if (ready !== lastReady) {
        lastReady = ready
        yield* progress(ready, total)
      }
      if (total > 0 && ready === total) break
      if ((state?.sync_errors ?? 0) > options.maxSyncErrors) {
        return yield* stepFailed("initial_copy", `the engine failed to copy a table ${state?.sync_errors} times; the source's tables may have changed since discovery (discover and select again)`)
      }
      if (Date.now() - started > Duration.toMillis(options.syncTimeout)) {
        return yield* stepFailed("initial_copy", `the initial copy did not finish within ${Duration.format(options.syncTimeout)} (${ready} of ${total} tables ready)`)
      }
      yield* Effect.sleep(Duration.millis(100))
    }
  })

/**
 * The reset's first step: the subscription dropped (under the subscription lock, keeping the slot
 * out of it), the slot dropped on the source (ending a walsender still holding it), the mirrored
 * tables and the capture log emptied. The schema stays.
 */
const resetPipeline = (run: SetupRun, { pipeline, details, sourceOptions }: SetupBasis) =>
  Effect.gen(function* () {
    const provisioner = yield* EngineProvisioner
    const failed = (e: PgStepFailed | string) => stepFailed("reset", e)
    const mirroredTables = yield* EngineSetupRepo.mirroredTables(run.connectorId)
    const engine = yield* provisioner.start(run.connectorId).pipe(Effect.mapError((e) => failed(e.message)))
    yield* dropSubscriptionKeepingSlot(engine, pipeline.mirrorDatabase, pipeline.subscription, "scion-engine-setup").pipe(asStep("reset"))
    yield* onEngineDatabase(engine, pipeline.mirrorDatabase, setupSession(run), (mirror) => emptyMirroredTables(mirror, mirroredTables, true)).pipe(asStep("reset"))
    yield* Effect.scoped(
      Effect.gen(function* () {
        const source = yield* sourceSession(details, details.password, sourceOptions)
        const [slot] = yield* source.query<{ active_pid: number | null }>("select active_pid from pg_replication_slots where slot_name = $1", [pipeline.slot])
        if (slot === undefined) return
        if (slot.active_pid !== null) yield* source.query("select pg_terminate_backend($1, 5000)", [slot.active_pid])
        yield* source.query("select pg_drop_replication_slot($1)", [pipeline.slot])
      })
    ).pipe(Effect.mapError(failed))
  })

