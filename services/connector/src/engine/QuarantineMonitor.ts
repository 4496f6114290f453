import { randomBytes } from "node:crypto"
import { Config, Duration, Effect, Layer, Option, Schedule } from "effect"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { quoteIdent, recordReplicationLags } from "@scion/kit"
import { SecretStore } from "../secrets/SecretStore.js"
import { type Engine, EngineProvisioner } from "./EngineProvisioner.js"
import { EngineSetup } from "./EngineSetup.js"
import { onEngineDatabase, onMirrorUnderLock, type PgSession, sourceSession, tryWithSubscriptionLock } from "./PgSession.js"
import { dropSubscriptionKeepingSlot, emptyMirroredTables } from "./EngineReplication.js"
import type { ReplicationState, ReplicationStatus } from "../domain/models.js"
import { SourceIntrospector } from "../connectors/SchemaIntrospection.js"
import { type Drift, type FollowedTable, followedTables, mirrorDependencies, mirrorExtensions, type MirrorDependencies, reconcile, wholeSchemas } from "../replication/Reconciler.js"
import { SchemaChangesRepo } from "../replication/SchemaChangesRepo.js"
import { ConnectorOperations } from "../connectors/Discovery.js"
import { startPipelineOperation } from "../replication/Pipelines.js"
import { PipelinesRepo } from "../replication/PipelinesRepo.js"
import { type MonitoredEngine, type OpenEntry, QuarantineRepo } from "./QuarantineRepo.js"
import { refreshStructure } from "../replication/StructureRefresh.js"
import { dropInvalidatedSlot, slotLostDetail, slotPosition } from "../replication/SlotSql.js"
import { type PublicationCoverage, publicationChangedDetail, publicationCoverage } from "../replication/PublicationSql.js"
import { type RecopyRequest, recopyRequests, recopyTables, recordOverdue, TableRecopyTimeout } from "../replication/TableRecopy.js"

/** Why replication was quarantined (the entry's reason). */
export type QuarantineReason = "slot_lost" | "publication_changed" | "subscription_error" | "subscription_stopped" | "lag_exceeded" | "schema_drift"

/** The reasons only a full copy from the source mends: no release can resume such a pipeline where it stood. */
const COPY_AGAIN: ReadonlySet<string> = new Set<QuarantineReason>(["slot_lost", "publication_changed"])

export interface QuarantineMonitorOptions {
  /** How often every ready engine is checked (the interface leaves the interval open). */
  readonly interval: Duration.Duration
  /** Lag beyond this many bytes of source WAL quarantines the replication. */
  readonly maxLagBytes: number
  /** How long one replica holds an engine's check (a lease; other replicas skip it meanwhile). */
  readonly lease: Duration.Duration
  /** How long the subscription may stay disabled (a branch create's pause) before it is a stop. */
  readonly stoppedGrace: Duration.Duration
  /** Lag beyond this many bytes reports the mirror as catching_up rather than streaming. */
  readonly catchingUpBytes: number
  /** How long copying a rewritten table again may take (reconciling engines; the follower copies for capturing ones). */
  readonly recopyTimeout: Duration.Duration
}

const newQuarantineId = () => `qua_${Date.now().toString(36)}${randomBytes(6).toString("hex")}`

type EngineRow = MonitoredEngine

/** What a round reads on the mirror (readMirror), on a session it holds only for that. */
interface MirrorFacts {
  readonly subscription: { readonly enabled: boolean; readonly worker: boolean; readonly apply_errors: string; readonly copying: number } | undefined
  readonly lastApplied: Date | null
  /** The source oids of the tables the mirror follows (its `scion.mirror_tables`). */
  readonly followed: ReadonlyArray<string>
  /** Scion's tables the mirror receives through the publication too (heartbeat, capture log). */
  readonly scionTables: ReadonlyArray<string>
  /** The first captured schema change the mirror could not apply that no released quarantine answered. */
  readonly failedChange: { readonly object_identity: string | null; readonly command_tag: string; readonly error: string | null } | undefined
  /** Tables a change rewrote, waiting to be copied again (replication/TableRecopy.ts); one with an error could not be. */
  readonly recopies: ReadonlyArray<RecopyRequest>
}

/** What a round reads on the source; None where it could not be asked. */
interface SourceFacts {
  /** The slot's lag in bytes; Some(null) when the slot is gone or invalidated (SlotSql). */
  readonly lag: Option.Option<number | null>
  /** Whether the publication still publishes what the mirror follows (PublicationSql). */
  readonly publication: Option.Option<PublicationCoverage>
}

const SOURCE_UNKNOWN: SourceFacts = { lag: Option.none(), publication: Option.none() }

/**
 * The quarantine monitor (services/connector/README.md, "Quarantine"): every interval, each ready
 * engine's replication is checked — the slot still on the source, the subscription enabled with
 * a running apply worker and no new apply errors, the lag within bounds. A break pauses the
 * subscription and records a quarantined entry (one open entry per connector). After a release,
 * the monitor restores the pipeline — re-enabling the subscription, or for a lost slot dropping
 * the subscription, emptying the mirror and starting a new engine setup that re-creates the slot
 * and copies again — and deletes the released row.
 */
export const makeQuarantineMonitor = (options: QuarantineMonitorOptions) =>
  Effect.gen(function* () {
    const quarantines = yield* QuarantineRepo
    const pipelines = yield* PipelinesRepo
    const repo = yield* ConnectorsRepo
    const secrets = yield* SecretStore
    const provisioner = yield* EngineProvisioner
    const setup = yield* EngineSetup
    const changes = yield* SchemaChangesRepo
    const operations = yield* ConnectorOperations
    const introspector = yield* SourceIntrospector
    const connect = { applicationName: "scion-quarantine-monitor", connectMillis: 5_000 }

    /** Takes the engine's lease for this round; false when another replica holds it. */
    const lease = (connectorId: string) => quarantines.takeLease(connectorId, options.lease)

    const sourceOf = (connectorId: string) =>
      storedPostgresDetails(connectorId).pipe(Effect.provideService(ConnectorsRepo, repo), Effect.provideService(SecretStore, secrets), Effect.option)

    /** `use` on a short session on the engine's source; None when its stored details are unusable. */
    const onSource = <A, E>(engine: EngineRow, queryMillis: number, use: (source: PgSession) => Effect.Effect<A, E>) =>
      Effect.flatMap(sourceOf(engine.connector_id), (details) =>
        Option.isNone(details)
          ? Effect.succeed(Option.none<A>())
          : Effect.scoped(Effect.flatMap(sourceSession(details.value, details.value.password, { ...connect, queryMillis }), use)).pipe(Effect.map(Option.some))
      )

    /**
     * A session on the engine's mirror for `use` alone. The monitor never keeps one open across
     * other work (the source, the control database, a lock): a branch batch copies the mirror only
     * once no session is connected to it, so every moment one is open, branch creates wait.
     */
    const onMirror = <A, E, R>(running: Engine, engine: EngineRow, use: (mirror: PgSession) => Effect.Effect<A, E, R>) =>
      onEngineDatabase(running, engine.mirror_database, connect, use)

    /**
     * Disables the subscription while an entry is quarantined. Asked again every round: a disable
     * that failed (the lock busy under load) or a branch create's pause ending with an enable
     * must not leave a quarantined pipeline applying changes.
     */
    const pause = (engine: EngineRow, running: Engine, facts: MirrorFacts) =>
      (facts.subscription?.enabled !== true
        ? Effect.void
        : onMirrorUnderLock(running, engine.mirror_database, connect, (mirror) => mirror.query(`alter subscription ${quoteIdent(engine.subscription_name)} disable`)).pipe(Effect.asVoid)
      ).pipe(Effect.catchAllCause((cause) => Effect.logWarning("the quarantined subscription could not be paused yet; the next round tries again", cause)))

    /** Opens the entry (the first break found is the one recorded), pauses the subscription, records the replication as quarantined. */
    const quarantine = (engine: EngineRow, running: Engine, reason: QuarantineReason, detail: string, lag: Option.Option<number | null>) =>
      Effect.gen(function* () {
        const id = newQuarantineId()
        // The entry and the degraded status commit together: never ready while quarantined (branches
        // are refused unless the caller accepts stale data), not even while the pause is waiting.
        const opened = yield* quarantines.openEntry(id, engine.connector_id, reason, detail)
        const facts = yield* onMirror(running, engine, (mirror) => readMirror(engine, mirror))
        if (opened) {
          yield* pause(engine, running, facts)
          yield* Effect.logWarning("connector replication quarantined").pipe(Effect.annotateLogs({ connector_id: engine.connector_id, quarantine_id: id, reason, detail }))
        }
        yield* recordState(engine, facts, "quarantined", lag)
      })

    /** The lags measured this round, published as the round ends (connectors not measured drop out). */
    const measuredLags = new Map<string, number>()
    /** A lag the round measured, for the metrics published as it ends. */
    const rememberLag = (connectorId: string, lag: Option.Option<number | null>) =>
      Effect.sync(() => (Option.isSome(lag) && lag.value !== null ? void measuredLags.set(connectorId, lag.value) : undefined))

    /**
     * The slot's lag and the publication's coverage of what the mirror follows, on one short source
     * session: unknown when the source cannot be asked (an unreachable source is not a break of
     * Scion's pipeline by itself: the subscription's errors say so).
     */
    const askSource = (engine: EngineRow, facts: MirrorFacts) =>
      onSource(engine, 10_000, (source) => Effect.all({ slot: slotPosition(source, engine.slot_name), publication: coverageOf(engine, facts, source) })).pipe(
        Effect.map(Option.match({ onNone: () => SOURCE_UNKNOWN, onSome: ({ slot, publication }): SourceFacts => ({ lag: Option.some(slot.lag), publication }) })),
        Effect.tap((source) => rememberLag(engine.connector_id, source.lag)),
        Effect.catchAll(() => Effect.succeed(SOURCE_UNKNOWN))
      )

    /** The publication's coverage, unknown where it could not be read (the slot's check goes on without it). */
    const coverageOf = (engine: EngineRow, facts: MirrorFacts, source: PgSession) =>
      // A table being copied again leaves the publication for a moment (TableRecopy): not a gap.
      publicationCoverage(
        source,
        engine.publication_name,
        facts.followed.filter((relid) => !facts.recopies.some((request) => request.source_relid === relid)),
        facts.scionTables
      ).pipe(
        Effect.tapError((error) => Effect.logWarning("the publication's coverage could not be read", error)),
        Effect.option
      )

    /**
     * Why the mirror must be copied again from the source, if it must: its slot lost, or its
     * publication changed (not judged while a rollout runs: it sets the publication to the new
     * selection first and the mirror's tables after).
     */
    const copyNeeded = (engine: EngineRow, source: SourceFacts): Option.Option<{ readonly reason: "slot_lost" | "publication_changed"; readonly detail: string }> => {
      if (Option.isSome(source.lag) && source.lag.value === null) return Option.some({ reason: "slot_lost", detail: slotLostDetail(engine.slot_name) })
      if (!engine.rolling_out && Option.isSome(source.publication) && source.publication.value.state !== "complete") {
        return Option.some({ reason: "publication_changed", detail: publicationChangedDetail(engine.publication_name, source.publication.value) })
      }
      return Option.none()
    }

    /**
     * Before a restore's full copy: a slot the source invalidated is dropped, so that setup makes
     * a new one (setup refuses to go on from an invalidated slot). A failure ends the round; the
     * released entry is tried again next round.
     */
    const dropSlotIfInvalidated = (engine: EngineRow) =>
      Effect.gen(function* () {
        const dropped = yield* onSource(engine, 10_000, (source) => dropInvalidatedSlot(source, engine.slot_name))
        if (Option.getOrElse(dropped, () => false)) yield* Effect.logInfo("the source had invalidated the slot: dropped, setup makes a new one").pipe(Effect.annotateLogs({ connector_id: engine.connector_id, slot: engine.slot_name }))
      })

    /** The checks, in order; the first break found is the one recorded. */
    const inspect = (engine: EngineRow, facts: MirrorFacts, source: SourceFacts, drift: { readonly pending: boolean; readonly reconciled: boolean }) =>
      Effect.gen(function* () {
        const copy = copyNeeded(engine, source)
        if (Option.isSome(copy)) return copy
        // A captured change the mirror could not apply: the table it names no longer follows the
        // source (its later changes diff from where it stopped), so the mirror is not ready.
        if (facts.failedChange !== undefined) {
          const failed = facts.failedChange
          return Option.some({
            reason: "schema_drift" as const,
            detail: `${failed.object_identity ?? "a table"}: a captured schema change (${failed.command_tag}) could not be applied on the mirror (${failed.error ?? "unknown error"}). Make the mirror's table match the source's (or drop the table from the selection and index), then release this entry; POST /v1/connectors/{connector_id}/reset copies the mirror again.`
          })
        }
        // A table a change rewrote that could not be copied again: its rows are the mirror's cast
        // of the old ones, or gone while the copy was under way.
        const unfinished = facts.recopies.find((request) => request.error !== null)
        if (unfinished !== undefined) {
          return Option.some({
            reason: "schema_drift" as const,
            detail: `${unfinished.path}: a schema change rewrote the table on the source, and copying it again from the source failed (${unfinished.error}). Its rows on the mirror may differ from the source's. Mend the cause, then release this entry to copy it again; POST /v1/connectors/{connector_id}/reset copies the whole mirror again.`
          })
        }
        const lag = source.lag
        if (Option.isSome(lag) && lag.value !== null && lag.value > options.maxLagBytes) {
          return Option.some({ reason: "lag_exceeded" as const, detail: `The mirror is ${lag.value} bytes of WAL behind the source (bound ${options.maxLagBytes})` })
        }
        const state = facts.subscription
        if (state === undefined) return Option.some({ reason: "subscription_stopped" as const, detail: `The subscription ${engine.subscription_name} is missing from the engine` })
        // Errors before a change reconciled this round were that change's: a new baseline.
        const previous = drift.reconciled || engine.last_apply_error_count === null ? null : Number(engine.last_apply_error_count)
        // Apply errors while a schema change waits for reconciliation are that change's: the
        // baseline stays, so the next round sees them and applies it.
        if (!drift.pending) {
          const rose = previous !== null && Number(state.apply_errors) > previous
          yield* quarantines.recordApplyErrors(engine.connector_id, state.apply_errors, rose)
          // A rise in one round alone is a stream the source broke (a restart or failover ends
          // the walsender; the subscription counts that as an apply error and reconnects by
          // itself): only errors that rise round after round are a change the mirror cannot apply.
          if (rose && engine.apply_errors_rose) {
            return Option.some({
              reason: "subscription_error" as const,
              detail: `The subscription keeps failing to apply: ${Number(state.apply_errors) - previous} new apply error(s) since the last round, after more the round before`
            })
          }
        }
        // Branch creates pause the subscription for a moment: only a pause past the grace is a stop.
        if (!state.enabled) {
          const stoppedFor = yield* quarantines.disabledFor(engine.connector_id)
          if (stoppedFor * 1000 >= Duration.toMillis(options.stoppedGrace)) {
            return Option.some({ reason: "subscription_stopped" as const, detail: `The subscription ${engine.subscription_name} has been disabled for ${Math.round(stoppedFor)} s` })
          }
          return Option.none<{ reason: QuarantineReason; detail: string }>()
        }
        yield* quarantines.clearDisabled(engine.connector_id)
        return Option.none<{ reason: QuarantineReason; detail: string }>()
      })

    /**
     * An open entry whose mirror must be copied again now says so (slot_lost or
     * publication_changed), whatever opened it: only that restore can bring such a pipeline back,
     * and re-enabling the subscription would fail, or skip changes, for ever. Ways there: a lag
     * entry pauses the subscription, its slot falls further behind and the source invalidates it
     * (max_slot_wal_keep_size); a walsender terminated again and again (apply errors) before its
     * slot is dropped; an older source failing the stream once its publication was dropped.
     */
    const supersedeWhenCopyNeeded = (engine: EngineRow, open: OpenEntry, source: SourceFacts) =>
      Effect.gen(function* () {
        const copy = copyNeeded(engine, source)
        if (COPY_AGAIN.has(open.reason) || Option.isNone(copy)) return open
        const { reason, detail } = copy.value
        if (yield* quarantines.markCopyNeeded(open.id, reason, `${detail} (the entry was opened as ${open.reason})`)) {
          yield* Effect.logWarning(`quarantined replication must be copied again: the entry now says ${reason}`).pipe(
            Effect.annotateLogs({ connector_id: engine.connector_id, quarantine_id: open.id, was: open.reason })
          )
        }
        return { ...open, reason } satisfies OpenEntry
      })

    /** A released entry: put the pipeline back, then delete the row (`lag` and `facts` as read this round). */
    const restore = (engine: EngineRow, running: Engine, entry: OpenEntry, lag: Option.Option<number | null>, facts: MirrorFacts) =>
      Effect.gen(function* () {
        if (entry.reason === "publication_changed") {
          // The slot went on past what the publication left out, and on sources before 18 it
          // cannot decode past the drop at all: a reset, which drops the slot, empties the mirror
          // and sets the pipeline up again (the publication as setup makes it, a new slot, a full copy).
          yield* quarantines.deleteEntry(entry.id)
          const started = yield* setup.restart(engine.connector_id, "reset")
          yield* Effect.logInfo("quarantine released: the pipeline is reset to copy the mirror again").pipe(
            Effect.annotateLogs({ connector_id: engine.connector_id, quarantine_id: entry.id, operation_id: started.operationId })
          )
          return
        }
        if (entry.reason === "slot_lost" || facts.subscription === undefined) {
          // The slot's position is gone, or the subscription that kept the mirror's place in it:
          // the mirror starts over from a full copy (a new slot where it is gone, the subscription
          // made again; setup makes only what is missing).
          yield* dropSubscriptionKeepingSlot(running, engine.mirror_database, engine.subscription_name, connect.applicationName)
          yield* onMirror(running, engine, (mirror) => emptyMirroredTables(mirror, engine.mirrored_tables, false))
          yield* dropSlotIfInvalidated(engine)
          yield* quarantines.deleteEntry(entry.id)
          const started = yield* setup.restart(engine.connector_id)
          yield* Effect.logInfo("quarantine released: engine setup restarted to re-create the pipeline").pipe(
            Effect.annotateLogs({ connector_id: engine.connector_id, quarantine_id: entry.id, operation_id: started.operationId })
          )
          return
        }
        yield* onMirrorUnderLock(running, engine.mirror_database, connect, (mirror) =>
          Effect.gen(function* () {
            // The release answers the failed schema changes it was opened for.
            if (entry.reason === "schema_drift" && facts.failedChange !== undefined) {
              yield* mirror.query("update scion.schema_change_results set answered = true where status = 'failed' and not answered")
            }
            // ... and a table that could not be copied again is tried again.
            if (entry.reason === "schema_drift" && facts.recopies.some((request) => request.error !== null)) {
              yield* mirror.query("update scion.recopy_requests set error = null where error is not null")
            }
            yield* mirror.query(`alter subscription ${quoteIdent(engine.subscription_name)} enable`)
          })
        )
        yield* quarantines.forgetBaselines(engine.connector_id)
        if (entry.reason === "lag_exceeded") {
          // Restored once it has caught up to within the bound; until then the released row stays
          // (not listed) so the same lag is not quarantined again while it drains.
          if (Option.isSome(lag) && (lag.value === null || lag.value > options.maxLagBytes)) return
        }
        yield* quarantines.deleteEntry(entry.id)
        yield* quarantines.markReady(engine.connector_id)
        yield* Effect.logInfo("quarantine released: replication resumed").pipe(Effect.annotateLogs({ connector_id: engine.connector_id, quarantine_id: entry.id }))
      })

    /**
     * streaming, or what keeps it from streaming: the subscription disabled, missing or without
     * its apply worker (the source down: the worker fails to connect, again and again), a table
     * being copied after it joined, lag.
     */
    const statusOf = (facts: MirrorFacts, lag: Option.Option<number | null>): ReplicationStatus => {
      const state = facts.subscription
      if (state === undefined || !state.enabled || !state.worker) return "stopped"
      if (state.copying > 0) return "applying_schema_change"
      if (Option.isSome(lag) && lag.value !== null && lag.value > options.catchingUpBytes) return "catching_up"
      return "streaming"
    }

    /**
     * What a round reads on the mirror, on one short session: the subscription's state, and the
     * source time of the newest heartbeat the mirror applied (the subscription's last report to
     * the source where there is none).
     */
    const readMirror = (engine: EngineRow, mirror: PgSession) =>
      Effect.gen(function* () {
        const [subscription] = yield* mirror.query<{ enabled: boolean; worker: boolean; apply_errors: string; copying: number }>(
          `select s.subenabled as enabled,
                  exists (select 1 from pg_stat_subscription w where w.subid = s.oid and w.relid is null and w.pid is not null) as worker,
                  coalesce((select apply_error_count from pg_stat_subscription_stats st where st.subid = s.oid), 0)::text as apply_errors,
                  (select count(*)::int from pg_subscription_rel r where r.srsubid = s.oid and r.srsubstate <> 'r') as copying
           from pg_subscription s where s.subname = $1`,
          [engine.subscription_name]
        )
        const [present] = yield* mirror.query<{ heartbeat: boolean; followed: boolean; log: boolean; answers: boolean }>(
          `select to_regclass('scion.heartbeat') is not null as heartbeat, to_regclass('scion.mirror_tables') is not null as followed, to_regclass('scion.schema_log') is not null as log,
                  exists (select 1 from pg_attribute where attrelid = to_regclass('scion.schema_change_results') and attname = 'answered') as answers`
        )
        const [failedChange] =
          present?.answers === true
            ? yield* mirror.query<{ object_identity: string | null; command_tag: string; error: string | null }>(
                "select object_identity, command_tag, error from scion.schema_change_results where status = 'failed' and not answered order by schema_change_results.log_id limit 1"
              )
            : []
        const followed = present?.followed === true ? yield* mirror.query<{ source_relid: string }>("select source_relid::text as source_relid from scion.mirror_tables") : []
        const recopies = present?.followed === true ? yield* recopyRequests(mirror) : []
        const [heartbeat] = present?.heartbeat === true ? yield* mirror.query<{ at: Date | null }>("select max(at) as at from scion.heartbeat where connector_id = $1", [engine.connector_id]) : []
        const [reported] = heartbeat?.at ? [] : yield* mirror.query<{ at: Date | null }>("select max(latest_end_time) as at from pg_stat_subscription where subname = $1", [engine.subscription_name])
        const lastApplied = heartbeat?.at ?? reported?.at ?? null
        return {
          subscription,
          lastApplied: lastApplied === null ? null : new Date(lastApplied),
          followed: followed.map((table) => table.source_relid),
          scionTables: [...(present?.heartbeat === true ? ["scion.heartbeat"] : []), ...(present?.log === true ? ["scion.schema_log"] : [])],
          failedChange,
          recopies
        } satisfies MirrorFacts
      })

    /** The connector's replication block: status, lag, and the source time of the last heartbeat applied. */
    const recordState = (engine: EngineRow, facts: MirrorFacts, status: ReplicationStatus, lag: Option.Option<number | null>) =>
      quarantines.recordReplication(engine.connector_id, {
        status,
        lag_bytes: Option.isSome(lag) ? lag.value : null,
        last_applied_at: facts.lastApplied === null ? null : facts.lastApplied.toISOString(),
        active_pipeline_id: engine.publication_name,
        schema_follow: engine.schema_follow,
        measured_at: new Date().toISOString()
      } satisfies ReplicationState)

    /**
     * Drift reconciliation for an engine without capture: the source's catalog against what the
     * mirror follows (`followed`, read with the round's other facts on one short mirror session).
     * Changes applied reset the apply-error baseline (the errors they caused are over); a change
     * that cannot be applied is answered for quarantine. The slot's lag comes from the same
     * source session, and so does the publication's coverage (unknown when the source could not be asked).
     */
    const reconcileDrift = (
      engine: EngineRow,
      running: Engine,
      facts: MirrorFacts,
      mirror: {
        readonly followed: ReadonlyArray<FollowedTable>
        readonly extensions: ReadonlyArray<string>
        readonly dependencies: MirrorDependencies
        readonly wholeSchemas: ReadonlyArray<string>
      }
    ) =>
      Effect.gen(function* () {
        const unknown = { applied: 0, pending: 0, drift: Option.none<Drift>(), mirroredTables: Option.none<ReadonlyArray<string>>(), source: SOURCE_UNKNOWN }
        const details = yield* sourceOf(engine.connector_id)
        if (Option.isNone(details)) return unknown
        const applyErrors = facts.subscription?.apply_errors ?? "0"
        const erroring = engine.last_apply_error_count !== null && Number(applyErrors) > Number(engine.last_apply_error_count)
        // Without a baseline there is nothing to compare with next round: take one now.
        if (engine.last_apply_error_count === null) yield* quarantines.baselineApplyErrors(engine.connector_id, applyErrors)
        const outcome = yield* Effect.scoped(
          Effect.flatMap(sourceSession(details.value, details.value.password, { ...connect, queryMillis: 30_000 }), (source) =>
            Effect.zip(
              reconcile({
                connectorId: engine.connector_id,
                slotName: engine.slot_name,
                publicationName: engine.publication_name,
                subscriptionName: engine.subscription_name,
                wholeSchemas: mirror.wholeSchemas,
                followed: mirror.followed,
                mirrorExtensions: mirror.extensions,
                mirrorDependencies: mirror.dependencies,
                erroring,
                source,
                changes,
                onMirror: (use) => onMirror(running, engine, use),
                onMirrorUnderCopyLock: (use) => tryWithSubscriptionLock(running, engine.mirror_database, onMirror(running, engine, use))
              }),
              coverageOf(engine, facts, source)
            )
          )
        ).pipe(
          Effect.map(([outcome, publication]) => ({ ...outcome, source: { lag: Option.some(outcome.lag), publication } satisfies SourceFacts })),
          Effect.tap((outcome) => rememberLag(engine.connector_id, outcome.source.lag)),
          Effect.catchTag("PgStepFailed", (e) => Effect.logWarning("drift reconciliation could not run", e).pipe(Effect.as(unknown)))
        )
        if (Option.isSome(outcome.mirroredTables)) {
          yield* changes.recordMirroredTables(engine.connector_id, outcome.mirroredTables.value.map((path) => `${details.value.database}.${path}`))
        }
        if (outcome.applied > 0) {
          yield* quarantines.forgetApplyErrors(engine.connector_id)
          yield* refreshStructure(engine.connector_id).pipe(
            Effect.provideService(ConnectorsRepo, repo),
            Effect.provideService(SecretStore, secrets),
            Effect.provideService(SourceIntrospector, introspector),
            Effect.catchAllCause((cause) => Effect.logWarning("the structure could not be read again after reconciliation", cause))
          )
        }
        return outcome
      })

    /**
     * One engine's check: one short session on the mirror and one on the source a round, and the
     * mirror never held while the source is asked (a monitor that held it while it logged in to
     * a remote source, or compared its catalog, kept every branch batch waiting that long). A
     * drift found opens the mirror again, under the copy lock, only to apply it.
     */
    const checkOne = (engine: EngineRow) =>
      Effect.gen(function* () {
        if (!(yield* lease(engine.connector_id))) return
        const running = yield* provisioner.start(engine.connector_id).pipe(Effect.option)
        if (Option.isNone(running)) return
        const found = yield* quarantines.findOpen(engine.connector_id)
        if (Option.isSome(found)) {
          // The source is asked while quarantined too: a slot lost or a publication changed since
          // changes what the entry says.
          const facts = yield* onMirror(running.value, engine, (mirror) => readMirror(engine, mirror))
          const source = yield* askSource(engine, facts)
          const open = yield* supersedeWhenCopyNeeded(engine, found.value, source)
          if (open.status === "released") return yield* restore(engine, running.value, open, source.lag, facts)
          yield* pause(engine, running.value, facts)
          return yield* recordState(engine, facts, "quarantined", source.lag)
        }
        if (engine.schema_follow === "reconcile") {
          // One short session on the mirror for the round: its facts and the tables it follows,
          // read before the source is compared (the mirror is not held meanwhile).
          const { facts, ...mirrored } = yield* onMirror(running.value, engine, (mirror) =>
            Effect.all({
              facts: readMirror(engine, mirror),
              followed: followedTables(mirror),
              extensions: mirrorExtensions(mirror),
              dependencies: mirrorDependencies(mirror),
              wholeSchemas: wholeSchemas(mirror)
            })
          )
          const outcome = yield* reconcileDrift(engine, running.value, facts, mirrored)
          if (Option.isSome(outcome.drift)) {
            const d = outcome.drift.value
            return yield* quarantine(
              engine,
              running.value,
              "schema_drift",
              `${d.table}: ${d.change} could not be applied on the mirror (${d.error}). Make the mirror's table match the source's (or drop the table from the selection and index), then release this entry; a source whose role may create event triggers follows such changes in order (ddl_capture).`,
              Option.none()
            )
          }
          // Tables this round's changes (or an earlier round's, unfinished) rewrote are copied again.
          if (outcome.applied > 0 || facts.recopies.some((request) => request.error === null)) yield* copyAgain(engine, running.value)
          return yield* judge(engine, running.value, facts, outcome.source, { pending: outcome.pending > 0, reconciled: outcome.applied > 0 })
        }
        const facts = yield* onMirror(running.value, engine, (mirror) => readMirror(engine, mirror))
        const source = yield* askSource(engine, facts)
        return yield* judge(engine, running.value, facts, source, { pending: false, reconciled: false })
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("quarantine check failed", cause).pipe(Effect.annotateLogs({ connector_id: engine.connector_id }))),
        Effect.withSpan("QuarantineMonitor.check", { attributes: { connectorId: engine.connector_id } })
      )

    /**
     * A reconciling engine's tables that a change rewrote, copied again from the source
     * (TableRecopy; the schema follower does this for capturing engines). A failure is recorded
     * on the request, which the next round's inspection quarantines.
     */
    const copyAgain = (engine: EngineRow, running: Engine) =>
      Effect.gen(function* () {
        const requests = yield* onMirror(running, engine, recopyRequests)
        if (!requests.some((request) => request.error === null)) return
        const pipeline = { engine: running, mirrorDatabase: engine.mirror_database, subscriptionName: engine.subscription_name, publicationName: engine.publication_name }
        yield* recordOverdue(pipeline, requests, { ...connect, copyTimeout: options.recopyTimeout })
        const copied = yield* onSource(engine, 30_000, (source) => recopyTables(pipeline, source, requests, { ...connect, copyTimeout: options.recopyTimeout }))
        if (Option.getOrElse(copied, () => 0) > 0) yield* Effect.logInfo("tables copied again after a rewriting change").pipe(Effect.annotateLogs({ connector_id: engine.connector_id }))
      }).pipe(Effect.catchAll((e) => Effect.logWarning("a table could not be copied again", e).pipe(Effect.annotateLogs({ connector_id: engine.connector_id }))))

    /** Whether the mirror asks for a table to be copied again now (read on a short session of its own). */
    const recopyUnderWay = (engine: EngineRow, running: Engine) =>
      onMirror(running, engine, recopyRequests).pipe(
        Effect.map((requests) => requests.some((request) => request.error === null)),
        Effect.orElseSucceed(() => false)
      )

    /** The round's verdict from what it read: a quarantine for the first break found, or the replication's state. */
    const judge = (engine: EngineRow, running: Engine, facts: MirrorFacts, source: SourceFacts, drift: { readonly pending: boolean; readonly reconciled: boolean }) =>
      Effect.gen(function* () {
        const broken = yield* inspect(engine, facts, source, drift)
        // The follower may have begun copying a table again (it leaves the publication for a
        // moment) after this round read the mirror: a gap then is that copy's, judged next round.
        if (Option.isSome(broken) && broken.value.reason === "publication_changed" && (yield* recopyUnderWay(engine, running))) {
          return yield* recordState(engine, facts, statusOf(facts, source.lag), source.lag)
        }
        if (Option.isSome(broken)) return yield* quarantine(engine, running, broken.value.reason, broken.value.detail, source.lag)
        yield* recordState(engine, facts, statusOf(facts, source.lag), source.lag)
      })

    /** Retired pipelines past their rollback grace: a cleanup operation each (once). */
    const startCleanups = Effect.gen(function* () {
      for (const due of yield* pipelines.dueCleanups) {
        const operationId = yield* startPipelineOperation({ connectorId: due.connector_id, orgId: due.org_id, action: "cleanup", pipelineId: due.id, guard: false }).pipe(
          Effect.provideService(ConnectorOperations, operations),
          Effect.provideService(PipelinesRepo, pipelines)
        )
        yield* Effect.logInfo("pipeline cleanup started").pipe(Effect.annotateLogs({ connector_id: due.connector_id, pipeline: due.id, operation_id: operationId }))
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("pipeline cleanups could not start", cause)))

    /** One round over every ready (or degraded) engine. */
    const round = Effect.gen(function* () {
      yield* startCleanups
      const engines = yield* quarantines.monitoredEngines
      measuredLags.clear()
      yield* Effect.forEach(engines, checkOne, { concurrency: 4, discard: true })
      yield* recordReplicationLags(Array.from(measuredLags, ([connectorId, bytes]) => ({ connectorId, bytes })))
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("quarantine round failed", cause)))

    return { round } as const
  })

/** QUARANTINE_MONITOR_INTERVAL (default 30 s), QUARANTINE_MAX_LAG_BYTES (default 1 GiB). */
export const QuarantineMonitorConfig: Config.Config<QuarantineMonitorOptions> = Config.all({
  interval: Config.duration("QUARANTINE_MONITOR_INTERVAL").pipe(Config.withDefault(Duration.seconds(30))),
  maxLagBytes: Config.integer("QUARANTINE_MAX_LAG_BYTES").pipe(Config.withDefault(1024 * 1024 * 1024)),
  lease: Config.duration("QUARANTINE_MONITOR_LEASE").pipe(Config.withDefault(Duration.seconds(20))),
  stoppedGrace: Config.duration("QUARANTINE_STOPPED_GRACE").pipe(Config.withDefault(Duration.seconds(60))),
  catchingUpBytes: Config.integer("REPLICATION_CATCHING_UP_BYTES").pipe(Config.withDefault(16 * 1024 * 1024)),
  recopyTimeout: TableRecopyTimeout
})

/** Runs the monitor for the life of the layer. */
export const QuarantineMonitorLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const options = yield* QuarantineMonitorConfig.pipe(Effect.orDie)
    const monitor = yield* makeQuarantineMonitor({ ...options, lease: Duration.min(options.lease, options.interval) })
    yield* Effect.forkScoped(monitor.round.pipe(Effect.repeat(Schedule.spaced(options.interval))))
  })
).pipe(Layer.provide(Layer.merge(SchemaChangesRepo.Default, QuarantineRepo.Default)))
