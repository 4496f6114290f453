import { Bus, type Delivery } from "@scion/kit"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { BillingConfig } from "./config.js"
import { Subscriptions } from "./Subscriptions.js"

/** The fields billing reads from identity's org events; others are ignored. */
const OrgCreated = Schema.Struct({ org_id: Schema.NonEmptyString, created_at: Schema.String })
const OrgDeleted = Schema.Struct({ org_id: Schema.NonEmptyString, deleted_at: Schema.String })
const decodeCreated = Schema.decodeUnknown(OrgCreated)
const decodeDeleted = Schema.decodeUnknown(OrgDeleted)

/** One durable over `events.org.>` (NATS 2.9 takes one filter per consumer). */
export const ORG_EVENTS_FILTER = "events.org.>"

/**
 * Handles one org event. A malformed payload is a defect: retried, then dead-lettered where it
 * can be looked at. Other events.org.* subjects are acknowledged and ignored.
 */
export const handleOrgEvent = (delivery: Delivery) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions
    switch (delivery.subject) {
      case "events.org.created": {
        const event = yield* Effect.orDie(decodeCreated(delivery.payload))
        const created = yield* subscriptions.setUpOrg(event, delivery.msgId ?? `org.created.${event.org_id}`)
        yield* Effect.logInfo(created ? "billing set up for org" : "org already set up; event ignored").pipe(Effect.annotateLogs({ org_id: event.org_id }))
        return
      }
      case "events.org.deleted": {
        const event = yield* Effect.orDie(decodeDeleted(delivery.payload))
        yield* subscriptions.closeOrg(event)
        yield* Effect.logInfo("billing closed for org").pipe(Effect.annotateLogs({ org_id: event.org_id }))
        return
      }
      default:
        return
    }
  })

/** Consumes org events for the lifetime of the layer (NatsBus in production, InMemoryBus embedded). */
export const OrgEventsConsumer: Layer.Layer<never, never, Bus | Subscriptions | BillingConfig> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const bus = yield* Bus
    const config = yield* BillingConfig
    const subscriptions = yield* Subscriptions
    yield* bus
      .consume(
        {
          stream: "EVENTS",
          durable: config.eventsDurable,
          filterSubjects: [ORG_EVENTS_FILTER],
          deliverPolicy: config.eventsDeliverPolicy,
          ...Option.match(config.eventsInactiveSeconds, { onNone: () => ({}), onSome: (s) => ({ inactiveThreshold: Duration.seconds(s) }) })
        },
        (delivery) => handleOrgEvent(delivery).pipe(Effect.provideService(Subscriptions, subscriptions))
      )
      .pipe(Effect.orDie)
    yield* Effect.logInfo("consuming org events").pipe(Effect.annotateLogs({ durable: config.eventsDurable }))
  })
)
