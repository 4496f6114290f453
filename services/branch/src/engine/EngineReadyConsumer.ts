import { Bus, type Delivery, ENGINE_READY, EngineReady } from "@scion/kit"
import { Config, Duration, Effect, Layer, Option, Schema } from "effect"
import { Copier } from "./Copier.js"
import { Engines } from "./Engines.js"

const decodeReady = Schema.decodeUnknown(EngineReady)

/**
 * The durable over the connector unit's `events.connector.engine_ready` on EVENTS: replicas share
 * one name, so one of them cuts the spare. A new durable starts at new events (an engine made
 * ready days ago has had its creates since). Tests name their own and let NATS remove it.
 */
export const engineEventsConfig = Config.all({
  durable: Config.string("BRANCH_EVENTS_DURABLE").pipe(Config.withDefault("branch")),
  deliverPolicy: Config.literal("all", "new")("BRANCH_EVENTS_DELIVER_POLICY").pipe(Config.withDefault("new" as const)),
  inactiveSeconds: Config.option(Config.integer("BRANCH_EVENTS_INACTIVE_SECONDS"))
})

/**
 * One engine-ready event: the Copier cuts a spare of the new mirror in the background (when the
 * engine keeps spares), so the first create on it finds one. A connector gone since, or an engine
 * no longer ready, is nothing to do; the connector unit unreachable fails the delivery, which the
 * bus redelivers. A malformed payload is a defect: retried, then dead-lettered.
 */
export const handleEngineReady = (delivery: Delivery) =>
  Effect.gen(function* () {
    if (delivery.subject !== ENGINE_READY) return
    const event = yield* Effect.orDie(decodeReady(delivery.payload))
    const engines = yield* Engines
    const copier = yield* Copier
    const engine = yield* engines.get(event.connector_id).pipe(Effect.catchTag("ConnectorNotFound", () => Effect.succeed(null)))
    if (engine === null || engine.status !== "ready") return
    yield* copier.prepareSpare(engine)
  }).pipe(Effect.withSpan("EngineReadyConsumer.handle"))

/** Consumes engine-ready events for the lifetime of the layer (NatsBus in production, InMemoryBus embedded). */
export const EngineReadyConsumer: Layer.Layer<never, never, Bus | Engines | Copier> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const bus = yield* Bus
    const engines = yield* Engines
    const copier = yield* Copier
    const config = yield* Effect.orDie(engineEventsConfig)
    yield* bus
      .consume(
        {
          stream: "EVENTS",
          durable: config.durable,
          filterSubjects: [ENGINE_READY],
          deliverPolicy: config.deliverPolicy,
          ...Option.match(config.inactiveSeconds, { onNone: () => ({}), onSome: (s) => ({ inactiveThreshold: Duration.seconds(s) }) })
        },
        (delivery) => handleEngineReady(delivery).pipe(Effect.provideService(Engines, engines), Effect.provideService(Copier, copier))
      )
      .pipe(Effect.orDie)
    yield* Effect.logInfo("consuming engine-ready events").pipe(Effect.annotateLogs({ durable: config.durable }))
  })
)
