import { connect, type NatsConnection } from "nats"
import { Config, Context, Deferred, Effect, Exit, Layer, Option, Schedule, Schema, type Scope } from "effect"
import { busNamespace, namespacedSubject, withoutCredentials } from "@scion/kit"
import { OPERATION_STATUSES, OPERATION_TYPES, type Operation } from "./domain/models.js"

/** The core NATS subject a committed change of an operation is announced on (before BUS_NAMESPACE). */
export const changedSubject = (operationId: string) => `ops.changed.${operationId}`

/** Changes since one subscription began; the newest wins when several arrive before a wait. */
export interface ChangeSubscription {
  /** The operation as the next change announced after the subscription began wrote it. */
  readonly next: Effect.Effect<Operation>
}

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The operation on the wire between replicas: JSON, dates as ISO strings. */
const CarriedOperation = Schema.Struct({
  id: Schema.String,
  orgId: Schema.String,
  type: Schema.Literal(...OPERATION_TYPES),
  resourceId: Schema.String,
  status: Schema.Literal(...OPERATION_STATUSES),
  stage: Schema.NullOr(Schema.String),
  stageLabel: Schema.NullOr(Schema.String),
  progress: Schema.NullOr(Schema.Number),
  result: Schema.NullOr(JsonObject),
  error: Schema.NullOr(Schema.String),
  setupStatus: Schema.NullOr(JsonObject),
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  startedAt: Schema.NullOr(Schema.Date),
  completedAt: Schema.NullOr(Schema.Date),
  heartbeatAt: Schema.Date,
  version: Schema.Number
})
const CarriedJson = Schema.parseJson(CarriedOperation)
/**
 * Our own row, typed: JSON.stringify writes what the schema's encoding would (dates as ISO strings)
 * at a fraction of its cost, paid on every report. What arrives from other replicas is decoded
 * through the schema.
 */
const encodeCarried = (operation: Operation): string => JSON.stringify(operation satisfies typeof CarriedOperation.Type)
const decodeCarried = Schema.decodeUnknownOption(CarriedJson)

/** One waiter's slot: the newest change it has not taken yet, and how to wake it. */
interface Mailbox {
  latest: Operation | undefined
  wake: Deferred.Deferred<void> | undefined
}

const take = (mailbox: Mailbox): Effect.Effect<Operation> =>
  Effect.suspend(() => {
    const latest = mailbox.latest
    if (latest !== undefined) {
      mailbox.latest = undefined
      return Effect.succeed(latest)
    }
    return Effect.flatMap(Deferred.make<void>(), (wake) => {
      mailbox.wake = wake
      return Effect.zipRight(Deferred.await(wake), take(mailbox))
    })
  })

/** The waiters of one process by operation id; a waiter sees the newest change since it last looked. */
const makeWaiters = () => {
  const waiters = new Map<string, Set<Mailbox>>()
  const deliver = (operation: Operation) => {
    for (const mailbox of waiters.get(operation.id) ?? []) {
      mailbox.latest = operation
      const wake = mailbox.wake
      mailbox.wake = undefined
      if (wake !== undefined) Deferred.unsafeDone(wake, Exit.void)
    }
  }
  const subscribe = (operationId: string): Effect.Effect<ChangeSubscription, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const mailbox: Mailbox = { latest: undefined, wake: undefined }
        const set = waiters.get(operationId) ?? new Set()
        set.add(mailbox)
        waiters.set(operationId, set)
        return mailbox
      }),
      (mailbox) =>
        Effect.sync(() => {
          const set = waiters.get(operationId)
          set?.delete(mailbox)
          if (set?.size === 0) waiters.delete(operationId)
        })
    ).pipe(Effect.map((mailbox) => ({ next: take(mailbox) })))
  return { deliver, subscribe }
}

/**
 * Announces that an operation changed, carrying the operation as written, so a long-polling
 * GetOperation on any replica answers without reading the row. Announcements may be lost or
 * arrive out of order: waiters keep the highest version, re-read the row when nothing came for
 * a while, and a wait ends by its deadline anyway.
 */
export class OperationChanges extends Context.Tag("@scion/operation/OperationChanges")<
  OperationChanges,
  {
    /** Best effort; call after the change committed. Never fails. */
    readonly publish: (operation: Operation) => Effect.Effect<void>
    /** Registered when this returns, so a change committed afterwards is never missed. */
    readonly subscribe: (operationId: string) => Effect.Effect<ChangeSubscription, never, Scope.Scope>
  }
>() {
  /** One process (embedded mode, tests): changes are handed to waiters in memory. */
  static readonly inMemory: Layer.Layer<OperationChanges> = Layer.sync(OperationChanges, () => {
    const waiters = makeWaiters()
    return OperationChanges.of({ publish: (operation) => Effect.sync(() => waiters.deliver(operation)), subscribe: waiters.subscribe })
  })

  /**
   * Core NATS (NATS_URL, default nats://127.0.0.1:4222): every replica hears every replica. One
   * subscription per process, made before the unit serves, fans changes out to its waiters in
   * memory, so a wait costs no subscription, no round trip to NATS and no read.
   */
  static readonly nats: Layer.Layer<OperationChanges> = Layer.scoped(
    OperationChanges,
    Effect.gen(function* () {
      const url = yield* Config.string("NATS_URL").pipe(Config.withDefault("nats://127.0.0.1:4222"))
      // One deployment's replicas hear each other, never another deployment's on the same NATS.
      const namespace = yield* busNamespace
      const subject = (operationId: string) => namespacedSubject(namespace, changedSubject(operationId))
      const nc: NatsConnection = yield* Effect.acquireRelease(
        Effect.tryPromise(() => connect({ servers: url, name: "scion-operation", maxReconnectAttempts: -1, reconnectTimeWait: 500, noEcho: true })).pipe(
          Effect.tapError((error) => Effect.logWarning("connecting to NATS failed; retrying", error)),
          Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))))
        ),
        (nc) => Effect.promise(() => nc.drain().catch(() => nc.close()))
      )
      const waiters = makeWaiters()
      const decoder = new TextDecoder()
      nc.subscribe(subject("*"), {
        callback: (error, msg) => {
          if (error) return
          Option.map(decodeCarried(decoder.decode(msg.data)), waiters.deliver)
        }
      })
      // The SUB reaches the server before the unit serves: no change announced after is missed.
      yield* Effect.tryPromise(() => nc.flush()).pipe(Effect.timeout("10 seconds"), Effect.orDie)
      yield* Effect.logInfo("connected to NATS").pipe(Effect.annotateLogs({ url: withoutCredentials(url) }))
      return OperationChanges.of({
        // This replica's waiters hear it at once, so NATS does not echo it back (noEcho): encoding
        // announcements through the schema and decoding their echo were ~5% of the unit's CPU.
        publish: (operation) =>
          Effect.try(() => {
            waiters.deliver(operation)
            nc.publish(subject(operation.id), encodeCarried(operation))
          }).pipe(
            Effect.catchAll((error) => Effect.logWarning("announcing an operation change failed", error).pipe(Effect.annotateLogs({ operationId: operation.id })))
          ),
        subscribe: waiters.subscribe
      })
    }).pipe(Effect.orDie)
  )
}
