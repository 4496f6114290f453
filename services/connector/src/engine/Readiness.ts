import { SqlClient } from "@effect/sql"
import type { Principal } from "@scion/kit"
import { Effect } from "effect"

/** The unit's own database failing is a defect (500), as in the repositories. */
const dieOnSql = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.catchIf(self, (e): e is Extract<E, { readonly _tag: "SqlError" }> => (e as { readonly _tag?: unknown })?._tag === "SqlError", (e) => Effect.die(e))
import { Connectors } from "../connectors/Connectors.js"
import { QuarantineEntryNotFound } from "../domain/errors.js"

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

export interface QuarantineEntryRow {
  readonly id: string
  readonly connector_id: string
  readonly status: "quarantined" | "released"
  readonly reason: string
  readonly detail: string
  readonly quarantined_at: Date
  readonly released_at: Date | null
}

export const DEFAULT_CHECKS_LIMIT = 500
export const DEFAULT_ATTEMPTS_LIMIT = 50

/**
 * Reading the readiness evidence engine setup wrote, and the quarantine entries the monitor
 * keeps. Reads need connectors.read, release connectors.update; other orgs' connectors are not
 * found.
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
    }, dieOnSql)

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
    }, dieOnSql)

    /** The connector's entries with status quarantined (released ones are not listed). */
    const quarantine = Effect.fn("Readiness.quarantine")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.read")
      return yield* sql<QuarantineEntryRow>`
        select id, connector_id, status, reason, detail, quarantined_at, released_at
        from quarantine_entries where connector_id = ${connector.id} and status = 'quarantined'
        order by quarantined_at, id`
    }, dieOnSql)

    /**
     * Releases an entry (connectors.update): quarantined → released, and released again is the
     * same answer. The monitor then restores the pipeline and deletes the row; a row already
     * deleted is not found.
     */
    const release = Effect.fn("Readiness.release")(function* (principal: Principal, input: { readonly connectorId: string; readonly quarantineId: string }) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.update")
      const releasedBy = principal.kind === "api_key" ? `api_key:${principal.apiKeyId}` : principal.kind === "user_session" ? `user:${principal.userId}` : "service"
      const [entry] = yield* sql<QuarantineEntryRow>`
        update quarantine_entries
        set status = 'released', released_at = coalesce(released_at, now()), released_by = coalesce(released_by, ${releasedBy})
        where id = ${input.quarantineId} and connector_id = ${connector.id}
        returning id, connector_id, status, reason, detail, quarantined_at, released_at`
      if (entry === undefined) return yield* new QuarantineEntryNotFound({ quarantineId: input.quarantineId })
      yield* Effect.logInfo("quarantine released").pipe(Effect.annotateLogs({ connector_id: connector.id, quarantine_id: entry.id }))
      return entry
    }, dieOnSql)

    return { checks, attempts, quarantine, release } as const
  })
}) {}
