import { tracedFn } from "../tracing.js"
import { Config, Deferred, Duration, Effect, Layer, Option, Queue, Runtime, Schedule } from "effect"
import {
  AckPolicy,
  connect,
  Events,
  DeliverPolicy,
  DiscardPolicy,
  headers as natsHeaders,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  type StreamConfig
} from "nats"
import {
  Bus,
  BusError,
  type BusShape,
  type ConsumeOptions,
  currentTraceparent,
  consumeDefaults,
  type Delivery,
  DUPLICATE_WINDOW,
  handleDelivery,
  BusHeaders,
  type PublishInput,
  STREAMS,
  streamOf,
  type StreamName
} from "./Bus.js"

export interface NatsBusOptions {
  /**
   * Prefix for stream names (`<ns>_JOBS`) and subjects (`<ns>.jobs.…`), invisible to callers:
   * they publish and filter logical subjects. Tests use a fresh one per run; production none.
   */
  readonly namespace?: string
  /**
   * The streams the namespace applies to (default all). A unit whose own jobs are namespaced but
   * who reads other units' events names ["JOBS", "DLQ"]: EVENTS stays shared, on one connection.
   */
  readonly namespacedStreams?: ReadonlyArray<StreamName>
  /** How long a publish waits for the server's ack, or for the first connection (default 5 s). */
  readonly requestTimeout?: Duration.DurationInput
  /** Connection name shown by the server (default "scion"). */
  readonly name?: string
}

interface Connected {
  readonly nc: NatsConnection
  readonly js: JetStreamClient
  readonly jsm: JetStreamManager
}

const busError = (operation: string) => (cause: unknown) =>
  new BusError({ operation, message: cause instanceof Error ? cause.message : String(cause), cause })

const isNotFound = (error: unknown): boolean => {
  const e = error as { api_error?: { err_code?: number }; code?: string; message?: string }
  return e?.api_error?.err_code === 10059 || e?.api_error?.err_code === 10014 || e?.code === "404" || /not found/i.test(e?.message ?? "")
}

const ms = (d: Duration.DurationInput) => Duration.toMillis(Duration.decode(d))

/** JetStream adapter of `Bus`. */
export const makeNatsBus = (servers: string, options: NatsBusOptions = {}) =>
  Effect.gen(function* () {
    const ns = options.namespace
    const namespaced = (name: StreamName | undefined) => ns !== undefined && (options.namespacedStreams === undefined || (name !== undefined && options.namespacedStreams.includes(name)))
    const streamName = (name: StreamName) => (namespaced(name) ? `${ns}_${name}` : name)
    const physical = (subject: string) => (namespaced(streamOf(subject)?.name) ? `${ns}.${subject}` : subject)
    const logical = (subject: string) => (ns && subject.startsWith(`${ns}.`) ? subject.slice(ns.length + 1) : subject)
    const requestTimeout = ms(options.requestTimeout ?? Duration.seconds(5))

    const ensureStreams = (jsm: JetStreamManager) =>
      Effect.forEach(STREAMS, (spec) =>
        Effect.gen(function* () {
          const name = streamName(spec.name)
          const wanted: Partial<StreamConfig> = {
            name,
            subjects: [namespaced(spec.name) ? `${ns}.${spec.subjects}` : spec.subjects],
            retention: spec.retention === "workqueue" ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
            storage: StorageType.File,
            discard: DiscardPolicy.Old,
            max_age: nanos(Duration.toMillis(spec.maxAge)),
            duplicate_window: nanos(Duration.toMillis(DUPLICATE_WINDOW))
          }
          const existing = yield* Effect.tryPromise(() => jsm.streams.info(name)).pipe(
            Effect.map(Option.some),
            Effect.catchIf((e) => isNotFound(e.error), () => Effect.succeedNone),
            Effect.mapError((e) => busError("streams.info")(e.error))
          )
          if (Option.isNone(existing)) {
            yield* Effect.tryPromise({ try: () => jsm.streams.add(wanted), catch: busError(`streams.add ${name}`) })
            yield* Effect.logInfo(`bus: stream ${name} created`)
            return
          }
          const c = existing.value.config
          const same =
            c.subjects.length === 1 &&
            c.subjects[0] === wanted.subjects![0] &&
            c.max_age === wanted.max_age &&
            c.duplicate_window === wanted.duplicate_window &&
            c.storage === wanted.storage
          if (c.retention !== wanted.retention) {
            yield* Effect.logError(`bus: stream ${name} has retention ${c.retention}, expected ${wanted.retention}; the server cannot change it in place`)
          }
          if (!same) {
            const { storage: _storage, retention: _retention, ...updatable } = wanted
            yield* Effect.tryPromise({ try: () => jsm.streams.update(name, updatable), catch: busError(`streams.update ${name}`) })
            yield* Effect.logInfo(`bus: stream ${name} updated`)
          }
        })
      ).pipe(Effect.withSpan("NatsBus.ensureStreams"))

    // Connect (and create the streams) in the background: a unit starts even while NATS is down;
    // publish and consume wait for readiness up to requestTimeout and fail with BusError after.
    const ready = yield* Deferred.make<Connected>()
    const connectOnce = Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connect({ servers: servers.split(","), name: options.name ?? "scion", maxReconnectAttempts: -1, reconnectTimeWait: 500 }),
        catch: busError("connect")
      }),
      (nc) => Effect.promise(() => nc.drain()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    )
    yield* Effect.gen(function* () {
      const nc = yield* connectOnce
      const jsm = yield* Effect.tryPromise({ try: () => nc.jetstreamManager({ timeout: requestTimeout }), catch: busError("jetstreamManager") })
      yield* ensureStreams(jsm).pipe(
        Effect.tapError((e) => Effect.logWarning(`bus: stream setup failed, retrying: ${e.message}`)),
        Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))))
      )
      yield* Deferred.succeed(ready, { nc, js: nc.jetstream({ timeout: requestTimeout }), jsm })
    }).pipe(
      Effect.tapError((e) => Effect.logWarning(`bus: NATS not reachable at ${withoutCredentials(servers)}, retrying: ${e.message}`)),
      Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))),
      Effect.forkScoped
    )

    const connected = Deferred.await(ready).pipe(
      Effect.timeoutFail({ duration: requestTimeout, onTimeout: () => new BusError({ operation: "connect", message: `NATS not connected (${withoutCredentials(servers)})` }) })
    )

    const publish: BusShape["publish"] = tracedFn("Bus.publish")(function* (input: PublishInput) {
      yield* Effect.annotateCurrentSpan({ "messaging.destination.name": input.subject, "messaging.message.id": input.msgId ?? "" })
      const { js } = yield* connected
      const data = yield* Effect.try({ try: () => new TextEncoder().encode(JSON.stringify(input.payload)), catch: busError("encode") })
      const h = natsHeaders()
      for (const [k, v] of Object.entries(input.headers ?? {})) h.set(k, v)
      const traceparent = yield* currentTraceparent
      if (Option.isSome(traceparent) && !h.has(BusHeaders.traceparent)) h.set(BusHeaders.traceparent, traceparent.value)
      const ack = yield* Effect.tryPromise({
        try: () => js.publish(physical(input.subject), data, { headers: h, timeout: requestTimeout, ...(input.msgId !== undefined ? { msgID: input.msgId } : {}) }),
        catch: busError(`publish ${input.subject}`)
      })
      return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate }
    })

    const toDelivery = (msg: JsMsg): Delivery => {
      const hdrs: Record<string, string> = {}
      if (msg.headers) for (const k of msg.headers.keys()) hdrs[k] = msg.headers.get(k)
      let payload: unknown
      try {
        payload = msg.json()
      } catch {
        payload = msg.string()
      }
      return {
        subject: logical(msg.subject),
        payload,
        headers: hdrs,
        deliveryCount: msg.info.deliveryCount,
        msgId: hdrs[BusHeaders.msgId],
        working: Effect.sync(() => msg.working())
      }
    }

    const ensureConsumer = (jsm: JetStreamManager, options: ConsumeOptions<any>) =>
      Effect.gen(function* () {
        const stream = streamName(options.stream)
        const filters = options.filterSubjects.map(physical)
        const config: Partial<ConsumerConfig> = {
          durable_name: options.durable,
          ack_policy: AckPolicy.Explicit,
          ack_wait: nanos(ms(options.ackWait ?? consumeDefaults.ackWait)),
          // One more than maxDeliver: a message whose handler crashed the process on the last
          // attempt comes back once more, and is dead-lettered without running the handler.
          max_deliver: (options.maxDeliver ?? consumeDefaults.maxDeliver) + 1,
          deliver_policy: options.deliverPolicy === "new" ? DeliverPolicy.New : DeliverPolicy.All,
          ...(options.inactiveThreshold !== undefined ? { inactive_threshold: nanos(ms(options.inactiveThreshold)) } : {}),
          ...(filters.length === 1 ? { filter_subject: filters[0]! } : { filter_subjects: filters })
        }
        const existing = yield* Effect.tryPromise(() => jsm.consumers.info(stream, options.durable)).pipe(
          Effect.map(Option.some),
          Effect.catchIf((e) => isNotFound(e.error), () => Effect.succeedNone),
          Effect.mapError((e) => busError("consumers.info")(e.error))
        )
        if (Option.isNone(existing)) {
          yield* Effect.tryPromise({ try: () => jsm.consumers.add(stream, config), catch: busError(`consumers.add ${stream}/${options.durable}`) })
          return
        }
        const c = existing.value.config
        const sameFilter = filters.length === 1 ? c.filter_subject === filters[0] : JSON.stringify(c.filter_subjects ?? []) === JSON.stringify(filters)
        if (!sameFilter || c.ack_wait !== config.ack_wait || c.max_deliver !== config.max_deliver) {
          const { durable_name: _d, deliver_policy: _p, ack_policy: _a, ...updatable } = config
          yield* Effect.tryPromise({ try: () => jsm.consumers.update(stream, options.durable, updatable), catch: busError(`consumers.update ${stream}/${options.durable}`) })
        }
      })

    const consume: BusShape["consume"] = (options, handler) =>
      Effect.gen(function* () {
        const concurrency = Math.max(1, options.concurrency ?? 1)
        const stream = streamName(options.stream)
        const { js, jsm } = yield* connected
        yield* ensureConsumer(jsm, options)

        const handle = (msg: JsMsg) =>
          handleDelivery(publish, options, toDelivery(msg), handler, {
            ack: Effect.tryPromise(() => msg.ackAck({ timeout: requestTimeout })).pipe(
              Effect.catchAll((e) => Effect.logWarning(`bus: ack not confirmed for ${msg.subject}`, e))
            ),
            nak: (delay) => Effect.sync(() => msg.nak(Duration.toMillis(delay))),
            // No reason on the wire: NATS 2.9 ignores `+TERM <reason>` and would redeliver the
            // message after its ack wait. The reason is in the log and the DLQ copy's headers.
            term: () => Effect.sync(() => msg.term())
          })

        const run = Effect.gen(function* () {
          const consumer = yield* Effect.tryPromise({ try: () => js.consumers.get(stream, options.durable), catch: busError("consumers.get") })
          // Messages arrive through the callback into a queue that `concurrency` workers drain; at most
          // `concurrency` are pulled at once, so none waits out its ack wait in a buffer.
          const queue = yield* Queue.unbounded<JsMsg>()
          yield* Effect.acquireUseRelease(
            Effect.tryPromise({
              try: () => consumer.consume({ max_messages: concurrency, callback: (msg) => Queue.unsafeOffer(queue, msg) }),
              catch: busError("consume")
            }),
            (messages) =>
              Effect.raceFirst(
                Effect.all(
                  Array.from({ length: concurrency }, () => Effect.forever(Effect.flatMap(Queue.take(queue), handle))),
                  { concurrency: "unbounded", discard: true }
                ),
                Effect.promise(() => messages.closed()).pipe(Effect.flatMap((error) => (error ? Effect.fail(busError("consume")(error)) : Effect.void)))
              ),
            (messages) => Effect.promise(() => messages.close()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
          )
        })
        // The loop ends only on error (or when the consumer vanishes): log and resubscribe.
        yield* run.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`bus: consumer ${stream}/${options.durable} stopped, resubscribing`, cause)),
          Effect.zipRight(Effect.sleep("1 second")),
          Effect.forever,
          Effect.forkScoped
        )
      }).pipe(Effect.withSpan("Bus.consume.start", { attributes: { stream: options.stream, durable: options.durable } }))

    const listen: BusShape["listen"] = (filter, onMessage, onGap) =>
      Effect.gen(function* () {
        const runtime = yield* Effect.runtime<never>()
        const decoder = new TextDecoder()
        yield* Effect.gen(function* () {
          const { nc } = yield* Deferred.await(ready)
          yield* Effect.acquireRelease(
            Effect.sync(() =>
              nc.subscribe(physical(filter), {
                callback: (error, msg) => {
                  if (error) return
                  let payload: unknown
                  try {
                    payload = JSON.parse(decoder.decode(msg.data))
                  } catch {
                    return
                  }
                  Runtime.runFork(runtime)(onMessage({ subject: logical(msg.subject), payload }))
                }
              })
            ),
            (subscription) => Effect.sync(() => subscription.unsubscribe())
          )
          // Subscribed at the server before the gap closes, so nothing after it is missed.
          yield* Effect.tryPromise(() => nc.flush()).pipe(Effect.ignore)
          yield* onGap
          // The client resubscribes by itself after a reconnect; what was published meanwhile is lost.
          // Read by hand: Stream.fromAsyncIterable would await the iterator's return() on
          // interruption, which nats.js resolves only once the connection closes.
          const statuses = nc.status()[Symbol.asyncIterator]()
          yield* Effect.promise(() => statuses.next()).pipe(
            Effect.flatMap((next) => (next.done ? Effect.interrupt : next.value.type === Events.Reconnect ? onGap : Effect.void)),
            Effect.forever
          )
        }).pipe(Effect.scoped, Effect.forkScoped)
      })

    return Bus.of({ publish, consume, listen })
  })

/** The connection URL(s) (comma-separated), default the local server. */
/** NATS server URLs for a log line or an error: user and password (or token) left out. */
export const withoutCredentials = (servers: string) =>
  servers
    .split(",")
    .map((server) => server.trim().replace(/^([a-z]+:\/\/)[^@/]*@/i, "$1"))
    .join(",")

export const natsUrl = Config.string("NATS_URL").pipe(Config.withDefault("nats://127.0.0.1:4222"))

/**
 * BUS_NAMESPACE: one deployment's prefix for every stream, subject and (through its streams)
 * durable on a NATS it shares with others — a second deployment, or the tests' systems. Unset in
 * a deployment that has its NATS to itself.
 */
export const busNamespace = Config.option(Config.nonEmptyString("BUS_NAMESPACE"))

/** A core NATS subject of this deployment (namespaced like the streams' subjects). */
export const namespacedSubject = (namespace: Option.Option<string>, subject: string) => (Option.isSome(namespace) ? `${namespace.value}.${subject}` : subject)

/**
 * `Bus` over NATS JetStream at NATS_URL, namespaced by BUS_NAMESPACE unless the options name a
 * namespace. The connection drains when the layer's scope closes.
 */
export const NatsBus = {
  layer: (options: NatsBusOptions = {}): Layer.Layer<Bus, never> =>
    Layer.scoped(
      Bus,
      Effect.gen(function* () {
        const url = yield* Effect.orDie(natsUrl)
        const namespace = options.namespace !== undefined ? Option.some(options.namespace) : yield* Effect.orDie(busNamespace)
        return yield* makeNatsBus(url, Option.isSome(namespace) ? { ...options, namespace: namespace.value } : options)
      })
    ),
  make: makeNatsBus
}
