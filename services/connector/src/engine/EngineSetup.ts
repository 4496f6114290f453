import type { JsonObject } from "@bufbuild/protobuf"
import { SqlClient, type SqlError } from "@effect/sql"
import {
  dieOnSqlError,
  enqueueJob,
  JobFailed,
  type JobHandler,
  newOperationId,
  type OperationEnded,
  type Principal,
  quoteIdent,
  quoteLiteral,
  type RpcError,
  transactional
} from "@scion/kit"
import { randomBytes } from "node:crypto"
import { Config, Duration, Effect, Either, Fiber, Layer, Option, Schedule, Schema } from "effect"
import { PostgresDetails } from "../connectors/ConnectionDetails.js"
import { Connectors, type ConnectorView } from "../connectors/Connectors.js"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { type ConnectorOperationType, ConnectorOperations, type StartedStatus } from "../connectors/Discovery.js"

import type { PreflightCheck } from "../connectors/Preflight.js"
import type { Decision } from "../connectors/ReplicaIdentity.js"
import { type DiscoveredTable, isStructure, tablesOf } from "../connectors/SchemaIntrospection.js"
import { ConnectorStateInvalid, DeleteInProgress, EngineNotSetUp, EngineSetupInProgress, EngineSetupPrerequisitesFailed, type OperationsUnavailable, RollbackUnavailable } from "../domain/errors.js"
import type { Connector } from "../domain/models.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { type Engine, EngineProvisioner } from "./EngineProvisioner.js"
import { qualified, readMirrorDdl, type TableRef, UnsupportedDdl } from "./MirrorSchema.js"
import { dropSubscriptionKeepingSlot, engineRecord } from "./EngineReplication.js"
import { engineSession, PgStepFailed, sourceSession, withSubscriptionLock } from "./PgSession.js"
import { activePipeline, type PipelineNames, pipelineNames } from "../replication/PipelineNames.js"
import { dropPipeline, rollbackTarget, shadowPipeline, startPipelineOperation } from "../replication/Pipelines.js"
import { wholeSchemasOf } from "../replication/CaptureSql.js"
import { prepareCapture, prepareMirror, publishedTables, readSnapshots, recordPublicationScope, type SchemaFollowMode } from "../replication/SourceCapture.js"

export { activePipeline, MIRROR_DATABASE, type PipelineNames, pipelineNames, replicationNames } from "../replication/PipelineNames.js"

/** Subject `jobs.connector.engine_setup`, durable `connector-engine_setup`: setups and rollouts. */
export const ENGINE_SETUP_JOB = { unit: "connector", type: "engine_setup" } as const


/**
 * branching_engine_status values (the interface names failed_validation; the rest are ours).
 * degraded: set up, but its replication is quarantined, so the mirror may be stale.
 */
export type BranchingEngineStatus = "not_set_up" | "setting_up" | "ready" | "degraded" | "failed_validation" | "failed"

/** An engine that has been set up and serves branches (degraded ones only to callers who accept stale data). */
const isSetUp = (status: string) => status === "ready" || status === "degraded"

export const EngineSetupPayload = Schema.Struct({
  connector_id: Schema.String,
  /**
   * setup: POST …/engine-setup; rollout: POST …/index on a ready engine (the same steps, re-run);
   * reset: POST …/reset (the subscription and slot dropped, the mirror emptied, then the same steps);
   * deep_reset: POST …/deep-reset (the same steps for a new pipeline beside the active one, then a cutover).
   */
  mode: Schema.Literal("setup", "rollout", "reset", "deep_reset")
})
export type EngineSetupPayload = typeof EngineSetupPayload.Type

/** What the 202 answers. */
export interface SetupStarted {
  readonly operationId: string
  readonly connectorId: string
  readonly status: StartedStatus
  readonly type: OperationTypeOfMode | "connector_replication_rollback"
}

/** The operation each mode of the setup job runs as. */
const operationTypeOf = { setup: "connector_engine_setup", rollout: "connector_rollout", reset: "connector_reset", deep_reset: "connector_deep_reset" } as const satisfies Record<
  EngineSetupPayload["mode"],
  ConnectorOperationType
>
type OperationTypeOfMode = (typeof operationTypeOf)[EngineSetupPayload["mode"]]

/** POST …/engine-setup: a new operation, or the connector when its engine is already set up. */
export type SetupOutcome = { readonly _tag: "Started"; readonly started: SetupStarted } | { readonly _tag: "AlreadySetUp"; readonly connector: ConnectorView; readonly message: string }

/** POST …/index: a rollout operation, or the connector with the selection recorded. */
export type IndexOutcome = { readonly _tag: "Started"; readonly started: SetupStarted } | { readonly _tag: "Recorded"; readonly connector: ConnectorView; readonly message: string }

const pass = (id: string, message: string): PreflightCheck => ({ id, status: "pass", message, remedy: null })
const fail = (id: string, message: string, remedy: string): PreflightCheck => ({ id, status: "fail", message, remedy })



/** The selected tables of the connector's database, and what was decided for each. */
export interface MirrorPlan {
  readonly database: string
  /** Tables to mirror, with the decision that lets each replicate (none when it already can). */
  readonly tables: ReadonlyArray<{ readonly table: DiscoveredTable; readonly decision: Decision | null }>
  /** Selected tables left out by an `exclude` decision. */
  readonly excluded: ReadonlyArray<string>
}

/**
 * Engine setup's prerequisites, in order (services/connector/README.md, "Engine setup"): a
 * discovery, a selection taken from the current schema, every selected table in the database of
 * the connection details, and a decision for every selected table without a replica identity.
 */
export const setupPrerequisites = (connector: Connector, database: string): { readonly checks: ReadonlyArray<PreflightCheck>; readonly plan: Option.Option<MirrorPlan> } => {
  const checks: Array<PreflightCheck> = []
  if (!isStructure(connector.schemaStructure)) {
    checks.push(fail("discovered", "The source has not been discovered", "Run POST /v1/connectors/{connector_id}/discover and wait for it to complete."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("discovered", `Schema version ${connector.schemaVersion} discovered`))
  const selected = isStructure(connector.selectedSchemaStructure) ? tablesOf(connector.selectedSchemaStructure) : []
  if (selected.length === 0) {
    checks.push(fail("selected", "No table is selected", "Choose tables with POST /v1/connectors/{connector_id}/selection."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("selected", `${selected.length} table(s) selected`))
  if (connector.selectionSchemaVersion !== null && connector.schemaVersion > connector.selectionSchemaVersion) {
    checks.push(fail("selection_current", `The source's schema changed since the selection (schema_version ${connector.schemaVersion}, selected at ${connector.selectionSchemaVersion})`, "Select again with POST /v1/connectors/{connector_id}/selection."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("selection_current", "The selection was taken from the current schema"))
  const elsewhere = selected.filter((t) => t.path.split(".")[0] !== database)
  if (elsewhere.length > 0) {
    checks.push(
      fail(
        "one_database",
        `An engine mirrors one database (${database}); selected tables of other databases: ${elsewhere.map((t) => t.path).join(", ")}`,
        `Select tables of ${database} only, or create one connector per database.`
      )
    )
    return { checks, plan: Option.none() }
  }
  checks.push(pass("one_database", `Every selected table is in ${database}`))
  const decisions = ((connector.replicaIdentityPreflight as { decisions?: Record<string, Decision> } | null)?.decisions ?? {}) as Readonly<Record<string, Decision>>
  const unresolved = selected.filter((t) => !t.has_replica_identity && decisions[t.path] === undefined).map((t) => t.path)
  if (unresolved.length > 0) {
    checks.push(
      fail(
        "replica_identity_decisions",
        `Selected tables without a replica identity have no decision: ${unresolved.join(", ")}`,
        "Decide exclude, add_pk or replica_identity_full for each with PUT /v1/connectors/{connector_id}/replica-identity-decisions."
      )
    )
    return { checks, plan: Option.none() }
  }
  const tables = selected.flatMap((table): Array<MirrorPlan["tables"][number]> => {
    if (table.has_replica_identity) return [{ table, decision: null }]
    const decision = decisions[table.path]!
    return decision === "exclude" ? [] : [{ table, decision }]
  })
  const excluded = selected.filter((t) => !t.has_replica_identity && decisions[t.path] === "exclude").map((t) => t.path)
  if (tables.length === 0) {
    checks.push(fail("replica_identity_decisions", "Every selected table is excluded", "Select tables that can replicate, or decide add_pk or replica_identity_full for some."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("replica_identity_decisions", excluded.length === 0 ? "Every selected table can replicate" : `Excluded by decision: ${excluded.join(", ")}`))
  return { checks, plan: Option.some({ database, tables, excluded }) }
}



const operationPrefixOf = { setup: "eng", rollout: "roll", reset: "rst", deep_reset: "drst" } as const satisfies Record<EngineSetupPayload["mode"], string>


/**
 * Starting engine setup (POST …/engine-setup) and applying a selection (POST …/index). The
 * connector row is locked while deciding, so a setup, a rollout and a delete never start together.
 */
export class EngineSetup extends Effect.Service<EngineSetup>()("@scion/connector/EngineSetup", {
  effect: Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const connectors = yield* Connectors
    const secrets = yield* SecretStore
    const operations = yield* ConnectorOperations
    const provisioner = yield* EngineProvisioner
    const sql = yield* SqlClient.SqlClient
    const transaction = transactional(sql)

    const storedDetails = (connectorId: string) =>
      storedPostgresDetails(connectorId).pipe(
        Effect.provideService(ConnectorsRepo, repo),
        Effect.provideService(SecretStore, secrets),
        Effect.mapError((e) => e.reason),
        Effect.either
      )

    const activeOperation = (operationId: string | null) =>
      Effect.gen(function* () {
        if (operationId === null) return Option.none<string>()
        const status = yield* operations.status(operationId)
        return Option.isSome(status) && (status.value === "pending" || status.value === "running") ? Option.some(operationId) : Option.none<string>()
      })

    /**
     * Inside a transaction: locks the connector row and refuses while a delete or another of its
     * pipeline operations (setup, rollout, reset, deep reset, cutover, rollback) runs.
     */
    const lockIdle = (connectorId: string) =>
      Effect.gen(function* () {
        const [row] = yield* sql<{ readonly setup_operation_id: string | null; readonly delete_operation_id: string | null }>`
          select setup_operation_id, delete_operation_id from connectors where id = ${connectorId} for update`
        const deleting = yield* activeOperation(row?.delete_operation_id ?? null)
        if (Option.isSome(deleting)) return yield* new DeleteInProgress({ connectorId, operationId: deleting.value })
        const setting = yield* activeOperation(row?.setup_operation_id ?? null)
        if (Option.isSome(setting)) return yield* new EngineSetupInProgress({ connectorId, operationId: setting.value })
      })

    /** Locks the row, refuses while a delete or another setup runs, then creates the operation and its job. */
    const dispatch = (connector: Connector, mode: EngineSetupPayload["mode"]) =>
      transaction(
        Effect.gen(function* () {
          yield* lockIdle(connector.id)
          const operationId = newOperationId(operationPrefixOf[mode])
          const type = operationTypeOf[mode]
          yield* operations.create({ id: operationId, orgId: connector.orgId, resourceId: connector.id, type })
          yield* sql`update connectors set setup_operation_id = ${operationId}, updated_at = now(),
                       branching_engine_status = case when ${mode} in ('setup', 'reset') then 'setting_up' else branching_engine_status end,
                       indexing_status = case when ${mode} = 'deep_reset' then indexing_status else 'indexing' end
                     where id = ${connector.id}`
          yield* enqueueJob({ ...ENGINE_SETUP_JOB, operationId, orgId: connector.orgId, payload: { connector_id: connector.id, mode } }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql)
          )
          return { operationId, connectorId: connector.id, status: "pending", type } satisfies SetupStarted
        })
      )

    /** The checks of the 422, or the plan: the stored details decide which database is mirrored. */
    const checkPrerequisites = (connector: Connector) =>
      Effect.gen(function* () {
        if (connector.serviceName !== "postgresql") {
          return yield* new ConnectorStateInvalid({ connectorId: connector.id, reason: `engines mirror PostgreSQL sources; this connector is ${connector.serviceName}` })
        }
        const details = yield* storedDetails(connector.id)
        if (Either.isLeft(details)) {
          return yield* new EngineSetupPrerequisitesFailed({
            checks: [fail("credentials", `The connector's credentials cannot be used: ${details.left}`, "Send the connection details again with PUT /v1/connectors/{connector_id}.")]
          })
        }
        const checked = setupPrerequisites(connector, details.right.database)
        if (Option.isNone(checked.plan)) return yield* new EngineSetupPrerequisitesFailed({ checks: checked.checks })
        return checked.plan.value
      })

    /**
     * POST …/engine-setup (connectors.update): 200 with a message when the engine is ready and
     * mirrors the latest selection; otherwise the prerequisites (422) and a new operation.
     */
    const setUp = Effect.fn("EngineSetup.setUp")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      yield* checkPrerequisites(connector)
      if (isSetUp(connector.branchingEngineStatus) && connector.lastIndexedVersion >= connector.selectedSchemaVersion) {
        return { _tag: "AlreadySetUp", connector: yield* connectors.get(principal, connector.id), message: "The engine is already set up and mirrors the current selection" } satisfies SetupOutcome
      }
      // A ready engine with a newer selection is brought up to date by the same steps.
      const started = yield* dispatch(connector, isSetUp(connector.branchingEngineStatus) ? "rollout" : "setup")
      yield* Effect.logInfo("engine setup started").pipe(Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId, type: started.type }))
      return { _tag: "Started", started } satisfies SetupOutcome
    }, dieOnSqlError)

    /**
     * POST …/index (connectors.update): applies the selection. On a ready engine that is behind
     * the selection, a connector_rollout operation; while no engine is set up, the selection is
     * recorded as the one engine setup will mirror; when nothing changed, the connector as it is.
     */
    const index = Effect.fn("EngineSetup.index")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      if (!isStructure(connector.selectedSchemaStructure)) {
        return yield* new ConnectorStateInvalid({ connectorId: connector.id, reason: "nothing is selected: choose tables with POST /v1/connectors/{connector_id}/selection first" })
      }
      if (connector.branchingEngineStatus === "setting_up") {
        const [row] = yield* sql<{ readonly setup_operation_id: string | null }>`select setup_operation_id from connectors where id = ${connector.id}`
        const setting = yield* activeOperation(row?.setup_operation_id ?? null)
        if (Option.isSome(setting)) return yield* new EngineSetupInProgress({ connectorId: connector.id, operationId: setting.value })
      }
      if (isSetUp(connector.branchingEngineStatus)) {
        if (connector.lastIndexedVersion >= connector.selectedSchemaVersion) {
          return { _tag: "Recorded", connector: yield* connectors.get(principal, connector.id), message: "The engine already mirrors the current selection" } satisfies IndexOutcome
        }
        yield* checkPrerequisites(connector)
        const started = yield* dispatch(connector, "rollout")
        yield* Effect.logInfo("selection rollout started").pipe(Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId }))
        return { _tag: "Started", started } satisfies IndexOutcome
      }
      yield* sql`update connectors set last_indexed_version = selected_schema_version, indexing_status = 'indexed', updated_at = now()
                 where id = ${connector.id} and last_indexed_version < selected_schema_version`
      return {
        _tag: "Recorded",
        connector: yield* connectors.get(principal, connector.id),
        message: "Selection recorded: engine setup will mirror it (POST /v1/connectors/{connector_id}/engine-setup)"
      } satisfies IndexOutcome
    }, dieOnSqlError)

    /**
     * Starts a setup for the quarantine monitor (no caller: the monitor restores a pipeline the
     * engine set up before). A setup or delete in progress is answered as a failure.
     */
    const restart = Effect.fn("EngineSetup.restart")(function* (connectorId: string) {
      const found = yield* repo.find(connectorId)
      if (Option.isNone(found)) return yield* new ConnectorStateInvalid({ connectorId, reason: "the connector no longer exists" })
      return yield* dispatch(found.value, "setup")
    }, dieOnSqlError)

    /**
     * After new connection details (PUT …): the engine's subscription logs in with them from now
     * on. Nothing to do without an engine; a failure is logged, not raised (the update stands,
     * and the quarantine monitor reports replication that breaks).
     */
    const refreshCredentials = Effect.fn("EngineSetup.refreshCredentials")(function* (connectorId: string) {
      const found = yield* engineRecord(connectorId).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      if (Option.isNone(found)) return false
      const record = found.value
      const details = yield* storedDetails(connectorId)
      if (Either.isLeft(details)) return false
      return yield* Effect.scoped(
        Effect.gen(function* () {
          const engine = yield* provisioner.start(connectorId)
          const mirror = yield* engineSession(engine, record.mirror_database, { applicationName: "scion-connector", connectMillis: 10_000 })
          const [present] = yield* mirror.query("select 1 from pg_subscription where subname = $1", [record.subscription_name])
          if (present === undefined) return false
          yield* withSubscriptionLock(
            engine,
            record.mirror_database,
            mirror.query(`alter subscription ${quoteIdent(record.subscription_name)} connection ${quoteLiteral(subscriptionConninfo(details.right, details.right.password))}`)
          )
          yield* Effect.logInfo("engine subscription given the new credentials").pipe(Effect.annotateLogs({ connector_id: connectorId }))
          return true
        })
      ).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("the engine's subscription could not be given the new credentials").pipe(
            Effect.annotateLogs({ connector_id: connectorId, error: (error as { message?: string }).message ?? String(error) }),
            Effect.as(false)
          )
        )
      )
    }, dieOnSqlError)

    /**
     * Work on a set-up engine's pipeline (reset, deep reset): refused when no engine was ever made
     * (a setup in progress answers 409 from dispatch), then engine setup's prerequisites.
     */
    const startPipelineWork = (principal: Principal, connectorId: string, mode: "reset" | "deep_reset") =>
      Effect.gen(function* () {
        const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
        const record = yield* engineRecord(connector.id).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        if (Option.isNone(record) || connector.branchingEngineStatus === "not_set_up") {
          return yield* new EngineNotSetUp({ connectorId: connector.id, status: connector.branchingEngineStatus })
        }
        yield* checkPrerequisites(connector)
        const started = yield* dispatch(connector, mode)
        yield* Effect.logInfo(mode === "reset" ? "replication reset started" : "deep reset started").pipe(
          Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId })
        )
        return started
      })

    /**
     * POST …/reset (connectors.update): a connector_reset operation that re-copies the mirror's
     * data in place from a fresh slot, keeping its schema. Branches wait meanwhile (setting_up).
     */
    const reset = Effect.fn("EngineSetup.reset")(function* (principal: Principal, connectorId: string) {
      return yield* startPipelineWork(principal, connectorId, "reset")
    }, dieOnSqlError)

    /**
     * POST …/deep-reset (connectors.update): a connector_deep_reset operation that builds a new
     * pipeline beside the active one (new slot, publication and mirror database, the DDL read
     * fresh, a full copy, readiness) while branches keep being cut from the current mirror, then
     * starts the cutover. Nothing changes for branches until the cutover.
     */
    const deepReset = Effect.fn("EngineSetup.deepReset")(function* (principal: Principal, connectorId: string) {
      return yield* startPipelineWork(principal, connectorId, "deep_reset")
    }, dieOnSqlError)

    /**
     * POST …/replication-rollback (connectors.update): a connector_replication_rollback operation
     * that makes the pipeline the last cutover replaced active again, while its grace lasts.
     */
    const rollback = Effect.fn("EngineSetup.rollback")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      if (connector.branchingEngineStatus === "not_set_up") return yield* new EngineNotSetUp({ connectorId: connector.id, status: connector.branchingEngineStatus })
      return yield* transaction(
        Effect.gen(function* () {
          yield* lockIdle(connector.id)
          const target = yield* rollbackTarget(connector.id).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          if (Option.isNone(target)) return yield* new RollbackUnavailable({ connectorId: connector.id })
          const operationId = yield* startPipelineOperation({ connectorId: connector.id, orgId: connector.orgId, action: "rollback", pipelineId: target.value.id, guard: true }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.provideService(ConnectorOperations, operations)
          )
          return { operationId, connectorId: connector.id, status: "pending", type: "connector_replication_rollback" } as const
        })
      )
    }, dieOnSqlError)

    return { setUp, index, reset, deepReset, rollback, restart, refreshCredentials } as const
  })
}) {}

// ---------------------------------------------------------------------------------------------
// The job.
// ---------------------------------------------------------------------------------------------

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

/** A libpq conninfo value: single-quoted, with quotes and backslashes escaped. */
const conninfoValue = (value: string | number) => `'${String(value).replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`

/** The source's conninfo for the engine's subscription (stored in the engine's catalog, superuser-only). */
export const subscriptionConninfo = (details: PostgresDetails, password: string) =>
  [
    `host=${conninfoValue(details.host)}`,
    `port=${conninfoValue(details.port)}`,
    `dbname=${conninfoValue(details.database)}`,
    `user=${conninfoValue(details.username)}`,
    `password=${conninfoValue(password)}`,
    `sslmode=${conninfoValue(details.sslmode)}`,
    // No application_name: the walsender then carries the subscription's name (scion_<id>), which
    // tells connectors apart on a shared source.
    "connect_timeout='10'"
  ].join(" ")

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

/** A failure of a step a human can act on: the operation fails with it. */
const stepFailed = (step: string, error: PgStepFailed | UnsupportedDdl | string) =>
  new JobFailed({ message: `${step}: ${typeof error === "string" ? error : error.message}` })

const PRIVILEGE_ERRORS = new Set(["42501"])

export type EngineSetupJobError = JobFailed | OperationEnded | RpcError | SqlError.SqlError | OperationsUnavailable

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
  ConnectorsRepo | SecretStore | EngineProvisioner | EngineSetupConfig | SqlClient.SqlClient | ConnectorOperations
> = {
  ...ENGINE_SETUP_JOB,
  payload: EngineSetupPayload,
  run: (job) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { connector_id: connectorId, mode } = job.payload
      const setEngineStatus = (status: BranchingEngineStatus) =>
        sql`update connectors set branching_engine_status = ${status}, updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid)
      return yield* runSetup(job.operationId, connectorId, mode, job.report).pipe(
        Effect.tapError((error) =>
          error._tag === "JobFailed" && mode === "deep_reset"
            ? // A failed shadow leaves the current mirror serving and is cleaned up.
              Effect.gen(function* () {
                const [shadow] = yield* sql<{ readonly publication_name: string }>`select publication_name from pipelines where operation_id = ${job.operationId}`
                if (shadow === undefined) return
                yield* dropPipeline(connectorId, pipelineNamesOf(shadow.publication_name, connectorId))
                yield* sql`update pipelines set status = 'failed', updated_at = now() where operation_id = ${job.operationId}`
              }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("a failed shadow pipeline could not be cleaned up", cause)))
            : error._tag === "JobFailed"
            ? Effect.gen(function* () {
                // failed_validation is set by the readiness step itself; anything else is a failed setup.
                const [row] = yield* sql<{ readonly branching_engine_status: string }>`select branching_engine_status from connectors where id = ${connectorId}`
                if (row !== undefined && row.branching_engine_status !== "failed_validation") {
                  // A failed rollout leaves the engine as it was; a failed setup or reset leaves no usable mirror.
                  yield* setEngineStatus(mode === "rollout" ? (row.branching_engine_status as BranchingEngineStatus) : "failed")
                }
                yield* sql`update connectors set indexing_status = 'failed', updated_at = now() where id = ${connectorId}`
              }).pipe(Effect.catchAll(() => Effect.void))
            : Effect.void
        )
      )
    }).pipe(Effect.withSpan("engineSetupJob.run", { attributes: { operationId: job.operationId } }))
}

const runSetup = (
  operationId: string,
  connectorId: string,
  mode: EngineSetupPayload["mode"],
  report: (update: { stage?: string; stageLabel?: string; progress?: number; setupStatus?: JsonObject }) => Effect.Effect<void, OperationEnded | RpcError>
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ConnectorsRepo
    const provisioner = yield* EngineProvisioner
    const options = yield* EngineSetupConfig
    const step = (name: StepName, progress: number, extra: JsonObject = {}) => {
      const label = STEPS.find(([n]) => n === name)![1]
      // setup_status belongs to connector_engine_setup operations only (the interface).
      return report({ stage: name, stageLabel: label, progress, ...(mode === "setup" ? { setupStatus: setupStatus(name, extra) } : {}) })
    }

    const found = yield* repo.find(connectorId)
    if (Option.isNone(found)) return yield* new JobFailed({ message: `Connector ${connectorId} no longer exists` })
    const connector = found.value
    if (connector.setupOperationId !== null && connector.setupOperationId !== operationId) {
      return yield* new JobFailed({ message: `Superseded by operation ${connector.setupOperationId}` })
    }

    // Credentials and plan.
    yield* step("source_checks", 2)
    const details = yield* storedPostgresDetails(connectorId).pipe(Effect.mapError((e) => stepFailed("source_checks", e.reason)))
    const checked = setupPrerequisites(connector, details.database)
    if (Option.isNone(checked.plan)) {
      return yield* stepFailed("source_checks", checked.checks.filter((c) => c.status === "fail").map((c) => c.message).join("; "))
    }
    const plan = checked.plan.value
    // The pipeline the steps build: the active one, or for a deep reset a new generation beside it.
    const pipeline = mode === "deep_reset" ? yield* shadowPipeline(connectorId, operationId) : yield* activePipeline(connectorId)
    const refs: ReadonlyArray<TableRef> = plan.tables.map(({ table }) => ({ schema: table.path.split(".")[1]!, name: table.name }))
    const sourceOptions = { applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(options.connectTimeout), queryMillis: Duration.toMillis(options.queryTimeout) }

    if (mode === "reset") {
      // The old pipeline goes first: the steps below then make a fresh slot and copy everything.
      yield* report({ stage: "reset", stageLabel: "Dropping the subscription and the slot, emptying the mirror", progress: 3 })
      yield* resetPipeline(connectorId, pipeline, details, sourceOptions, Duration.toMillis(options.connectTimeout))
    }

    // The engine is provisioned while the source steps run (initdb and the certificate take
    // seconds); its step is reported once the source side is done.
    const provisioning = yield* Effect.fork(
      Effect.gen(function* () {
        const engine = yield* provisioner.provision(connectorId).pipe(Effect.mapError((e) => stepFailed("engine", e.message)))
        yield* Effect.scoped(
          Effect.gen(function* () {
            const admin = yield* engineSession(engine, "postgres", { applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(options.connectTimeout) }).pipe(
              Effect.mapError((e) => stepFailed("engine", e))
            )
            const [exists] = yield* admin.query("select 1 from pg_database where datname = $1", [pipeline.mirrorDatabase]).pipe(Effect.mapError((e) => stepFailed("engine", e)))
            if (exists === undefined) yield* admin.query(`create database ${quoteIdent(pipeline.mirrorDatabase)}`).pipe(Effect.mapError((e) => stepFailed("engine", e)))
          })
        )
        return engine
      })
    )

    const ddl = yield* Effect.scoped(
      Effect.gen(function* () {
        const source = yield* sourceSession(details, details.password, sourceOptions).pipe(Effect.mapError((e) => stepFailed("source_checks", e)))
        const onSource = <R extends Record<string, unknown>>(stepName: StepName, text: string, values: ReadonlyArray<unknown> = []) =>
          source.query<R>(text, values).pipe(Effect.mapError((e) => stepFailed(stepName, e)))
        const [wal] = yield* onSource<{ wal_level: string }>("source_checks", "select current_setting('wal_level') as wal_level")
        if (wal?.wal_level !== "logical") {
          return yield* stepFailed("source_checks", `the source's wal_level is ${wal?.wal_level ?? "unknown"}, not logical (set wal_level = logical and restart the source)`)
        }

        // Decisions: a key or REPLICA IDENTITY FULL on the source, where the role may.
        yield* step("replica_identity", 5)
        for (const { table, decision } of plan.tables) {
          if (decision === null) continue
          const name = qualified({ schema: table.path.split(".")[1]!, name: table.name })
          const statement =
            decision === "replica_identity_full"
              ? `alter table ${name} replica identity full`
              : `alter table ${name} add column if not exists scion_row_id bigint generated by default as identity, add constraint ${quoteIdent(`${table.name.slice(0, 50)}_scion_pk`)} primary key (scion_row_id)`
          const [current] = yield* onSource<{ identity: string; has_pk: boolean }>(
            "replica_identity",
            "select c.relreplident as identity, exists (select 1 from pg_constraint where conrelid = c.oid and contype = 'p') as has_pk from pg_class c where c.oid = $1::regclass",
            [name]
          )
          const done = decision === "replica_identity_full" ? current?.identity === "f" : current?.has_pk === true
          if (done) continue
          yield* source.query(statement).pipe(
            Effect.mapError((e) =>
              stepFailed(
                "replica_identity",
                PRIVILEGE_ERRORS.has(e.sqlstate ?? "")
                  ? `the role ${details.username} may not change ${table.path} (decision ${decision}); run as the table's owner: ${statement};`
                  : e.message
              )
            )
          )
        }

        // Schema changes: captured in commit order where the role may install event triggers,
        // otherwise reconciled by the monitor.
        yield* step("capture", 7)
        const capturePlan = yield* prepareCapture(source).pipe(Effect.mapError((e) => stepFailed("capture", e)))
        const mode = capturePlan.mode

        // The publication: created, or reset to the mirrored tables (and the capture log).
        yield* step("publication", 8)
        const list = publishedTables(refs.map(qualified), capturePlan).join(", ")
        const [publication] = yield* onSource<{ pubname: string }>("publication", "select pubname from pg_publication where pubname = $1", [pipeline.publication])
        const publicationStatement =
          publication === undefined
            ? `create publication ${quoteIdent(pipeline.publication)} for table ${list} with (publish_via_partition_root = true)`
            : `alter publication ${quoteIdent(pipeline.publication)} set table ${list}`
        yield* source.query(publicationStatement).pipe(
          Effect.mapError((e) =>
            stepFailed(
              "publication",
              PRIVILEGE_ERRORS.has(e.sqlstate ?? "")
                ? `the role ${details.username} may not publish the selected tables (${e.reason}); run the grant script (POST /v1/connectors/{connector_id}/grant-script) as an administrator, then retry`
                : e.message
            )
          )
        )

        const wholeSchemas = wholeSchemasOf(connector.selectedEntityPaths, plan.database)
        if (mode === "capture") yield* recordPublicationScope(source, pipeline.publication, wholeSchemas).pipe(Effect.mapError((e) => stepFailed("publication", e)))

        // The slot: made before the subscription so the subscription never has to create it.
        yield* step("slot", 10)
        const [slot] = yield* onSource<{ slot_name: string }>("slot", "select slot_name from pg_replication_slots where slot_name = $1", [pipeline.slot])
        if (slot === undefined) {
          yield* onSource("slot", "select pg_create_logical_replication_slot($1, 'pgoutput')", [pipeline.slot])
        }

        // The mirror's DDL, read now (after decisions changed the source's tables), with the
        // snapshots captured changes are applied against.
        const mirrorDdl = yield* readMirrorDdl(source.query, refs).pipe(
          Effect.mapError((e) => (e instanceof UnsupportedDdl ? stepFailed("schema", e) : e instanceof PgStepFailed ? stepFailed("schema", e) : stepFailed("schema", String(e))))
        )
        // The snapshots serve both ways of following: captured changes are diffed against them,
        // and reconciliation compares the source's catalog with them.
        const snapshots = yield* readSnapshots(source, refs.map(qualified), mode).pipe(Effect.mapError((e) => stepFailed("schema", e)))
        return { ...mirrorDdl, mode: mode as SchemaFollowMode, heartbeat: capturePlan.heartbeat, capture: { ...snapshots, wholeSchemas: mode === "capture" ? wholeSchemas : [] } }
      })
    )

    yield* step("engine", 15)
    const engine = yield* Fiber.join(provisioning)
    const instance = engine.instanceName ?? `engine-${connectorId}`
    yield* sql`
      insert into engines (connector_id, host, port, instance_name, mirror_database, publication_name, slot_name, subscription_name, schema_follow, heartbeat)
      values (${connectorId}, ${engine.host}, ${engine.port}, ${instance}, ${pipeline.mirrorDatabase}, ${pipeline.publication}, ${pipeline.slot}, ${pipeline.subscription}, ${ddl.mode}, ${ddl.heartbeat})
      on conflict (connector_id) do update set host = excluded.host, port = excluded.port, instance_name = excluded.instance_name,
        schema_follow = excluded.schema_follow, heartbeat = excluded.heartbeat, updated_at = now()`
    const engineOptions = { applicationName: "scion-engine-setup", connectMillis: Duration.toMillis(options.connectTimeout) }

    const tablesTotal = ddl.tables.length
    yield* Effect.scoped(
      Effect.gen(function* () {
        const mirror = yield* engineSession(engine, pipeline.mirrorDatabase, engineOptions).pipe(Effect.mapError((e) => stepFailed("schema", e)))
        const onMirror = <R extends Record<string, unknown>>(stepName: StepName, text: string, values: ReadonlyArray<unknown> = []) =>
          mirror.query<R>(text, values).pipe(Effect.mapError((e) => stepFailed(stepName, e)))

        yield* step("schema", 20, { tables_total: tablesTotal })
        for (const schema of ddl.schemas) yield* onMirror("schema", `create schema if not exists ${quoteIdent(schema)}`)
        for (const statement of ddl.prelude) yield* onMirror("schema", statement)
        for (const table of ddl.tables) {
          const [present] = yield* onMirror("schema", "select to_regclass($1) is not null as present", [qualified(table.table)])
          if (present?.present === true) continue
          // One transaction per table: a crash leaves it wholly made or not at all.
          yield* onMirror("schema", `begin; ${table.create.join("; ")}; commit`).pipe(Effect.tapError(() => mirror.query("rollback").pipe(Effect.ignore)))
        }
        for (const table of ddl.tables) {
          for (const key of table.foreignKeys) {
            const [present] = yield* onMirror("schema", "select 1 from pg_constraint where conrelid = $1::regclass and conname = $2", [qualified(table.table), key.name])
            if (present === undefined) yield* onMirror("schema", key.statement)
          }
        }
        // The mirror's bookkeeping (and the capture log's apply trigger) in both modes.
        yield* prepareMirror(mirror, { ...ddl.capture, tables: refs.map(qualified) }).pipe(Effect.mapError((e) => stepFailed("schema", e)))

        yield* step("subscription", 30, { tables_total: tablesTotal })
        // Not under a branch's template copy: the branch unit holds this lock while it has the
        // subscription paused.
        yield* withSubscriptionLock(
          engine,
          pipeline.mirrorDatabase,
          Effect.gen(function* () {
            const [subscription] = yield* onMirror<{ enabled: boolean }>("subscription", "select subenabled as enabled from pg_subscription where subname = $1", [pipeline.subscription])
            if (subscription === undefined) {
              // A new subscription copies the capture log and heartbeat again from the start.
              yield* onMirror(
                "subscription",
                "do $$ begin if to_regclass('scion.schema_log') is not null then truncate scion.schema_log; end if; if to_regclass('scion.heartbeat') is not null then truncate scion.heartbeat; end if; end $$"
              )
              yield* onMirror(
                "subscription",
                `create subscription ${quoteIdent(pipeline.subscription)} connection ${quoteLiteral(subscriptionConninfo(details, details.password))}
                 publication ${quoteIdent(pipeline.publication)}
                 with (create_slot = false, slot_name = ${quoteLiteral(pipeline.slot)}, copy_data = true, enabled = true, binary = true)`
              )
            } else {
              if (!subscription.enabled) yield* onMirror("subscription", `alter subscription ${quoteIdent(pipeline.subscription)} enable`)
              // Credentials may have changed (PUT …), and the publication's table set may have.
              yield* onMirror("subscription", `alter subscription ${quoteIdent(pipeline.subscription)} connection ${quoteLiteral(subscriptionConninfo(details, details.password))}`)
              yield* onMirror("subscription", `alter subscription ${quoteIdent(pipeline.subscription)} refresh publication with (copy_data = true)`)
            }
          })
        ).pipe(Effect.mapError((e) => (e instanceof PgStepFailed ? stepFailed("subscription", e) : e)))
        // Tables no longer selected leave the mirror (the refresh stopped replicating them).
        const [previous] = yield* sql<{ readonly mirrored_tables: ReadonlyArray<string> }>`select mirrored_tables from engines where connector_id = ${connectorId}`
        const keep = new Set(plan.tables.map(({ table }) => table.path))
        for (const path of previous?.mirrored_tables ?? []) {
          if (keep.has(path)) continue
          const [, schema, name] = path.split(".")
          yield* onMirror("subscription", `drop table if exists ${qualified({ schema: schema!, name: name! })} cascade`)
        }

        // The initial copy: every table of the subscription ready, progress moving with them.
        const started = Date.now()
        let lastReady = -1
        for (;;) {
          const [state] = yield* onMirror<{ ready: number; total: number; sync_errors: number }>(
            "initial_copy",
            `select count(*) filter (where r.srsubstate = 'r')::int as ready, count(*)::int as total,
                    coalesce((select sync_error_count from pg_stat_subscription_stats st where st.subname = s.subname), 0)::int as sync_errors
             from pg_subscription s left join pg_subscription_rel r on r.srsubid = s.oid
             where s.subname = $1 group by s.subname`,
            [pipeline.subscription]
          )
          const ready = state?.ready ?? 0
          const total = state?.total ?? 0
          if (ready !== lastReady) {
            lastReady = ready
            yield* step("initial_copy", 35 + Math.floor((50 * ready) / Math.max(total, 1)), { tables_total: total, tables_ready: ready })
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
    )

    // Readiness evidence, then the verdict.
    yield* step("readiness", 88, { tables_total: tablesTotal, tables_ready: tablesTotal })
    const evidence = yield* recordReadiness({ connectorId, pipeline, engine, instance, details, plan, sourceOptions, engineOptions, catchUpTimeout: options.catchUpTimeout })
    const failed = evidence.checks.filter((c) => c.status === "fail")
    if (failed.length > 0) {
      // A deep reset's shadow failing validation leaves the active mirror serving.
      if (mode !== "deep_reset") yield* sql`update connectors set branching_engine_status = 'failed_validation', updated_at = now() where id = ${connectorId}`
      return yield* new JobFailed({
        message: `Engine validation failed: ${failed.length} of ${evidence.checks.length} readiness checks failed (attempt ${evidence.attemptId}: ${failed
          .slice(0, 3)
          .map((c) => `${c.check_name} on ${c.table_path}`)
          .join(", ")}${failed.length > 3 ? ", …" : ""}); see GET /v1/connectors/${connectorId}/readiness-checks?attempt_id=${evidence.attemptId}&only_failed=true`
      })
    }
    if (mode === "deep_reset") {
      // The shadow is validated: its cutover is an operation of its own. Until then branches are
      // cut from the active mirror, untouched.
      yield* sql`update pipelines set status = 'shadow', mirrored_tables = ${plan.tables.map(({ table }) => table.path)}, updated_at = now()
                 where publication_name = ${pipeline.publication} and connector_id = ${connectorId}`
      yield* report({ stage: "cutover", stageLabel: "The new pipeline is ready: cutting over", progress: 99 })
      const cutover = yield* startPipelineOperation({ connectorId, orgId: connector.orgId, action: "cutover", pipelineId: pipeline.publication, guard: true })
      yield* Effect.logInfo("shadow pipeline ready").pipe(Effect.annotateLogs({ connector_id: connectorId, pipeline: pipeline.publication, cutover_operation_id: cutover }))
      return {
        connector_id: connectorId,
        pipeline_id: pipeline.publication,
        mirror_database: pipeline.mirrorDatabase,
        tables: plan.tables.map(({ table }) => table.path),
        readiness_attempt_id: evidence.attemptId,
        cutover_operation_id: cutover
      } satisfies JsonObject
    }
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`update engines set mirrored_tables = ${plan.tables.map(({ table }) => table.path)}, steps = ${JSON.stringify(STEPS.map(([n]) => n))}::jsonb,
                     last_apply_error_count = null, subscription_disabled_since = null, updated_at = now()
                   where connector_id = ${connectorId}`
        // A reset replaced the pipeline a quarantine paused: the entry is over.
        if (mode === "reset") yield* sql`delete from quarantine_entries where connector_id = ${connectorId}`
        // A rollout on a quarantined mirror leaves it degraded: the quarantine still stands.
        const replication = { status: "streaming", lag_bytes: 0, last_applied_at: null, active_pipeline_id: pipeline.publication, schema_follow: ddl.mode, measured_at: new Date().toISOString() }
        yield* sql`update connectors set
                     branching_engine_status = case when exists (select 1 from quarantine_entries q where q.connector_id = ${connectorId} and q.status = 'quarantined') then 'degraded' else 'ready' end,
                     indexing_status = 'indexed',
                     replication = ${JSON.stringify(replication)}::jsonb,
                     last_indexed_version = greatest(last_indexed_version, selected_schema_version), updated_at = now()
                   where id = ${connectorId}`
      })
    )
    yield* report({
      stage: "ready",
      stageLabel: "The engine is ready to branch",
      progress: 99,
      ...(mode === "setup" ? { setupStatus: setupStatus("done", { tables_total: tablesTotal, tables_ready: tablesTotal }) } : {})
    })
    yield* Effect.logInfo(mode === "setup" ? "engine set up" : "selection rolled out").pipe(Effect.annotateLogs({ connector_id: connectorId, tables: tablesTotal, attempt_id: evidence.attemptId }))
    return {
      connector_id: connectorId,
      branching_engine_status: "ready",
      mirror_database: pipeline.mirrorDatabase,
      tables: plan.tables.map(({ table }) => table.path),
      excluded_tables: [...plan.excluded],
      readiness_attempt_id: evidence.attemptId,
      pod_name: instance
    } satisfies JsonObject
  })

/** A shadow's names from its publication name (`scion_<id>_g<n>`). */
const pipelineNamesOf = (publication: string, connectorId: string): PipelineNames => {
  const generation = Number(/_g(\d+)$/.exec(publication)?.[1] ?? "1")
  return pipelineNames(connectorId, generation)
}

/**
 * The reset's first step: the subscription dropped (under the subscription lock, keeping the slot
 * out of it), the slot dropped on the source (ending a walsender still holding it), the mirrored
 * tables and the capture log emptied. The schema stays.
 */
const resetPipeline = (
  connectorId: string,
  pipeline: PipelineNames,
  details: PostgresDetails,
  sourceOptions: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number },
  connectMillis: number
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const provisioner = yield* EngineProvisioner
    const failed = (e: PgStepFailed | string) => stepFailed("reset", e)
    const [record] = yield* sql<{ readonly mirrored_tables: ReadonlyArray<string> }>`select mirrored_tables from engines where connector_id = ${connectorId}`
    const engine = yield* provisioner.start(connectorId).pipe(Effect.mapError((e) => failed(e.message)))
    yield* Effect.scoped(
      Effect.gen(function* () {
        const mirror = yield* engineSession(engine, pipeline.mirrorDatabase, { applicationName: "scion-engine-setup", connectMillis })
        yield* dropSubscriptionKeepingSlot(engine, pipeline.mirrorDatabase, mirror, pipeline.subscription)
        const [log] = yield* mirror.query<{ present: boolean }>("select to_regclass('scion.schema_log') is not null as present")
        const tables = [
          ...(record?.mirrored_tables ?? []).map((path) => {
            const [, schema, name] = path.split(".")
            return qualified({ schema: schema!, name: name! })
          }),
          ...(log?.present === true ? ["scion.schema_log", "scion.heartbeat"] : [])
        ]
        if (tables.length > 0) yield* mirror.query(`truncate ${tables.join(", ")}`)
      })
    ).pipe(Effect.mapError((e) => (e instanceof PgStepFailed ? failed(e) : e)))
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

// ---------------------------------------------------------------------------------------------
// Readiness evidence.
// ---------------------------------------------------------------------------------------------

export interface ReadinessCheck {
  readonly check_name: string
  readonly table_path: string
  readonly status: "pass" | "fail"
  readonly message: string
}

const newAttemptId = () => `att_${Date.now().toString(36)}${randomBytes(6).toString("hex")}`

/**
 * One readiness attempt: per mirrored table, the table exists in the mirror, its initial copy is
 * complete, it can replicate updates and deletes on the source, and — once the mirror has caught
 * up with the source's current WAL position — it holds as many rows as the source. Rows are
 * appended to readiness_checks (append-only evidence) with the engine instance as pod_name.
 */
const recordReadiness = (input: {
  readonly connectorId: string
  readonly pipeline: PipelineNames
  readonly engine: Engine
  readonly instance: string
  readonly details: PostgresDetails
  readonly plan: MirrorPlan
  readonly sourceOptions: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number }
  readonly engineOptions: { readonly applicationName: string; readonly connectMillis: number }
  readonly catchUpTimeout: Duration.Duration
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const pipeline = input.pipeline
      const attemptId = newAttemptId()
      const checks: Array<ReadinessCheck> = []
      const sessionFailure = (e: PgStepFailed) => stepFailed("readiness", e)
      const source = yield* sourceSession(input.details, input.details.password, input.sourceOptions).pipe(Effect.mapError(sessionFailure))
      const mirror = yield* engineSession(input.engine, pipeline.mirrorDatabase, input.engineOptions).pipe(Effect.mapError(sessionFailure))

      // Catch up: the slot has confirmed everything the source had written when we looked.
      const catchUp = Effect.gen(function* () {
        const [position] = yield* source.query<{ lsn: string }>("select pg_current_wal_lsn()::text as lsn").pipe(Effect.mapError(sessionFailure))
        return yield* source
          .query<{ caught_up: boolean }>("select coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) as caught_up from pg_replication_slots where slot_name = $1", [pipeline.slot, position?.lsn ?? "0/0"])
          .pipe(
            Effect.mapError(sessionFailure),
            Effect.flatMap(([row]) => (row?.caught_up === true ? Effect.void : Effect.fail("behind" as const))),
            Effect.retry(Schedule.spaced(Duration.millis(200)).pipe(Schedule.upTo(input.catchUpTimeout))),
            Effect.either
          )
      })
      let lag = yield* catchUp

      const subscribed = yield* mirror
        .query<{ relation: string; state: string }>(
          `select r.srrelid::regclass::text as relation, r.srsubstate::text as state from pg_subscription_rel r join pg_subscription s on s.oid = r.srsubid where s.subname = $1`,
          [pipeline.subscription]
        )
        .pipe(Effect.mapError(sessionFailure))
      const stateOf = new Map<string, string>()
      for (const row of subscribed) {
        const [regclass] = yield* mirror.query<{ oid: string }>("select $1::regclass::oid::text as oid", [row.relation]).pipe(Effect.mapError(sessionFailure))
        if (regclass !== undefined) stateOf.set(regclass.oid, row.state)
      }

      for (const { table } of input.plan.tables) {
        const name = qualified({ schema: table.path.split(".")[1]!, name: table.name })
        const [present] = yield* mirror.query<{ oid: string | null }>("select to_regclass($1)::oid::text as oid", [name]).pipe(Effect.mapError(sessionFailure))
        const oid = present?.oid ?? null
        checks.push(
          oid !== null
            ? { check_name: "mirror_table_present", table_path: table.path, status: "pass", message: "The table exists in the mirror" }
            : { check_name: "mirror_table_present", table_path: table.path, status: "fail", message: "The table is missing from the mirror" }
        )
        const state = oid === null ? undefined : stateOf.get(oid)
        checks.push(
          state === "r"
            ? { check_name: "initial_copy_complete", table_path: table.path, status: "pass", message: "Initial copy complete; the table is streaming changes" }
            : { check_name: "initial_copy_complete", table_path: table.path, status: "fail", message: `The table's subscription state is ${state ?? "absent"}, not ready` }
        )
        const [identity] = yield* source
          .query<{ ok: boolean }>(
            `select c.relreplident = 'f' or (c.relreplident = 'i' and exists (select 1 from pg_index where indrelid = c.oid and indisreplident))
                    or (c.relreplident = 'd' and exists (select 1 from pg_constraint where conrelid = c.oid and contype = 'p')) as ok
             from pg_class c where c.oid = $1::regclass`,
            [name]
          )
          .pipe(Effect.mapError(sessionFailure))
        checks.push(
          identity?.ok === true
            ? { check_name: "replica_identity", table_path: table.path, status: "pass", message: "Updates and deletes on the source replicate" }
            : { check_name: "replica_identity", table_path: table.path, status: "fail", message: "The source table has no replica identity: its updates and deletes cannot replicate" }
        )
        if (oid !== null) {
          // Both sides count at once: on large tables these scans are most of the readiness time,
          // and a quiet table answers equal here.
          const countOn = (session: typeof source) =>
            session.query<{ n: string }>(`select count(*)::text as n from ${name}`).pipe(
              Effect.mapError(sessionFailure),
              Effect.map(([row]) => BigInt(row?.n ?? "0"))
            )
          const [first, firstMirror] = yield* Effect.all([countOn(source), countOn(mirror)], { concurrency: 2 })
          let equal = first === firstMirror
          let mirrorCount = firstMirror
          let low = first
          let high = first
          // A source being written to moves under the counts: bracket the mirror between a source
          // count taken before it caught up and one taken after it was counted.
          for (let round = 0; round < 2 && !equal; round++) {
            const before = yield* countOn(source)
            lag = yield* catchUp
            mirrorCount = yield* countOn(mirror)
            const after = yield* countOn(source)
            low = before < after ? before : after
            high = before < after ? after : before
            equal = before === mirrorCount && mirrorCount === after
          }
          const moving = low !== high
          const pass = equal || (moving && mirrorCount >= low && mirrorCount <= high)
          checks.push({
            check_name: "row_count_matches",
            table_path: table.path,
            status: pass ? "pass" : "fail",
            message: equal
              ? `${mirrorCount} rows on both sides`
              : pass
                ? `mirror ${mirrorCount} rows, within the source's ${low}..${high} while it was being written to`
                : `source ${low === high ? `${low}` : `${low}..${high}`} rows, mirror ${mirrorCount}${Either.isLeft(lag) ? " (the mirror had not caught up with the source)" : ""}`
          })
        }
      }

      for (const check of checks) {
        yield* sql`insert into readiness_checks (connector_id, attempt_id, check_name, table_path, status, message, pod_name)
                   values (${input.connectorId}, ${attemptId}, ${check.check_name}, ${check.table_path}, ${check.status}, ${check.message}, ${input.instance})`
      }
      return { attemptId, checks }
    })
  )
