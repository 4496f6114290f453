import { SqlClient, type SqlError } from "@effect/sql"
import { JobFailed, type JobHandler, type OperationEnded, type RpcError } from "@scion/kit"
import { Effect, Schema } from "effect"

const QualifiedName = Schema.String.pipe(
  Schema.pattern(/^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$/),
  Schema.annotations({ description: "a table name, optionally schema-qualified, lower-case" })
)

/** Copy every row of `source_table` (which needs a bigint `id` key) into `target_table`. */
export const CopyTablePayload = Schema.Struct({
  source_table: QualifiedName,
  target_table: QualifiedName,
  batch_rows: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100_000)), { default: () => 1000 })
})
export type CopyTablePayload = typeof CopyTablePayload.Type

/**
 * A real multi-step job: prepare the target, copy in key order in batches, verify. Each batch and
 * its progress row commit together, so a crash anywhere leaves a consistent resume point and a
 * redelivery never copies a row twice. A missing source is a permanent failure; anything else
 * (for example a target whose columns do not fit) is retried, then given up.
 */
export const copyTable = (unit: string): JobHandler<
  CopyTablePayload,
  typeof CopyTablePayload.Encoded,
  JobFailed | OperationEnded | RpcError | SqlError.SqlError,
  SqlClient.SqlClient
> => ({
  unit,
  type: "copy_table",
  payload: CopyTablePayload,
  // Looks for the source while the operation is marked running; records nothing before that.
  startEarly: true,
  run: (job) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { source_table: source, target_table: target, batch_rows: batchRows } = job.payload
      const [found] = yield* sql<{ readonly exists: boolean }>`select to_regclass(${source}) is not null as exists`
      yield* job.started
      yield* sql`insert into job_deliveries (operation_id, attempt) values (${job.operationId}, ${job.attempt})`
      yield* job.report({ stage: "prepare", stageLabel: "Preparing the target table", progress: 0 })

      if (!found?.exists) return yield* new JobFailed({ message: `Source table ${source} does not exist` })
      yield* sql.unsafe(`create table if not exists ${target} (like ${source} including all)`)
      // Names are interpolated: the payload schema admits only [a-z0-9_] identifiers.
      const [counted] = yield* sql.unsafe<{ readonly total: string }>(`select count(*)::text as total from ${source}`)
      const total = Number(counted?.total ?? 0)
      yield* sql`insert into copy_progress (operation_id) values (${job.operationId}) on conflict do nothing`

      let copied = 0
      let batches = 0
      while (true) {
        const batch = yield* sql.withTransaction(
          Effect.gen(function* () {
            const [progress] = yield* sql<{ readonly last_id: string; readonly rows_copied: string; readonly batches: number }>`
              select last_id::text, rows_copied::text, batches from copy_progress where operation_id = ${job.operationId} for update`
            const lastId = progress?.last_id ?? "0"
            const [moved] = yield* sql.unsafe<{ readonly n: string; readonly max_id: string | null }>(
              `with moved as (insert into ${target} select * from ${source} where id > $1 order by id limit $2 returning id)
               select count(*)::text as n, max(id)::text as max_id from moved`,
              [lastId, batchRows]
            )
            const n = Number(moved?.n ?? 0)
            if (n > 0) {
              yield* sql`update copy_progress set last_id = ${moved!.max_id}, rows_copied = rows_copied + ${n}, batches = batches + 1
                         where operation_id = ${job.operationId}`
            }
            return { n, rowsCopied: Number(progress?.rows_copied ?? 0) + n, batches: (progress?.batches ?? 0) + (n > 0 ? 1 : 0) }
          })
        )
        copied = batch.rowsCopied
        batches = batch.batches
        if (batch.n === 0) break
        yield* job.report({
          stage: "copy",
          stageLabel: `Copying rows (${copied} of ${total})`,
          progress: total === 0 ? 99 : Math.min(99, Math.floor((copied / total) * 100))
        })
      }

      yield* job.report({ stage: "verify", stageLabel: "Verifying the copy" })
      const [verified] = yield* sql.unsafe<{ readonly n: string }>(`select count(*)::text as n from ${target}`)
      return { source_table: source, target_table: target, rows_copied: copied, batches, target_rows: Number(verified?.n ?? 0) }
    })
})
