import { SqlClient } from "@effect/sql"
import { Duration, Effect, Option } from "effect"
import type { ReplicationState } from "../domain/models.js"

/** An engine the quarantine monitor checks, with what it remembers between rounds. */
export interface MonitoredEngine {
  readonly connector_id: string
  readonly mirror_database: string
  readonly subscription_name: string
  readonly slot_name: string
  readonly mirrored_tables: ReadonlyArray<string>
  readonly last_apply_error_count: string | null
  /** Whether the count rose in the engine's last round. */
  readonly apply_errors_rose: boolean
  readonly publication_name: string
  readonly schema_follow: "capture" | "reconcile"
  /** A rollout is running: it changes the publication and the mirror's tables in turn. */
  readonly rolling_out: boolean
}

/** A quarantine entry as GET …/quarantine lists it. */
export interface QuarantineEntryRow {
  readonly id: string
  readonly connector_id: string
  readonly status: "quarantined" | "released"
  readonly reason: string
  readonly detail: string
  readonly quarantined_at: Date
  readonly released_at: Date | null
}

/** The open (quarantined) or released entry of a connector. */
export interface OpenEntry {
  readonly id: string
  readonly status: string
  readonly reason: string
}

/**
 * The quarantine monitor's metadata: leases, entries, the apply-error and pause baselines it keeps
 * on the engine row, and the connector's status and replication block it writes.
 */
export class QuarantineRepo extends Effect.Service<QuarantineRepo>()("@scion/connector/QuarantineRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const orDie = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.orDie(effect)

    /** Engines of connectors that are set up (ready, or degraded while quarantined). */
    const monitoredEngines = orDie(sql<MonitoredEngine>`
      select e.connector_id, e.mirror_database, e.subscription_name, e.slot_name, e.mirrored_tables, e.last_apply_error_count::text as last_apply_error_count, e.apply_errors_rose,
             e.publication_name, e.schema_follow, c.indexing_status = 'indexing' as rolling_out
      from engines e join connectors c on c.id = e.connector_id
      where c.branching_engine_status in ('ready', 'degraded')`)

    /** Takes the engine's lease for this round; false when another replica holds it. */
    const takeLease = (connectorId: string, lease: Duration.Duration) =>
      orDie(sql<{ readonly connector_id: string }>`
        update engines set monitor_lease_until = now() + make_interval(secs => ${Duration.toSeconds(lease)})
        where connector_id = ${connectorId} and (monitor_lease_until is null or monitor_lease_until < now())
        returning connector_id`).pipe(Effect.map((rows) => rows.length > 0))

    /**
     * Records a quarantined entry and degrades a ready connector in one transaction (never ready
     * while quarantined); false when the connector already has an open entry.
     */
    const openEntry = (id: string, connectorId: string, reason: string, detail: string) =>
      orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            const rows = yield* sql`
              insert into quarantine_entries (id, connector_id, status, reason, detail) values (${id}, ${connectorId}, 'quarantined', ${reason}, ${detail})
              on conflict do nothing returning id`
            if (rows.length > 0) {
              yield* sql`update connectors set branching_engine_status = 'degraded', updated_at = now() where id = ${connectorId} and branching_engine_status = 'ready'`
            }
            return rows.length > 0
          })
        )
      )

    const findOpen = (connectorId: string) =>
      orDie(sql<OpenEntry>`select id, status, reason from quarantine_entries where connector_id = ${connectorId} and status in ('quarantined', 'released')`).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /**
     * The entry now says the mirror must be copied again (`slot_lost` or `publication_changed`
     * supersede whatever opened it: only that restore can bring the pipeline back); false when it
     * said one of them already or is gone.
     */
    const markCopyNeeded = (id: string, reason: "slot_lost" | "publication_changed", detail: string) =>
      orDie(
        sql`update quarantine_entries set reason = ${reason}, detail = ${detail} where id = ${id} and reason not in ('slot_lost', 'publication_changed') returning id`
      ).pipe(
        Effect.map((rows) => rows.length > 0)
      )

    const deleteEntry = (id: string) => orDie(sql`delete from quarantine_entries where id = ${id}`).pipe(Effect.asVoid)

    /** A restored pipeline: the degraded connector is ready again. */
    const markReady = (connectorId: string) =>
      orDie(sql`update connectors set branching_engine_status = 'ready', updated_at = now() where id = ${connectorId} and branching_engine_status = 'degraded'`).pipe(Effect.asVoid)

    /** The round's apply-error count, and whether it rose since the last round. */
    const recordApplyErrors = (connectorId: string, count: string, rose: boolean) =>
      orDie(sql`update engines set last_apply_error_count = ${count}, apply_errors_rose = ${rose} where connector_id = ${connectorId}`).pipe(Effect.asVoid)

    /** A baseline where there is none yet (the next round compares with it). */
    const baselineApplyErrors = (connectorId: string, count: string) =>
      orDie(sql`update engines set last_apply_error_count = ${count} where connector_id = ${connectorId} and last_apply_error_count is null`).pipe(Effect.asVoid)

    const forgetApplyErrors = (connectorId: string) =>
      orDie(sql`update engines set last_apply_error_count = null, apply_errors_rose = false where connector_id = ${connectorId}`).pipe(Effect.asVoid)

    /** After a release: no error baseline, no pause on record. */
    const forgetBaselines = (connectorId: string) =>
      orDie(sql`update engines set last_apply_error_count = null, apply_errors_rose = false, subscription_disabled_since = null where connector_id = ${connectorId}`).pipe(Effect.asVoid)

    /** The subscription is seen disabled: since when (kept from the first sighting), in seconds. */
    const disabledFor = (connectorId: string) =>
      orDie(sql<{ readonly stopped_for: number }>`
        update engines set subscription_disabled_since = coalesce(subscription_disabled_since, now())
        where connector_id = ${connectorId}
        returning extract(epoch from now() - subscription_disabled_since)::float8 as stopped_for`).pipe(Effect.map((rows) => rows[0]?.stopped_for ?? 0))

    const clearDisabled = (connectorId: string) =>
      orDie(sql`update engines set subscription_disabled_since = null where connector_id = ${connectorId} and subscription_disabled_since is not null`).pipe(Effect.asVoid)

    /**
     * The connector's replication block, with the active pipeline read once the connector's row is
     * locked: a cutover or rollback (PipelinesRepo's switch, which writes both rows in one
     * transaction) committing during the round wins. In one statement the engines row was read
     * with the statement's snapshot, taken before it waited for the switch's lock, and the round
     * wrote the replaced pipeline back until its next round (a deep-reset test read it so).
     */
    const recordReplication = (connectorId: string, state: ReplicationState) =>
      orDie(
        sql.withTransaction(
          Effect.zipRight(
            sql`select 1 from connectors where id = ${connectorId} for update`,
            sql`update connectors set replication = ${JSON.stringify(state)}::jsonb
                   || jsonb_build_object('active_pipeline_id', (select e.publication_name from engines e where e.connector_id = ${connectorId}))
                 where id = ${connectorId}`
          )
        )
      ).pipe(Effect.asVoid)

    /** The connector's entries with status quarantined, oldest first (released ones are not listed). */
    const listQuarantined = (connectorId: string) =>
      orDie(sql<QuarantineEntryRow>`
        select id, connector_id, status, reason, detail, quarantined_at, released_at
        from quarantine_entries where connector_id = ${connectorId} and status = 'quarantined'
        order by quarantined_at, id`)

    /** quarantined → released (released again keeps the first release); none when the row is gone. */
    const release = (connectorId: string, quarantineId: string, releasedBy: string) =>
      orDie(sql<QuarantineEntryRow>`
        update quarantine_entries
        set status = 'released', released_at = coalesce(released_at, now()), released_by = coalesce(released_by, ${releasedBy})
        where id = ${quarantineId} and connector_id = ${connectorId}
        returning id, connector_id, status, reason, detail, quarantined_at, released_at`).pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

    return {
      listQuarantined,
      release,
      monitoredEngines,
      takeLease,
      openEntry,
      findOpen,
      markCopyNeeded,
      deleteEntry,
      markReady,
      recordApplyErrors,
      baselineApplyErrors,
      forgetApplyErrors,
      forgetBaselines,
      disabledFor,
      clearDisabled,
      recordReplication
    } as const
  })
}) {}
