import { Clock, Context, Effect, Layer, Option } from "effect"
import type { BranchingEngine } from "./Engines.js"

/** How long an accept's answer waits for its job; a job that starts later asks the connector. */
const KEPT_MILLIS = 5_000
/** At most this many answers waiting at once (oldest dropped first). */
const MAX_KEPT = 1_000

/**
 * The engine answer a create's accept acted on, kept for its job. The job usually starts in the
 * accepting process milliseconds after the commit (the relay hears the commit and JetStream hands
 * the job to this replica's worker), and asking the connector again cost it 6–13 ms of its path to
 * the copy under load (`bench:branch` traces). An answer is taken once and kept for a few seconds
 * only: a redelivered attempt, a job that starts late or one that runs in another replica asks
 * the connector anew.
 */
export class AcceptedEngines extends Context.Tag("@scion/branch/AcceptedEngines")<
  AcceptedEngines,
  {
    /** The answer the accept of `operationId` acted on. */
    readonly keep: (operationId: string, engine: BranchingEngine) => Effect.Effect<void>
    /** The answer kept for `operationId`, if it is still fresh; taken, so asked once. */
    readonly take: (operationId: string) => Effect.Effect<Option.Option<BranchingEngine>>
  }
>() {
  static readonly layer: Layer.Layer<AcceptedEngines> = Layer.sync(AcceptedEngines, () => {
    // Insertion order is age order: the oldest are at the front.
    const kept = new Map<string, { readonly engine: BranchingEngine; readonly at: number }>()
    const dropStale = (now: number) => {
      for (const [operationId, entry] of kept) {
        if (now - entry.at <= KEPT_MILLIS && kept.size <= MAX_KEPT) break
        kept.delete(operationId)
      }
    }
    return AcceptedEngines.of({
      keep: (operationId, engine) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          kept.set(operationId, { engine, at: now })
          dropStale(now)
        }),
      take: (operationId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const entry = kept.get(operationId)
          kept.delete(operationId)
          return entry !== undefined && now - entry.at <= KEPT_MILLIS ? Option.some(entry.engine) : Option.none()
        })
    })
  })
}
