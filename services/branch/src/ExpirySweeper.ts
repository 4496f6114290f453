import { Config, Duration, Effect, Layer, Schedule } from "effect"
import { Branches } from "./Branches.js"

/**
 * Deletes expired branches every BRANCH_EXPIRY_SWEEP_INTERVAL (default 30 s) through a
 * branch_delete operation each, as the platform. Every replica sweeps; the row lock makes
 * concurrent sweeps start one delete per branch.
 */
export const ExpirySweeperLive: Layer.Layer<never, never, Branches> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const interval = yield* Config.duration("BRANCH_EXPIRY_SWEEP_INTERVAL").pipe(Config.withDefault(Duration.seconds(30)), Effect.orDie)
    const branches = yield* Branches
    yield* branches.deleteExpired.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("the expiry sweep failed; trying again next round", cause)),
      Effect.repeat(Schedule.spaced(interval)),
      Effect.forkScoped
    )
  })
)
