import { Bus, type Delivery, ENGINE_READY, EngineReady, eventsConsumeOptions, eventsDurableConfig } from "@scion/kit"
import { Effect, Layer, Schema } from "effect"
import { Copier } from "./Copier.js"
import { Engines } from "./Engines.js"

const decodeReady = Schema.decodeUnknown(EngineReady)

/**
 * The durable over the connector unit's `events.connector.engine_ready` on EVENTS: replicas share
 * one name, so one of them cuts the spare. A new durable starts at new events (an engine made
 * ready days ago has had its creates since). Tests name their own and let NATS remove it.
 */
export const engineEventsConfig = eventsDurableConfig("BRANCH", { durable: "branch", deliverPolicy: "new" })

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
        eventsConsumeOptions(config, [ENGINE_READY]),
        (delivery) => handleEngineReady(delivery).pipe(Effect.provideService(Engines, engines), Effect.provideService(Copier, copier))
      )
      .pipe(Effect.orDie)
    yield* Effect.logInfo("consuming engine-ready events").pipe(Effect.annotateLogs({ durable: config.durable }))
  })
)
