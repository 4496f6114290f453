import { type Principal, tracedFn } from "@scion/kit"
import { Effect, Option } from "effect"
import { Connectors } from "../connectors/Connectors.js"
import { QuarantineEntryNotFound } from "../domain/errors.js"
import { QuarantineRepo } from "./QuarantineRepo.js"

export type { QuarantineEntryRow } from "./QuarantineRepo.js"

/**
 * The quarantine entries the monitor (QuarantineMonitor.ts) keeps: listed with connectors.read,
 * released with connectors.update; other orgs' connectors are not found.
 */
export class Quarantine extends Effect.Service<Quarantine>()("@scion/connector/Quarantine", {
  effect: Effect.gen(function* () {
    const connectors = yield* Connectors
    const quarantines = yield* QuarantineRepo

    /** The connector's entries with status quarantined (released ones are not listed). */
    const list = tracedFn("Quarantine.list")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.read")
      return yield* quarantines.listQuarantined(connector.id)
    })

    /**
     * Releases an entry (connectors.update): quarantined → released, and released again is the
     * same answer. The monitor then restores the pipeline and deletes the row; a row already
     * deleted is not found.
     */
    const release = tracedFn("Quarantine.release")(function* (principal: Principal, input: { readonly connectorId: string; readonly quarantineId: string }) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.update")
      const releasedBy = principal.kind === "api_key" ? `api_key:${principal.apiKeyId}` : principal.kind === "user_session" ? `user:${principal.userId}` : "service"
      const released = yield* quarantines.release(connector.id, input.quarantineId, releasedBy)
      if (Option.isNone(released)) return yield* new QuarantineEntryNotFound({ quarantineId: input.quarantineId })
      const entry = released.value
      yield* Effect.logInfo("quarantine released").pipe(Effect.annotateLogs({ connector_id: connector.id, quarantine_id: entry.id }))
      return entry
    })

    return { list, release } as const
  })
}) {}
