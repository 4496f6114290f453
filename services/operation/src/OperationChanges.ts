import { connect, type NatsConnection } from "nats"
import { Config, Context, Effect, Layer, Queue, Schedule, type Scope } from "effect"

/** The core NATS subject a committed change of an operation is announced on. */
export const changedSubject = (operationId: string) => `ops.changed.${operationId}`

/** Wake-ups since one subscription began; several changes before a wait collapse into one. */
export interface ChangeSubscription {
  /** Waits for the next change announced after the subscription began (or after the last wait). */
  readonly next: Effect.Effect<void>
}

/**
 * Announces that an operation changed, so a long-polling GetOperation on any replica re-reads
 * it. Announcements carry no data and may be lost or duplicated: waiters always re-read the row,
 * and a wait ends by its deadline anyway.
 */
export class OperationChanges extends Context.Tag("@scion/operation/OperationChanges")<
  OperationChanges,
  {
    /** Best effort; call after the change committed. Never fails. */
    readonly publish: (operationId: string) => Effect.Effect<void>
    /** Registered when this returns, so a change committed afterwards is never missed. */
    readonly subscribe: (operationId: string) => Effect.Effect<ChangeSubscription, never, Scope.Scope>
  }
>() {
  /** One process (embedded mode, tests): changes are announced to waiters in memory. */
  static readonly inMemory: Layer.Layer<OperationChanges> = Layer.sync(OperationChanges, () => {
    const waiters = new Map<string, Set<Queue.Queue<void>>>()
    return OperationChanges.of({
      publish: (operationId) =>
        Effect.sync(() => {
          for (const queue of waiters.get(operationId) ?? []) queue.unsafeOffer(undefined)
        }),
      subscribe: (operationId) =>
        Effect.acquireRelease(
          Effect.map(Queue.sliding<void>(1), (queue) => {
            const set = waiters.get(operationId) ?? new Set()
            set.add(queue)
            waiters.set(operationId, set)
            return queue
          }),
          (queue) =>
            Effect.sync(() => {
              const set = waiters.get(operationId)
              set?.delete(queue)
              if (set?.size === 0) waiters.delete(operationId)
            }).pipe(Effect.zipRight(Queue.shutdown(queue)))
        ).pipe(Effect.map((queue) => ({ next: Queue.take(queue) })))
    })
  })

  /** Core NATS (NATS_URL, default nats://127.0.0.1:4222): every replica hears every replica. */
  static readonly nats: Layer.Layer<OperationChanges> = Layer.scoped(
    OperationChanges,
    Effect.gen(function* () {
      const url = yield* Config.string("NATS_URL").pipe(Config.withDefault("nats://127.0.0.1:4222"))
      const nc: NatsConnection = yield* Effect.acquireRelease(
        Effect.tryPromise(() => connect({ servers: url, name: "scion-operation", maxReconnectAttempts: -1, reconnectTimeWait: 500 })).pipe(
          Effect.tapError((error) => Effect.logWarning("connecting to NATS failed; retrying", error)),
          Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")), Schedule.upTo("60 seconds")))
        ),
        (nc) => Effect.promise(() => nc.drain().catch(() => nc.close()))
      )
      yield* Effect.logInfo("connected to NATS").pipe(Effect.annotateLogs({ url }))
      return OperationChanges.of({
        publish: (operationId) =>
          Effect.try(() => nc.publish(changedSubject(operationId))).pipe(
            Effect.catchAll((error) => Effect.logWarning("announcing an operation change failed", error).pipe(Effect.annotateLogs({ operationId })))
          ),
        subscribe: (operationId) =>
          Effect.gen(function* () {
            const queue = yield* Queue.sliding<void>(1)
            yield* Effect.acquireRelease(
              Effect.sync(() => nc.subscribe(changedSubject(operationId), { callback: (error) => (error ? undefined : queue.unsafeOffer(undefined)) })),
              (subscription) => Effect.sync(() => subscription.unsubscribe()).pipe(Effect.zipRight(Queue.shutdown(queue)))
            )
            // The SUB reaches the server before this returns (PING/PONG round trip), so a change
            // another replica commits after our read is always heard.
            yield* Effect.tryPromise(() => nc.flush()).pipe(
              Effect.timeout("2 seconds"),
              Effect.catchAll(() => Effect.logWarning("NATS flush after subscribe timed out"))
            )
            return { next: Queue.take(queue) }
          })
      })
    }).pipe(Effect.orDie)
  )
}
