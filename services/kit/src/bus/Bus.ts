import { Cause, Context, Duration, Effect, Option, Schema, Tracer } from "effect"
import type { Scope } from "effect"

/**
 * The persistent messaging port: JetStream in production (`NatsBus`), an in-process twin in the
 * embedded mode (`InMemoryBus`). Both pass the same contract suite (services/kit/test).
 *
 * Streams (names are logical; an adapter may namespace them, tests do):
 * - `JOBS`   subjects `jobs.>`   work-queue retention: a message goes to exactly one consumer and
 *            is removed when acked. Durables on JOBS must filter disjoint subjects
 *            (`jobs.<unit>.>`), the server rejects overlapping ones.
 * - `EVENTS` subjects `events.>` limits retention (7 days): every durable sees every event.
 * - `DLQ`    subjects `dlq.>`    limits retention (14 days): dead letters, republished as
 *            `dlq.<original subject>`.
 * All three: file storage, duplicate window 2 minutes (`Nats-Msg-Id`).
 */
export type StreamName = "JOBS" | "EVENTS" | "DLQ"

export interface StreamSpec {
  readonly name: StreamName
  readonly subjects: string
  readonly retention: "workqueue" | "limits"
  readonly maxAge: Duration.Duration
}

export const DUPLICATE_WINDOW: Duration.Duration = Duration.minutes(2)

export const STREAMS: ReadonlyArray<StreamSpec> = [
  { name: "JOBS", subjects: "jobs.>", retention: "workqueue", maxAge: Duration.days(7) },
  { name: "EVENTS", subjects: "events.>", retention: "limits", maxAge: Duration.days(7) },
  { name: "DLQ", subjects: "dlq.>", retention: "limits", maxAge: Duration.days(14) }
]

/** The stream whose subjects cover a (logical) subject. */
export const streamOf = (subject: string): StreamSpec | undefined => STREAMS.find((s) => subjectMatches(s.subjects, subject))

/** Headers the bus sets or reads itself. */
export const BusHeaders = {
  msgId: "Nats-Msg-Id",
  traceparent: "traceparent",
  deadLetterReason: "Scion-Dead-Letter-Reason",
  originalSubject: "Scion-Original-Subject",
  deliveryCount: "Scion-Delivery-Count"
} as const

export class BusError extends Schema.TaggedError<BusError>()("BusError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

export interface PublishInput {
  readonly subject: string
  /** Anything JSON.stringify accepts. */
  readonly payload: unknown
  /** Becomes `Nats-Msg-Id`: a second publish with the same id inside the window is dropped. */
  readonly msgId?: string
  readonly headers?: Readonly<Record<string, string>>
}

export interface PublishAck {
  readonly stream: string
  readonly seq: number
  /** True when the stream already had this msgId within its duplicate window. */
  readonly duplicate: boolean
}

export interface Delivery {
  readonly subject: string
  readonly payload: unknown
  readonly headers: Readonly<Record<string, string>>
  /** 1 on the first delivery. */
  readonly deliveryCount: number
  readonly msgId: string | undefined
  /** In-progress acknowledgement: restarts the ack-wait clock. Long handlers call it regularly. */
  readonly working: Effect.Effect<void>
}

export interface ConsumeOptions<R = never> {
  readonly stream: StreamName
  readonly durable: string
  /** On JOBS, disjoint from every other durable's (`jobs.<unit>.>`). NATS 2.9 accepts one. */
  readonly filterSubjects: ReadonlyArray<string>
  /** Attempts before a message is dead-lettered (default 5). */
  readonly maxDeliver?: number
  /** Delay before attempt n+1 after attempt n failed: backoff[n-1], the last repeats (default 1s, 5s, 30s). */
  readonly backoff?: ReadonlyArray<Duration.DurationInput>
  /** Redelivery when neither acked nor `working` for this long (default 30 s). */
  readonly ackWait?: Duration.DurationInput
  /** Where a new durable starts (default "all": everything the stream still holds). */
  readonly deliverPolicy?: "all" | "new"
  /**
   * NATS removes the durable after this long without a consumer (ad-hoc watchers, tests); default
   * never. The in-memory adapter keeps it for the life of the bus.
   */
  readonly inactiveThreshold?: Duration.DurationInput
  /** Handlers running at once in this consumer (default 1). */
  readonly concurrency?: number
  /** Called once a message has failed maxDeliver times, before it is terminated. */
  readonly onDeadLetter?: (delivery: Delivery, cause: Cause.Cause<unknown>) => Effect.Effect<void, never, R>
}

/** A message as a listener hears it: no acknowledgement, no redelivery. */
export interface Heard {
  readonly subject: string
  readonly payload: unknown
}

export interface BusShape {
  readonly publish: (input: PublishInput) => Effect.Effect<PublishAck, BusError>
  /**
   * Hears every message published from now on whose subject matches `filter`, in this process,
   * for the life of the scope: nothing durable, every listener of every process hears each message
   * (what cache invalidation needs, where a durable consumer would reach one replica). Messages
   * published while the listener was not subscribed are lost, so `onGap` runs whenever that may
   * have happened: when the subscription starts and after every reconnect. Never fails: while the
   * bus is unreachable the listener keeps trying in the background.
   */
  readonly listen: (filter: string, onMessage: (heard: Heard) => Effect.Effect<void>, onGap: Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Ensures the durable consumer, then consumes in a fiber of the current scope until the scope
   * closes. Handler success acks; a failure or defect naks with the backoff delay, or on the last
   * attempt dead-letters (DLQ + onDeadLetter) and terminates the message.
   */
  readonly consume: <E, R>(
    options: ConsumeOptions<R>,
    handler: (delivery: Delivery) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, BusError, Scope.Scope | R>
}

export class Bus extends Context.Tag("@scion/kit/Bus")<Bus, BusShape>() {}

// ---- helpers shared by the adapters ----

/** NATS subject matching: `*` one token, `>` one or more trailing tokens. */
export const subjectMatches = (filter: string, subject: string): boolean => {
  const f = filter.split(".")
  const s = subject.split(".")
  for (let i = 0; i < f.length; i++) {
    const token = f[i]
    if (token === ">") return s.length > i
    if (i >= s.length) return false
    if (token !== "*" && token !== s[i]) return false
  }
  return f.length === s.length
}

/** Whether some subject matches both filters (work-queue streams forbid overlapping consumers). */
export const filtersOverlap = (a: string, b: string): boolean => {
  const x = a.split(".")
  const y = b.split(".")
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i]
    const q = y[i]
    if (p === ">" || q === ">") return p !== undefined && q !== undefined
    if (p === undefined || q === undefined) return false
    if (p !== "*" && q !== "*" && p !== q) return false
  }
  return true
}

export const consumeDefaults = {
  maxDeliver: 5,
  backoff: [Duration.seconds(1), Duration.seconds(5), Duration.seconds(30)] as ReadonlyArray<Duration.DurationInput>,
  ackWait: Duration.seconds(30)
}

/** The delay before the next attempt after attempt `deliveryCount` failed. */
export const backoffDelay = (backoff: ReadonlyArray<Duration.DurationInput>, deliveryCount: number): Duration.Duration => {
  if (backoff.length === 0) return Duration.zero
  const input = backoff[Math.min(Math.max(deliveryCount, 1), backoff.length) - 1]
  return input === undefined ? Duration.zero : Duration.decode(input)
}

/**
 * `traceparent` of the current span, if any (W3C trace context, version 00). Read from the context
 * rather than with `Effect.currentSpan`, which without a span fails with a new
 * NoSuchElementException, stack trace and all: on every RPC a unit makes (2% of the gateway's CPU).
 */
export const currentTraceparent: Effect.Effect<Option.Option<string>> = Effect.map(Effect.serviceOption(Tracer.ParentSpan), (span) =>
  // Only a span a real tracer records has W3C ids (with tracing off, spans are no-ops).
  Option.flatMap(span, (s) =>
    s._tag === "Span" && /^[0-9a-f]{32}$/.test(s.traceId) && /^[0-9a-f]{16}$/.test(s.spanId) ? Option.some(`00-${s.traceId}-${s.spanId}-${s.sampled ? "01" : "00"}`) : Option.none()
  )
)

export const parseTraceparent = (value: string | undefined): Option.Option<Tracer.ExternalSpan> => {
  const match = value?.trim().match(/^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/)
  if (!match || match[2] === "0".repeat(32) || match[3] === "0".repeat(16)) return Option.none()
  return Option.some(Tracer.externalSpan({ traceId: match[2]!, spanId: match[3]!, sampled: (parseInt(match[4]!, 16) & 1) === 1 }))
}

/** Runs a handler inside a consumer span whose parent is the message's trace context. */
export const withConsumerSpan = <A, E, R>(delivery: Delivery, stream: string, durable: string, effect: Effect.Effect<A, E, R>) => {
  const parent = parseTraceparent(delivery.headers[BusHeaders.traceparent])
  return Effect.withSpan(effect, `bus.consume ${delivery.subject}`, {
    kind: "consumer",
    attributes: {
      "messaging.system": "nats",
      "messaging.destination.name": delivery.subject,
      "messaging.consumer.group.name": durable,
      "scion.stream": stream,
      "messaging.message.id": delivery.msgId ?? "",
      "scion.delivery_count": delivery.deliveryCount
    },
    ...(Option.isSome(parent) ? { parent: parent.value } : {})
  })
}

/** What a consumer does after the handler ran. */
export type Outcome =
  | { readonly _tag: "Ack" }
  | { readonly _tag: "Nak"; readonly delay: Duration.Duration }
  | { readonly _tag: "DeadLetter"; readonly cause: Cause.Cause<unknown> }

export const outcomeOf = (
  exit: { readonly _tag: "Success" } | { readonly _tag: "Failure"; readonly cause: Cause.Cause<unknown> },
  deliveryCount: number,
  maxDeliver: number,
  backoff: ReadonlyArray<Duration.DurationInput>
): Outcome => {
  if (exit._tag === "Success") return { _tag: "Ack" }
  if (deliveryCount >= maxDeliver) return { _tag: "DeadLetter", cause: exit.cause }
  return { _tag: "Nak", delay: backoffDelay(backoff, deliveryCount) }
}

/** The DLQ copy of a dead message. */
export const deadLetterInput = (delivery: Delivery, cause: Cause.Cause<unknown>): PublishInput => ({
  subject: `dlq.${delivery.subject}`,
  payload: delivery.payload,
  ...(delivery.msgId !== undefined ? { msgId: `dlq.${delivery.msgId}` } : {}),
  headers: {
    ...Object.fromEntries(Object.entries(delivery.headers).filter(([k]) => k !== BusHeaders.msgId)),
    [BusHeaders.originalSubject]: delivery.subject,
    [BusHeaders.deliveryCount]: String(delivery.deliveryCount),
    [BusHeaders.deadLetterReason]: Cause.pretty(cause).slice(0, 2000).replace(/[\r\n]+/g, " | ")
  }
})

/**
 * The shared dead-letter step: DLQ copy (best effort, logged), then the consumer's callback. Both
 * run before the message is terminated, so a crash in between repeats them (at least once).
 */
export const deadLetter = <R>(
  publish: BusShape["publish"],
  options: ConsumeOptions<R>,
  delivery: Delivery,
  cause: Cause.Cause<unknown>
): Effect.Effect<void, never, R> =>
  Effect.gen(function* () {
    yield* Effect.logWarning("bus: message dead-lettered").pipe(
      Effect.annotateLogs({ subject: delivery.subject, msgId: delivery.msgId ?? "", deliveries: delivery.deliveryCount, durable: options.durable }),
      Effect.annotateLogs("cause", Cause.pretty(cause))
    )
    yield* publish(deadLetterInput(delivery, cause)).pipe(
      Effect.catchAllCause((c) => Effect.logError("bus: dead-letter copy not published", c))
    )
    if (options.onDeadLetter) {
      yield* options.onDeadLetter(delivery, cause).pipe(Effect.catchAllCause((c) => Effect.logError("bus: onDeadLetter failed", c)))
    }
  })

/**
 * Runs the handler for one delivery in its consumer span and settles the message: ack on success;
 * nak with the backoff delay on failure; dead letter + term on the last attempt (or when a message
 * comes back past maxDeliver because its handler never finished); nak at once if interrupted.
 */
export const handleDelivery = <E, R>(
  publish: BusShape["publish"],
  options: ConsumeOptions<R>,
  delivery: Delivery,
  handler: (delivery: Delivery) => Effect.Effect<void, E, R>,
  settle: {
    readonly ack: Effect.Effect<void>
    readonly nak: (delay: Duration.Duration) => Effect.Effect<void>
    readonly term: (reason: string) => Effect.Effect<void>
  }
): Effect.Effect<void, never, R> =>
  Effect.gen(function* () {
    const maxDeliver = options.maxDeliver ?? consumeDefaults.maxDeliver
    if (delivery.deliveryCount > maxDeliver) {
      yield* deadLetter(publish, options, delivery, Cause.die(new Error(`no outcome after ${maxDeliver} deliveries (the handler never finished)`)))
      yield* settle.term("max deliveries")
      return
    }
    const exit = yield* withConsumerSpan(delivery, options.stream, options.durable, handler(delivery)).pipe(
      Effect.onInterrupt(() => settle.nak(Duration.zero)),
      Effect.exit
    )
    const outcome = outcomeOf(exit._tag === "Success" ? { _tag: "Success" } : { _tag: "Failure", cause: exit.cause }, delivery.deliveryCount, maxDeliver, options.backoff ?? consumeDefaults.backoff)
    switch (outcome._tag) {
      case "Ack":
        return yield* settle.ack
      case "Nak":
        if (exit._tag === "Failure") {
          yield* Effect.logWarning(`bus: handler failed for ${delivery.subject} (attempt ${delivery.deliveryCount}/${maxDeliver})`, exit.cause)
        }
        return yield* settle.nak(outcome.delay)
      case "DeadLetter":
        yield* deadLetter(publish, options, delivery, outcome.cause)
        return yield* settle.term("dead-lettered")
    }
  })
