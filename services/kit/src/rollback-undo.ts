import { Effect, Exit, FiberRef } from "effect"

/**
 * Undoing what a transaction's rollback leaves behind elsewhere. Units create an operation at the
 * operation unit inside the transaction that records the work (so racing requests start exactly
 * one); when that transaction then rolls back, nothing points at the operation, and it would stay
 * `pending` forever. A remote call made inside such a transaction registers how to undo itself
 * (`undoOnRollback`); the transaction runner (`compensatedTransaction`) runs those undos when the
 * transaction's own work failed, so its rollback is certain. A failure of the COMMIT itself is left
 * alone: the commit may have landed, and undoing then would strand work that was recorded.
 */
const pendingUndos = FiberRef.unsafeMake<Array<Effect.Effect<void>> | undefined>(undefined)

/** Registers `undo` with the enclosing compensated transaction (nothing outside one). */
export const undoOnRollback = (undo: Effect.Effect<void>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(pendingUndos), (undos) => (undos === undefined ? Effect.void : Effect.sync(() => void undos.push(undo))))

/**
 * Runs `effect` inside `transaction`; when the effect fails (or is interrupted) and the
 * transaction therefore rolls back, the undos it registered run in the background: the request
 * answers its failure at once, and a stuck peer delays nobody.
 */
export const compensatedTransaction = <A, E, R, E2, R2>(
  effect: Effect.Effect<A, E, R>,
  transaction: (work: Effect.Effect<A, E, R>) => Effect.Effect<A, E2, R2>
): Effect.Effect<A, E2, R2> =>
  Effect.flatMap(FiberRef.get(pendingUndos), (enclosing) => {
    const undos: Array<Effect.Effect<void>> = []
    let workFailed = false
    const work = effect.pipe(Effect.onExit((exit) => Effect.sync(() => void (workFailed = Exit.isFailure(exit)))))
    return transaction(work).pipe(
      Effect.locally(pendingUndos, undos),
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          // A nested transaction (a savepoint) that held: its calls are the enclosing one's to undo.
          return Effect.sync(() => void enclosing?.push(...undos))
        }
        return workFailed && undos.length > 0 ? Effect.asVoid(Effect.forkDaemon(Effect.all(undos, { concurrency: "unbounded", discard: true }))) : Effect.void
      })
    )
  })
