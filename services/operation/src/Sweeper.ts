import { Duration, Effect, Layer, Schedule } from "effect"
import { OperationConfig } from "./config.js"
import { OperationChanges } from "./OperationChanges.js"
import { OperationsRepo } from "./OperationsRepo.js"

export const staleMessage = (deadlineSeconds: number) => `worker stopped heartbeating: no report for more than ${deadlineSeconds} seconds`

/** One pass: fails the running operations whose worker went silent and announces each. */
export const sweepOnce = Effect.gen(function* () {
  const repo = yield* OperationsRepo
  const changes = yield* OperationChanges
  const { heartbeatDeadlineSeconds } = yield* OperationConfig
  const failed = yield* repo.failStale(heartbeatDeadlineSeconds, staleMessage(heartbeatDeadlineSeconds))
  yield* Effect.forEach(failed, changes.publish, { discard: true })
  const ids = failed.map((operation) => operation.id)
  if (ids.length > 0) yield* Effect.logWarning("failed operations whose worker stopped heartbeating").pipe(Effect.annotateLogs({ operations: ids.join(",") }))
  return ids
}).pipe(Effect.withSpan("Sweeper.sweepOnce"))

/**
 * A background fiber for the lifetime of the layer, every OPERATION_SWEEP_INTERVAL_SECONDS. Every
 * replica runs one; the single conditional UPDATE makes concurrent sweeps harmless.
 */
export const SweeperLive: Layer.Layer<never, never, OperationsRepo | OperationChanges | OperationConfig> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const { sweepIntervalSeconds } = yield* OperationConfig
    yield* sweepOnce.pipe(
      Effect.catchAllCause((cause) => Effect.logError("operation sweep failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(sweepIntervalSeconds * 1000))),
      Effect.forkScoped
    )
  })
)
