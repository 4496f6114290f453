import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** One change as the mirror recorded it (scion.schema_change_results on the engine). */
export interface MirrorChangeResult {
  readonly log_id: string
  readonly source_at: Date
  readonly applied_at: Date
  readonly command_tag: string
  readonly object_identity: string | null
  readonly statement: string | null
  readonly status: "applied" | "skipped" | "failed"
  readonly actions: ReadonlyArray<string>
  readonly error: string | null
  readonly tables_added: ReadonlyArray<string>
}

export interface SchemaChangeRow {
  readonly id: string
  readonly mode: "captured" | "reconciled"
  readonly command_tag: string
  readonly object_identity: string | null
  readonly statement: string | null
  readonly status: "applied" | "skipped" | "reconciled" | "failed"
  readonly actions: ReadonlyArray<string>
  readonly error: string | null
  readonly tables_added: ReadonlyArray<string>
  readonly source_committed_at: Date | null
  readonly applied_at: Date
}

/** An engine whose mirror applies captured changes, and where its results were last read. */
export interface FollowedEngine {
  readonly connector_id: string
  readonly mirror_database: string
  readonly subscription_name: string
  readonly publication_name: string
  readonly schema_log_position: string
}

/** The metadata side of schema changes: the record the API lists and where each engine's follower stands. */
export class SchemaChangesRepo extends Effect.Service<SchemaChangesRepo>()("@scion/connector/SchemaChangesRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** Engines that capture, of connectors whose engine is set up (ready, or degraded while quarantined). */
    const capturingEngines = sql<FollowedEngine>`
      select e.connector_id, e.mirror_database, e.subscription_name, e.publication_name, e.schema_log_position::text as schema_log_position
      from engines e join connectors c on c.id = e.connector_id
      where e.schema_follow = 'capture' and c.branching_engine_status in ('ready', 'degraded')`.pipe(Effect.orDie)

    /**
     * Records the mirror's results (a result already recorded is kept: two replicas may read the
     * same batch), the tables the mirror now holds, and the new position, in one transaction.
     */
    const recordCaptured = (connectorId: string, results: ReadonlyArray<MirrorChangeResult>, mirroredTables: ReadonlyArray<string>) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            for (const r of results) {
              yield* sql`
                insert into schema_changes (connector_id, mode, source_log_id, command_tag, object_identity, statement, status, actions, error, tables_added, source_committed_at, applied_at)
                values (${connectorId}, 'captured', ${r.log_id}, ${r.command_tag}, ${r.object_identity}, ${r.statement}, ${r.status}, ${JSON.stringify(r.actions)}::jsonb,
                        ${r.error}, ${JSON.stringify(r.tables_added)}::jsonb, ${r.source_at}, ${r.applied_at})
                on conflict (connector_id, source_log_id) where source_log_id is not null do nothing`
            }
            const last = results.at(-1)?.log_id ?? "0"
            yield* sql`update engines set schema_log_position = greatest(schema_log_position, ${last}::bigint), mirrored_tables = ${mirroredTables}, updated_at = now()
                       where connector_id = ${connectorId}`
          })
        )
        .pipe(Effect.orDie)

    /** A change the monitor's reconciliation made (or could not make). */
    const recordReconciled = (
      connectorId: string,
      change: { readonly commandTag: string; readonly objectIdentity: string; readonly status: "reconciled" | "failed"; readonly actions: ReadonlyArray<string>; readonly error: string | null }
    ) =>
      sql`
        insert into schema_changes (connector_id, mode, command_tag, object_identity, status, actions, error)
        values (${connectorId}, 'reconciled', ${change.commandTag}, ${change.objectIdentity}, ${change.status}, ${JSON.stringify(change.actions)}::jsonb, ${change.error})`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    /** The tables the mirror holds (`database.schema.table`), after reconciliation renamed, moved or dropped one. */
    const recordMirroredTables = (connectorId: string, mirroredTables: ReadonlyArray<string>) =>
      sql`update engines set mirrored_tables = ${mirroredTables}, updated_at = now() where connector_id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    /** Newest first (by the table's bigint id: `order by id` would name the text column selected as id). */
    const list = (connectorId: string, page: { readonly limit: number; readonly offset: number }) =>
      sql<SchemaChangeRow>`
        select id::text as id, mode, command_tag, object_identity, statement, status, actions, error, tables_added, source_committed_at, applied_at
        from schema_changes where connector_id = ${connectorId}
        order by schema_changes.id desc limit ${page.limit} offset ${page.offset}`.pipe(Effect.orDie)

    /** The latest change that failed to apply, for a quarantine's detail. */
    const latestFailure = (connectorId: string) =>
      sql<SchemaChangeRow>`
        select id::text as id, mode, command_tag, object_identity, statement, status, actions, error, tables_added, source_committed_at, applied_at
        from schema_changes where connector_id = ${connectorId} and status = 'failed' order by schema_changes.id desc limit 1`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    /** Engines whose source carries the heartbeat, of connectors whose engine is set up. */
    const heartbeatEngines = sql<{ readonly connector_id: string }>`
      select e.connector_id from engines e join connectors c on c.id = e.connector_id
      where e.heartbeat and c.branching_engine_status in ('ready', 'degraded')`.pipe(Effect.orDie)

    return { capturingEngines, heartbeatEngines, recordCaptured, recordReconciled, recordMirroredTables, list, latestFailure } as const
  })
}) {}
