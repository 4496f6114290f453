import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"

/** What the purge found: the connector pointing at another delete, or its secrets and row gone. */
export type PurgeOutcome =
  | { readonly _tag: "Superseded"; readonly by: string | null }
  | { readonly _tag: "Purged"; readonly secretsPurged: number; readonly connectorDeleted: boolean }

/**
 * The deletion lock, the delete's pointer and the purge (Deletion.ts): the connector row's
 * `deletion_locked` and `delete_operation_id`, its secrets, and the engine row's monitor lease the
 * delete holds. Statements run on the caller's transaction when there is one.
 */
export class DeletionRepo extends Effect.Service<DeletionRepo>()("@scion/connector/DeletionRepo", {
  accessors: true,
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The row locked for the rest of the transaction: its lock and the delete it points at. */
    const lockForDelete = (connectorId: string) =>
      sql<{ readonly deletion_locked: boolean; readonly delete_operation_id: string | null }>`
        select deletion_locked, delete_operation_id from connectors where id = ${connectorId} for update`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    const setDeletionLocked = (connectorId: string, locked: boolean) =>
      sql`update connectors set deletion_locked = ${locked}, updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const pointDelete = (connectorId: string, operationId: string) =>
      sql`update connectors set delete_operation_id = ${operationId}, updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const hasEngine = (connectorId: string) =>
      sql`select 1 from engines where connector_id = ${connectorId}`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )

    /** The quarantine monitor leaves the engine alone while the delete runs (a paused subscription is no break). */
    const holdMonitorLease = (connectorId: string) =>
      sql`update engines set monitor_lease_until = 'infinity' where connector_id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const releaseMonitorLease = (connectorId: string) =>
      sql`update engines set monitor_lease_until = null where connector_id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const countSecrets = (connectorId: string) =>
      sql<{ readonly n: number }>`select count(*)::int as n from secrets where owner_id = ${connectorId}`.pipe(
        Effect.map((rows) => rows[0]?.n ?? 0),
        Effect.orDie
      )

    /** In one transaction: the connector's secrets and its row go, unless another delete took it over. */
    const purge = (connectorId: string, deleteOperationId: string) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const [row] = yield* sql<{ readonly delete_operation_id: string | null }>`select delete_operation_id from connectors where id = ${connectorId} for update`
            if (row !== undefined && row.delete_operation_id !== deleteOperationId) return { _tag: "Superseded", by: row.delete_operation_id } satisfies PurgeOutcome
            const gone = yield* sql<{ readonly name: string }>`delete from secrets where owner_id = ${connectorId} returning name`
            yield* sql`delete from connectors where id = ${connectorId}`
            return { _tag: "Purged", secretsPurged: gone.length, connectorDeleted: row !== undefined } satisfies PurgeOutcome
          })
        )
        .pipe(Effect.orDie)

    return { lockForDelete, setDeletionLocked, pointDelete, hasEngine, holdMonitorLease, releaseMonitorLease, countSecrets, purge } as const
  })
}) {}
