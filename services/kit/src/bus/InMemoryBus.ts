import { tracedFn } from "../tracing.js"
import { Clock, Deferred, Duration, Effect, Exit, FiberId, Layer, Option } from "effect"
import {
  Bus,
  BusError,
  type BusShape,
  type ConsumeOptions,
  currentTraceparent,
  consumeDefaults,
  type Delivery,
  DUPLICATE_WINDOW,
  type Heard,
  filtersOverlap,
  handleDelivery,
  BusHeaders,
  type PublishInput,
  STREAMS,
  type StreamName,
  type StreamSpec,
  streamOf,
  subjectMatches
} from "./Bus.js"

/**
 * `Bus` inside one process, for the embedded mode: the same streams and semantics as JetStream
 * (msgId de-duplication within the window, work-queue delivery to one consumer and removal on ack,
 * events to every durable, ack wait, in-progress acks, nak with backoff, maxDeliver and dead
 * letters), nothing persisted: messages live as long as the layer.
 */

interface Stored {
  readonly seq: number
  readonly subject: string
  readonly payload: unknown
  readonly headers: Readonly<Record<string, string>>
  readonly msgId: string | undefined
  readonly at: number
}

interface Entry {
  readonly message: Stored
  deliveryCount: number
  availableAt: number
  inFlight: boolean
  deadline: number
  token: number
}

interface StreamState {
  readonly spec: StreamSpec
  messages: Map<number, Stored>
  readonly dedup: Map<string, { seq: number; at: number }>
}

interface ConsumerState {
  readonly stream: StreamState
  readonly durable: string
  filters: ReadonlyArray<string>
  ackWait: number
  maxDeliver: number
  readonly pending: Map<number, Entry>
  signal: Deferred.Deferred<void>
}

const ms = (d: Duration.DurationInput) => Duration.toMillis(Duration.decode(d))
const newSignal = () => Deferred.unsafeMake<void>(FiberId.none)
/** The longest a waiting consumer sleeps before looking again (timers: ack wait, nak delay). */
const POLL = 25
/** Messages a limits stream keeps in memory (the embedded mode has no disk behind it). */
const MAX_MESSAGES = 100_000

export const makeInMemoryBus = Effect.gen(function* () {
  let seq = 0
  let tokens = 0
  const streams = new Map<StreamName, StreamState>(STREAMS.map((spec) => [spec.name, { spec, messages: new Map(), dedup: new Map() }]))
  const consumers = new Map<string, ConsumerState>()
  const listeners = new Set<{ readonly filter: string; readonly onMessage: (heard: Heard) => Effect.Effect<void> }>()

  const wake = (consumer: ConsumerState) => {
    const previous = consumer.signal
    consumer.signal = newSignal()
    Deferred.unsafeDone(previous, Exit.void)
  }
  const matches = (consumer: ConsumerState, subject: string) => consumer.filters.some((f) => subjectMatches(f, subject))

  const publish: BusShape["publish"] = tracedFn("Bus.publish")(function* (input: PublishInput) {
    const spec = streamOf(input.subject)
    const stream = spec ? streams.get(spec.name) : undefined
    if (!spec || !stream) return yield* new BusError({ operation: `publish ${input.subject}`, message: "no stream covers this subject" })
    const payload = yield* Effect.try({
      try: () => JSON.parse(JSON.stringify(input.payload ?? null)) as unknown,
      catch: (cause) => new BusError({ operation: "encode", message: String(cause), cause })
    })
    const now = yield* Clock.currentTimeMillis
    const window = Duration.toMillis(DUPLICATE_WINDOW)
    for (const [id, seen] of stream.dedup) if (seen.at < now - window) stream.dedup.delete(id)
    if (input.msgId !== undefined) {
      const seen = stream.dedup.get(input.msgId)
      if (seen) return { stream: spec.name, seq: seen.seq, duplicate: true }
    }
    const headers: Record<string, string> = { ...input.headers }
    const traceparent = yield* currentTraceparent
    if (Option.isSome(traceparent) && headers[BusHeaders.traceparent] === undefined) headers[BusHeaders.traceparent] = traceparent.value
    if (input.msgId !== undefined) headers[BusHeaders.msgId] = input.msgId
    const message: Stored = { seq: ++seq, subject: input.subject, payload, headers, msgId: input.msgId, at: now }
    if (spec.retention === "limits") {
      const maxAge = Duration.toMillis(spec.maxAge)
      for (const [s, m] of stream.messages) if (m.at < now - maxAge) stream.messages.delete(s)
      // Bounded like a limits stream with max_msgs: the oldest go first.
      for (const s of stream.messages.keys()) {
        if (stream.messages.size < MAX_MESSAGES) break
        stream.messages.delete(s)
      }
    }
    stream.messages.set(message.seq, message)
    if (input.msgId !== undefined) stream.dedup.set(input.msgId, { seq: message.seq, at: now })
    for (const listener of listeners) if (subjectMatches(listener.filter, message.subject)) yield* listener.onMessage({ subject: message.subject, payload })
    for (const consumer of consumers.values()) {
      if (consumer.stream !== stream || !matches(consumer, message.subject)) continue
      consumer.pending.set(message.seq, { message, deliveryCount: 0, availableAt: now, inFlight: false, deadline: 0, token: 0 })
      wake(consumer)
    }
    return { stream: spec.name, seq: message.seq, duplicate: false }
  })

  const ensureConsumer = (options: ConsumeOptions<any>) =>
    Effect.gen(function* () {
      const stream = streams.get(options.stream)!
      const key = `${options.stream}/${options.durable}`
      const ackWait = ms(options.ackWait ?? consumeDefaults.ackWait)
      const maxDeliver = (options.maxDeliver ?? consumeDefaults.maxDeliver) + 1
      if (stream.spec.retention === "workqueue") {
        for (const other of consumers.values()) {
          if (other.stream !== stream || other.durable === options.durable) continue
          if (other.filters.some((a) => options.filterSubjects.some((b) => filtersOverlap(a, b)))) {
            return yield* new BusError({ operation: `consumers.add ${key}`, message: "filtered consumer not unique on workqueue stream" })
          }
        }
      }
      const existing = consumers.get(key)
      if (existing) {
        existing.filters = options.filterSubjects
        existing.ackWait = ackWait
        existing.maxDeliver = maxDeliver
        return existing
      }
      const now = yield* Clock.currentTimeMillis
      const consumer: ConsumerState = { stream, durable: options.durable, filters: options.filterSubjects, ackWait, maxDeliver, pending: new Map(), signal: newSignal() }
      if (options.deliverPolicy !== "new") {
        for (const message of stream.messages.values()) {
          if (matches(consumer, message.subject)) consumer.pending.set(message.seq, { message, deliveryCount: 0, availableAt: now, inFlight: false, deadline: 0, token: 0 })
        }
      }
      consumers.set(key, consumer)
      return consumer
    })

  /** The next deliverable entry of the consumer, waiting for one. */
  const next = (consumer: ConsumerState): Effect.Effect<Entry> =>
    Effect.gen(function* () {
      while (true) {
        const now = yield* Clock.currentTimeMillis
        let found: Entry | undefined
        let wait = POLL
        for (const entry of consumer.pending.values()) {
          if (entry.inFlight && entry.deadline <= now) entry.inFlight = false // ack wait expired: redeliver
          if (entry.inFlight) {
            wait = Math.min(wait, entry.deadline - now)
          } else if (entry.availableAt <= now) {
            if (entry.deliveryCount >= consumer.maxDeliver) {
              consumer.pending.delete(entry.message.seq) // as the server: no delivery past max_deliver
              continue
            }
            if (!found || entry.message.seq < found.message.seq) found = entry
          } else {
            wait = Math.min(wait, entry.availableAt - now)
          }
        }
        if (found) {
          found.inFlight = true
          found.deliveryCount += 1
          found.deadline = now + consumer.ackWait
          found.token = ++tokens
          return found
        }
        yield* Deferred.await(consumer.signal).pipe(Effect.timeout(Math.max(1, wait)), Effect.ignore)
      }
    })

  const consume: BusShape["consume"] = (options, handler) =>
    Effect.gen(function* () {
      const consumer = yield* ensureConsumer(options)
      const handle = (entry: Entry) => {
        const token = entry.token
        const current = () => consumer.pending.get(entry.message.seq) === entry && entry.token === token
        const remove = () => {
          if (!current()) return
          consumer.pending.delete(entry.message.seq)
          if (consumer.stream.spec.retention === "workqueue") consumer.stream.messages.delete(entry.message.seq)
        }
        const delivery: Delivery = {
          subject: entry.message.subject,
          payload: entry.message.payload,
          headers: entry.message.headers,
          deliveryCount: entry.deliveryCount,
          msgId: entry.message.msgId,
          working: Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              if (current()) entry.deadline = now + consumer.ackWait
            })
          )
        }
        return handleDelivery(publish, options, delivery, handler, {
          ack: Effect.sync(remove),
          term: () => Effect.sync(remove),
          nak: (delay) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Effect.sync(() => {
                if (!current()) return
                entry.inFlight = false
                entry.availableAt = now + Duration.toMillis(delay)
                wake(consumer)
              })
            )
        })
      }
      const worker = Effect.forever(Effect.flatMap(next(consumer), handle))
      yield* Effect.forkScoped(Effect.all(Array.from({ length: Math.max(1, options.concurrency ?? 1) }, () => worker), { concurrency: "unbounded", discard: true }))
    }).pipe(Effect.withSpan("Bus.consume.start", { attributes: { stream: options.stream, durable: options.durable } }))

  // In one process nothing is ever missed: the gap is only the one before subscribing.
  const listen: BusShape["listen"] = (filter, onMessage, onGap) =>
    Effect.acquireRelease(
      Effect.zipRight(
        onGap,
        Effect.sync(() => {
          const listener = { filter, onMessage }
          listeners.add(listener)
          return listener
        })
      ),
      (listener) => Effect.sync(() => listeners.delete(listener))
    ).pipe(Effect.asVoid)

  return Bus.of({ publish, consume, listen })
})

export const InMemoryBus = {
  layer: Layer.effect(Bus, makeInMemoryBus),
  make: makeInMemoryBus
}
