import { Bus, type Delivery, eventsConsumeOptions, eventsDurableConfig } from "@scion/kit"
import { Effect, Layer, Schema } from "effect"
import { Deletion } from "./connectors/Deletion.js"

/** The fields read from identity's `events.project.deleted`; others are ignored. */
const ProjectDeleted = Schema.Struct({ project_id: Schema.NonEmptyString, org_id: Schema.NonEmptyString })
const decodeDeleted = Schema.decodeUnknown(ProjectDeleted)

export const PROJECT_DELETED = "events.project.deleted"

/**
 * The durable over `events.project.deleted` on EVENTS. Replicas share one name (each event is
 * handled once); tests give every system its own, starting at new events and removed when idle.
 */
export const projectEventsConfig = eventsDurableConfig("CONNECTOR", { durable: "connector", deliverPolicy: "all" })

/**
 * One project event: every connector of the deleted project is deleted with force (a delete in
 * progress is kept). A malformed payload is a defect: retried, then dead-lettered. Failing to
 * start a delete (operation unit down) fails the delivery, which the bus redelivers.
 */
export const handleProjectEvent = (delivery: Delivery) =>
  Effect.gen(function* () {
    if (delivery.subject !== PROJECT_DELETED) return
    const event = yield* Effect.orDie(decodeDeleted(delivery.payload))
    const deletion = yield* Deletion
    const outcome = yield* deletion.removeProject(event.org_id, event.project_id)
    yield* Effect.logInfo("project deleted: its connectors are being deleted").pipe(
      Effect.annotateLogs({ org_id: event.org_id, project_id: event.project_id, connectors: outcome.connectors, started: outcome.started.length })
    )
  })

/** Consumes project events for the lifetime of the layer. */
export const ProjectEventsConsumer: Layer.Layer<never, never, Bus | Deletion> = Layer.scopedDiscard(
  Effect.gen(function* () {
    // Identity's events are never namespaced (the unit's NatsBus namespaces only its JOBS and DLQ).
    const bus = yield* Bus
    const deletion = yield* Deletion
    const config = yield* Effect.orDie(projectEventsConfig)
    yield* bus
      .consume(
        eventsConsumeOptions(config, [PROJECT_DELETED]),
        (delivery) => handleProjectEvent(delivery).pipe(Effect.provideService(Deletion, deletion))
      )
      .pipe(Effect.orDie)
    yield* Effect.logInfo("consuming project events").pipe(Effect.annotateLogs({ durable: config.durable }))
  })
)
