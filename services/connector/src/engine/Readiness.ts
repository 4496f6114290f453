import { type Principal, tracedFn } from "@scion/kit"
import { Effect } from "effect"
import { Connectors } from "../connectors/Connectors.js"
import { ReadinessRepo } from "./ReadinessRepo.js"

export type { ReadinessAttemptRow, ReadinessCheckRow } from "./ReadinessRepo.js"

export const DEFAULT_CHECKS_LIMIT = 500
export const DEFAULT_ATTEMPTS_LIMIT = 50

/**
 * Reading the readiness evidence engine setup wrote (connectors.read; other orgs' connectors are
 * not found).
 */
export class Readiness extends Effect.Service<Readiness>()("@scion/connector/Readiness", {
  effect: Effect.gen(function* () {
    const connectors = yield* Connectors
    const readiness = yield* ReadinessRepo

    /**
     * Rows of the newest attempt first; within an attempt in the order they were written. Filters
     * by attempt and check name, only failed rows when asked; limit 1..5000, offset ≥ 0.
     */
    const checks = tracedFn("Readiness.checks")(function* (
      principal: Principal,
      input: { readonly connectorId: string; readonly attemptId?: string | undefined; readonly checkName?: string | undefined; readonly onlyFailed: boolean; readonly limit: number; readonly offset: number }
    ) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.read")
      return yield* readiness.checks({ ...input, connectorId: connector.id })
    })

    /** One summary per attempt, most recent first. */
    const attempts = tracedFn("Readiness.attempts")(function* (principal: Principal, input: { readonly connectorId: string; readonly limit: number }) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.read")
      return yield* readiness.attempts(connector.id, input.limit)
    })

    return { checks, attempts } as const
  })
}) {}
