import { SqlClient } from "@effect/sql"
import { dieOnSqlError, type Principal } from "@scion/kit"
import { Effect } from "effect"
import { Connectors } from "../connectors/Connectors.js"

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


export const DEFAULT_CHECKS_LIMIT = 500
export const DEFAULT_ATTEMPTS_LIMIT = 50

/**
 * Reading the readiness evidence engine setup wrote (connectors.read; other orgs' connectors are
 * not found).
 */
export class Readiness extends Effect.Service<Readiness>()("@scion/connector/Readiness", {
  effect: Effect.gen(function* () {
    const connectors = yield* Connectors
    const sql = yield* SqlClient.SqlClient

    /**
     * Rows of the newest attempt first; within an attempt in the order they were written. Filters
     * by attempt and check name, only failed rows when asked; limit 1..5000, offset ≥ 0.
     */
    const checks = Effect.fn("Readiness.checks")(function* (
      principal: Principal,
      input: { readonly connectorId: string; readonly attemptId?: string | undefined; readonly checkName?: string | undefined; readonly onlyFailed: boolean; readonly limit: number; readonly offset: number }
    ) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.read")
      return yield* sql<ReadinessCheckRow>`
        select c.attempt_id, c.check_name, c.table_path, c.status, c.message, c.pod_name, c.checked_at
        from readiness_checks c
        join (select attempt_id, min(id) as first_id from readiness_checks where connector_id = ${connector.id} group by attempt_id) a on a.attempt_id = c.attempt_id
        where c.connector_id = ${connector.id}
          ${input.attemptId !== undefined ? sql`and c.attempt_id = ${input.attemptId}` : sql``}
          ${input.checkName !== undefined ? sql`and c.check_name = ${input.checkName}` : sql``}
          ${input.onlyFailed ? sql`and c.status = 'fail'` : sql``}
        order by a.first_id desc, c.id
        limit ${input.limit} offset ${input.offset}`
    }, dieOnSqlError)

    /** One summary per attempt, most recent first. */
    const attempts = Effect.fn("Readiness.attempts")(function* (principal: Principal, input: { readonly connectorId: string; readonly limit: number }) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.read")
      return yield* sql<ReadinessAttemptRow>`
        select attempt_id, count(*)::int as total_checks,
               count(*) filter (where status = 'pass')::int as passed_checks,
               count(*) filter (where status = 'fail')::int as failed_checks,
               max(checked_at) as latest_checked_at,
               (array_agg(pod_name order by id desc))[1] as pod_name
        from readiness_checks
        where connector_id = ${connector.id}
        group by attempt_id
        order by min(id) desc
        limit ${input.limit}`
    }, dieOnSqlError)

    return { checks, attempts } as const
  })
}) {}
