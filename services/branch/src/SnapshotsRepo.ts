import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Snapshot, SnapshotStatus } from "./domain/models.js"

interface Row {
  readonly id: string
  readonly org_id: string
  readonly connector_id: string
  readonly name: string
  readonly status: SnapshotStatus
  readonly database_name: string
  readonly source_lsn: string | null
  readonly data_as_of: Date | null
  readonly error: string | null
  readonly create_operation_id: string
  readonly delete_operation_id: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

/** The columns an update may set (updated_at is set by it). */
export type SnapshotUpdate = Partial<Pick<Row, "status" | "source_lsn" | "data_as_of" | "error" | "delete_operation_id">> & { readonly deleted_at?: Date }

const toSnapshot = (r: Row): Snapshot => ({
  id: r.id,
  orgId: r.org_id,
  connectorId: r.connector_id,
  name: r.name,
  status: r.status,
  databaseName: r.database_name,
  sourceLsn: r.source_lsn,
  dataAsOf: r.data_as_of,
  error: r.error,
  createOperationId: r.create_operation_id,
  deleteOperationId: r.delete_operation_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at
})

/** A snapshot that still holds a database (and counts against the plan's branch limit). */
export const LIVE_SNAPSHOT_STATUSES = ["creating", "ready", "deleting"] as const

/** The snapshots table. SQL failures are infrastructure: defects at this edge. */
export class SnapshotsRepo extends Effect.Service<SnapshotsRepo>()("@scion/branch/SnapshotsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const find = (id: string) =>
      Effect.map(sql<Row>`select * from snapshots where id = ${id}`, (rows) => Option.map(Option.fromNullable(rows[0]), toSnapshot)).pipe(Effect.orDie)

    /** The row, locked until the transaction ends: shared by branch creates, exclusive for a delete. */
    const lock = (id: string, mode: "share" | "update") =>
      Effect.map(mode === "share" ? sql<Row>`select * from snapshots where id = ${id} for share` : sql<Row>`select * from snapshots where id = ${id} for update`, (rows) =>
        Option.map(Option.fromNullable(rows[0]), toSnapshot)
      ).pipe(Effect.orDie)

    const insert = (row: { readonly id: string; readonly orgId: string; readonly connectorId: string; readonly name: string; readonly databaseName: string; readonly createOperationId: string }) =>
      sql`insert into snapshots ${sql.insert({
        id: row.id,
        org_id: row.orgId,
        connector_id: row.connectorId,
        name: row.name,
        status: "creating",
        database_name: row.databaseName,
        create_operation_id: row.createOperationId
      })}`.pipe(Effect.asVoid, Effect.orDie)

    const update = (id: string, fields: SnapshotUpdate) => sql`update snapshots set ${sql.update({ ...fields, updated_at: new Date() })} where id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

    /** The connector's snapshots that are not deleted, newest first. */
    const listByConnector = (connectorId: string) =>
      Effect.map(sql<Row>`select * from snapshots where connector_id = ${connectorId} and status <> 'deleted' order by created_at desc, id desc`, (rows) => rows.map(toSnapshot)).pipe(Effect.orDie)

    /** Every snapshot of the connector that may still have a database on the engine. */
    const liveOnConnector = (connectorId: string) =>
      Effect.map(sql<Row>`select * from snapshots where connector_id = ${connectorId} and status <> 'deleted'`, (rows) => rows.map(toSnapshot)).pipe(Effect.orDie)

    const nameTaken = (connectorId: string, name: string) =>
      Effect.map(sql<{ id: string }>`select id from snapshots where connector_id = ${connectorId} and name = ${name} and status in ${sql.in(LIVE_SNAPSHOT_STATUSES)}`, (rows) => rows.length > 0).pipe(Effect.orDie)

    /** Serialises everyone deciding whether a snapshot name is free on a connector, until the transaction ends. */
    const lockName = (connectorId: string, name: string) =>
      sql`select pg_advisory_xact_lock(hashtext(${`scion-snapshot-name:${connectorId}:${name}`}))`.pipe(Effect.asVoid, Effect.orDie)

    /** Whether a branch is being cut from the snapshot right now. */
    const inUse = (id: string) =>
      Effect.map(sql<{ id: string }>`select id from branches where snapshot_id = ${id} and status = 'creating' limit 1`, (rows) => rows.length > 0).pipe(Effect.orDie)

    return { find, lock, insert, update, listByConnector, liveOnConnector, nameTaken, lockName, inUse } as const
  })
}) {}
