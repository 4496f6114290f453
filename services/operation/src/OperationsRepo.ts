import { SqlClient } from "@effect/sql"
import { answersByKey, keysArray, makeGroupedStatement } from "@scion/kit"
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

type NewOperationRow = NewOperation & { readonly setupStatus: JsonObject | null }

interface VersionedChanges {
  readonly id: string
  readonly version: number
  readonly changes: Changes
}

/** Rows answered by a grouped statement, each tagged with the position of the call it answers. */
type Answered = OperationRow & { readonly ord: number }

/**
 * A group's rows in id order: two replicas' groups touching the same operations take their row
 * locks in one order, so they wait for each other instead of deadlocking (Postgres would end one
 * after deadlock_timeout, 1 s, and its calls would be retried one by one).
 */
const byId = <R extends { readonly id: string }>(rows: Array<R>): Array<R> => rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

/** One answer per call of a group: its row, or none when the statement left it out. */
const byOrd = (count: number, rows: ReadonlyArray<Answered>): Array<Option.Option<Operation>> => {
  const answers = Array.from({ length: count }, () => Option.none<Operation>())
  for (const row of rows) answers[row.ord] = Option.some(toOperation(row))
  return answers
}

/**
 * The operations table. SQL failures are defects here, at the repository edge.
 *
 * Creates, reports and reads are grouped (kit's `makeGroupedStatement`; inside a transaction they
 * run alone, on its connection): calls that arrive while one of their kind is in flight go out
 * together as one statement, which the throughput profile asked for (each statement cost ~200 µs of this unit's CPU in the socket
 * write alone and ~330 µs of Postgres's). Each call still gets exactly its own row's answer.
 */
export class OperationsRepo extends Effect.Service<OperationsRepo>()("@scion/operation/OperationsRepo", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const first = (rows: ReadonlyArray<OperationRow>) => Option.map(Option.fromNullable(rows[0]), toOperation)

    /** A report's changes as one record of a grouped update, `ord` its place in the group. */
    const changesRecord = (ord: number, call: VersionedChanges) => ({
      ord,
      id: call.id,
      version: call.version,
      status: call.changes.status,
      stage: call.changes.stage,
      stage_label: call.changes.stageLabel,
      progress: call.changes.progress,
      result: call.changes.result,
      error: call.changes.error,
      setup_status: call.changes.setupStatus,
      start: call.changes.start,
      complete: call.changes.complete
    })

    // An id twice in one group: the first call inserts, the later ones find it existing (none).
    const insertGrouped = yield* makeGroupedStatement({
      name: "operations.insert",
      run: (calls: ReadonlyArray<NewOperationRow>) =>
        sql<OperationRow>`
          insert into operations (id, org_id, type, resource_id, setup_status)
          select c.id, c.org_id, c.type, c.resource_id, c.setup_status
          from jsonb_to_recordset(${JSON.stringify(
            byId(calls.map((call) => ({ id: call.id, org_id: call.orgId, type: call.type, resource_id: call.resourceId, setup_status: call.setupStatus })))
          )}::jsonb) as c(id text, org_id text, type text, resource_id text, setup_status jsonb)
          on conflict (id) do nothing
          returning *`.pipe(
          Effect.map((rows) => {
            const firstCall = new Map<string, number>()
            calls.forEach((call, ord) => firstCall.has(call.id) || firstCall.set(call.id, ord))
            return byOrd(
              calls.length,
              rows.map((row) => ({ ...row, ord: firstCall.get(row.id)! }))
            )
          }),
          Effect.orDie
        )
    })

    // The same id and version twice in one group: one write wins (its ord comes back), the
    // others answer none and decide again, as they would after losing to another replica.
    // The rows are found through kit `keysArray`, not by the join alone (which read the whole table).
    const updateGrouped = yield* makeGroupedStatement({
      name: "operations.updateIfVersion",
      run: (calls: ReadonlyArray<VersionedChanges>) =>
        sql<Answered>`
          update operations o set
            status = c.status,
            stage = c.stage,
            stage_label = c.stage_label,
            progress = c.progress,
            result = c.result,
            error = c.error,
            setup_status = c.setup_status,
            started_at = case when c.start then coalesce(o.started_at, now()) else o.started_at end,
            completed_at = case when c.complete then coalesce(o.completed_at, now()) else o.completed_at end,
            updated_at = now(),
            heartbeat_at = now(),
            version = o.version + 1
          from jsonb_to_recordset(${JSON.stringify(byId(calls.map((call, ord) => changesRecord(ord, call))))}::jsonb)
            as c(ord int, id text, version bigint, status text, stage text, stage_label text, progress int, result jsonb, error text, setup_status jsonb, start boolean, complete boolean)
          where o.id = any(${keysArray(sql, calls.map((call) => call.id))}) and o.id = c.id and o.version = c.version
          returning o.*, c.ord`.pipe(
          Effect.map((rows) => byOrd(calls.length, rows)),
          Effect.orDie
        )
    })

    const findGrouped = yield* makeGroupedStatement({
      name: "operations.find",
      run: (ids: ReadonlyArray<string>) =>
        sql<OperationRow>`select * from operations where id = any(${keysArray(sql, ids)})`.pipe(
          Effect.map((rows) => answersByKey(ids, rows.map(toOperation), (operation) => operation.id)),
          Effect.orDie
        )
    })

    return {
      /** How many operations there are of each type and status (the metrics' scion_operations). */
      countsByTypeAndStatus: sql<{ type: string; status: string; n: number }>`select type, status, count(*)::int as n from operations group by type, status`.pipe(
        Effect.map((rows) => rows.map((row) => ({ labels: { type: row.type, status: row.status }, count: row.n }))),
        Effect.orDie
      ),

      /** None when an operation with this id exists already. */
      insert: insertGrouped,

      find: findGrouped,

      /** Locks the row until the transaction ends: contended reports on one operation are serialised. */
      findForUpdate: (id: string) => sql<OperationRow>`select * from operations where id = ${id} for update`.pipe(Effect.map(first), Effect.orDie),

      /**
       * Writes a report's changes over the version the decision was made on; none when another
       * write came first (the caller re-reads and decides again). Every report is also a heartbeat.
       */
      updateIfVersion: (id: string, version: number, changes: Changes) => updateGrouped({ id, version, changes }),

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
