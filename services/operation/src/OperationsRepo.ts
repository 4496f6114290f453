import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { JsonObject, NewOperation, Operation, OperationStatus, OperationType } from "./domain/models.js"
import type { Changes } from "./domain/stateMachine.js"

interface OperationRow {
  readonly id: string
  readonly org_id: string
  readonly type: OperationType
  readonly resource_id: string
  readonly status: OperationStatus
  readonly stage: string | null
  readonly stage_label: string | null
  readonly progress: number | null
  readonly result: JsonObject | null
  readonly error: string | null
  readonly setup_status: JsonObject | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly started_at: Date | null
  readonly completed_at: Date | null
  readonly heartbeat_at: Date
  readonly version: string
}

const toOperation = (row: OperationRow): Operation => ({
  id: row.id,
  orgId: row.org_id,
  type: row.type,
  resourceId: row.resource_id,
  status: row.status,
  stage: row.stage,
  stageLabel: row.stage_label,
  progress: row.progress,
  result: row.result,
  error: row.error,
  setupStatus: row.setup_status,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  startedAt: row.started_at,
  completedAt: row.completed_at,
  heartbeatAt: row.heartbeat_at,
  version: Number(row.version)
})

const jsonb = (value: JsonObject | null) => (value === null ? null : JSON.stringify(value))

/** The operations table. SQL failures are defects here, at the repository edge. */
export class OperationsRepo extends Effect.Service<OperationsRepo>()("@scion/operation/OperationsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const first = (rows: ReadonlyArray<OperationRow>) => Option.map(Option.fromNullable(rows[0]), toOperation)

    return {
      /** How many operations there are of each type and status (the metrics' scion_operations). */
      countsByTypeAndStatus: sql<{ type: string; status: string; n: number }>`select type, status, count(*)::int as n from operations group by type, status`.pipe(
        Effect.map((rows) => rows.map((row) => ({ labels: { type: row.type, status: row.status }, count: row.n }))),
        Effect.orDie
      ),

      /** None when an operation with this id exists already. */
      insert: (input: NewOperation & { readonly setupStatus: JsonObject | null }) =>
        sql<OperationRow>`
          insert into operations (id, org_id, type, resource_id, setup_status)
          values (${input.id}, ${input.orgId}, ${input.type}, ${input.resourceId}, ${jsonb(input.setupStatus)}::jsonb)
          on conflict (id) do nothing
          returning *`.pipe(Effect.map(first), Effect.orDie),

      find: (id: string) => sql<OperationRow>`select * from operations where id = ${id}`.pipe(Effect.map(first), Effect.orDie),

      /** Locks the row until the transaction ends: contended reports on one operation are serialised. */
      findForUpdate: (id: string) => sql<OperationRow>`select * from operations where id = ${id} for update`.pipe(Effect.map(first), Effect.orDie),

      /**
       * Writes a report's changes over the version the decision was made on; none when another
       * write came first (the caller re-reads and decides again). Every report is also a heartbeat.
       */
      updateIfVersion: (id: string, version: number, c: Changes) =>
        sql<OperationRow>`
          update operations set
            status = ${c.status},
            stage = ${c.stage},
            stage_label = ${c.stageLabel},
            progress = ${c.progress},
            result = ${jsonb(c.result)}::jsonb,
            error = ${c.error},
            setup_status = ${jsonb(c.setupStatus)}::jsonb,
            started_at = case when ${c.start} then coalesce(started_at, now()) else started_at end,
            completed_at = case when ${c.complete} then coalesce(completed_at, now()) else completed_at end,
            updated_at = now(),
            heartbeat_at = now(),
            version = version + 1
          where id = ${id} and version = ${version}
          returning *`.pipe(Effect.map(first), Effect.orDie),

      listByResource: (orgId: string, resourceId: string) =>
        sql<OperationRow>`
          select * from operations where org_id = ${orgId} and resource_id = ${resourceId}
          order by created_at desc, id desc limit 1000`.pipe(Effect.map((rows) => rows.map(toOperation)), Effect.orDie),

      /**
       * Fails every running operation whose worker has not reported for longer than the deadline.
       * One statement: replicas sweeping together each fail a row at most once (the status
       * condition is re-checked after the row lock).
       */
      failStale: (deadlineSeconds: number, error: string) =>
        sql<OperationRow>`
          update operations set
            status = 'failed',
            error = ${error},
            completed_at = now(),
            updated_at = now(),
            version = version + 1
          where status = 'running' and heartbeat_at < now() - make_interval(secs => ${deadlineSeconds})
          returning *`.pipe(Effect.map((rows) => rows.map(toOperation)), Effect.orDie)
    }
  })
}) {}
