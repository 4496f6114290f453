import { SqlClient } from "@effect/sql"
import { dieOnSqlError, type Principal } from "@scion/kit"
import { Effect } from "effect"
import { Connectors } from "../connectors/Connectors.js"
import { QuarantineEntryNotFound } from "../domain/errors.js"

export interface QuarantineEntryRow {
  readonly id: string
  readonly connector_id: string
  readonly status: "quarantined" | "released"
  readonly reason: string
  readonly detail: string
  readonly quarantined_at: Date
  readonly released_at: Date | null
}

/**
 * The quarantine entries the monitor (QuarantineMonitor.ts) keeps: listed with connectors.read,
 * released with connectors.update; other orgs' connectors are not found.
 */
export class Quarantine extends Effect.Service<Quarantine>()("@scion/connector/Quarantine", {
  effect: Effect.gen(function* () {
    const connectors = yield* Connectors
    const sql = yield* SqlClient.SqlClient

    /** The connector's entries with status quarantined (released ones are not listed). */
    const list = Effect.fn("Quarantine.list")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.read")
      return yield* sql<QuarantineEntryRow>`
        select id, connector_id, status, reason, detail, quarantined_at, released_at
        from quarantine_entries where connector_id = ${connector.id} and status = 'quarantined'
        order by quarantined_at, id`
    }, dieOnSqlError)

    /**
     * Releases an entry (connectors.update): quarantined → released, and released again is the
     * same answer. The monitor then restores the pipeline and deletes the row; a row already
     * deleted is not found.
     */
    const release = Effect.fn("Quarantine.release")(function* (principal: Principal, input: { readonly connectorId: string; readonly quarantineId: string }) {
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
    }, dieOnSqlError)

    return { list, release } as const
  })
}) {}
