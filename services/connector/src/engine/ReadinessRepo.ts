import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export interface ReadinessCheckRow {
  readonly attempt_id: string
  readonly check_name: string
  readonly table_path: string | null
  readonly status: "pass" | "fail"
  readonly message: string
  readonly pod_name: string
  readonly checked_at: Date
}

export interface ReadinessAttemptRow {
  readonly attempt_id: string
  readonly total_checks: number
  readonly passed_checks: number
  readonly failed_checks: number
  readonly latest_checked_at: Date
  readonly pod_name: string
}

/** One check of an attempt, as the readiness step records it. */
export interface ReadinessCheckRecord {
  readonly check_name: string
  readonly table_path: string | null
  readonly status: "pass" | "fail"
  readonly message: string
}

/** The readiness evidence: what engine setup's last step writes and `readiness-checks`/`-attempts` read. */
export class ReadinessRepo extends Effect.Service<ReadinessRepo>()("@scion/connector/ReadinessRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * Rows of the newest attempt first; within an attempt in the order they were written. Filters
     * by attempt and check name, only failed rows when asked.
     */
    const checks = (input: {
      readonly connectorId: string
      readonly attemptId?: string | undefined
      readonly checkName?: string | undefined
      readonly onlyFailed: boolean
      readonly limit: number
      readonly offset: number
    }) =>
      sql<ReadinessCheckRow>`
        select c.attempt_id, c.check_name, c.table_path, c.status, c.message, c.pod_name, c.checked_at
        from readiness_checks c
        join (select attempt_id, min(id) as first_id from readiness_checks where connector_id = ${input.connectorId} group by attempt_id) a on a.attempt_id = c.attempt_id
        where c.connector_id = ${input.connectorId}
          ${input.attemptId !== undefined ? sql`and c.attempt_id = ${input.attemptId}` : sql``}
          ${input.checkName !== undefined ? sql`and c.check_name = ${input.checkName}` : sql``}
          ${input.onlyFailed ? sql`and c.status = 'fail'` : sql``}
        order by a.first_id desc, c.id
        limit ${input.limit} offset ${input.offset}`.pipe(Effect.orDie)

    /** One summary per attempt, most recent first. */
    const attempts = (connectorId: string, limit: number) =>
      sql<ReadinessAttemptRow>`
        select attempt_id, count(*)::int as total_checks,
               count(*) filter (where status = 'pass')::int as passed_checks,
               count(*) filter (where status = 'fail')::int as failed_checks,
               max(checked_at) as latest_checked_at,
               (array_agg(pod_name order by id desc))[1] as pod_name
        from readiness_checks
        where connector_id = ${connectorId}
        group by attempt_id
        order by min(id) desc
        limit ${limit}`.pipe(Effect.orDie)

    /** An attempt's checks, in order, as one statement. */
    const record = (connectorId: string, attemptId: string, instance: string, rows: ReadonlyArray<ReadinessCheckRecord>) =>
      rows.length === 0
        ? Effect.void
        : sql`insert into readiness_checks ${sql.insert(
            rows.map((check) => ({
              connector_id: connectorId,
              attempt_id: attemptId,
              check_name: check.check_name,
              table_path: check.table_path,
              status: check.status,
              message: check.message,
              pod_name: instance
            }))
          )}`.pipe(Effect.asVoid, Effect.orDie)

    return { checks, attempts, record } as const
  })
}) {}
