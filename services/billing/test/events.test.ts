/**
 * Org set-up from NATS: the machine's JetStream server (a namespace of this file's own), billing's
 * durable consumer, identity's payloads. Duplicates — the same message redelivered, or the same
 * org announced again under another message id — change nothing. (With excludeTestServices,
 * it.effect runs on the live clock.)
 */
import { randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Bus, NatsBus } from "@scion/kit"
import { connect } from "nats"
import { Effect, Layer, Logger, LogLevel, Schedule } from "effect"
import { OrgEventsConsumer } from "../src/index.js"
import { billingTestLayer, newOrgId, orgCreated } from "./support.js"

const namespace = `t${randomBytes(4).toString("hex")}`

const dropNamespace = Effect.promise(async () => {
  const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" })
  const jsm = await nc.jetstreamManager()
  for (const name of ["JOBS", "EVENTS", "DLQ"]) await jsm.streams.delete(`${namespace}_${name}`).catch(() => false)
  await nc.close()
})

const TestLayer = OrgEventsConsumer.pipe(
  Layer.provideMerge(billingTestLayer(undefined, { BILLING_EVENTS_DURABLE: "billing_test" })),
  Layer.provideMerge(NatsBus.layer({ namespace }).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))),
  Layer.provideMerge(Layer.scopedDiscard(Effect.addFinalizer(() => dropNamespace)))
)

const counts = (orgId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ customers: number; credits: number; status: string | null; subscription: string | null }>`
      select (select count(*)::int from customers where org_id = ${orgId}) as customers,
             (select count(*)::int from credit_ledger where org_id = ${orgId}) as credits,
             (select status from customers where org_id = ${orgId}) as status,
             (select status from subscriptions where org_id = ${orgId}) as subscription`.pipe(Effect.map((rows) => rows[0]!))
  )

/** Polls until `check` holds (bounded). */
const eventually = <A>(read: Effect.Effect<A, unknown, SqlClient.SqlClient>, check: (a: A) => boolean) =>
  read.pipe(
    Effect.filterOrFail(check, () => "not yet"),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
  )

describe("org events", () => {
  layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("events.org.created sets billing up once, however often it arrives", () =>
      Effect.gen(function* () {
        const bus = yield* Bus
        const orgId = newOrgId()
        const payload = orgCreated(orgId)
        yield* bus.publish({ subject: "events.org.created", payload, msgId: `org.created.${orgId}` })
        // Dropped by the stream's duplicate window …
        expect((yield* bus.publish({ subject: "events.org.created", payload, msgId: `org.created.${orgId}` })).duplicate).toBe(true)
        // … and this one reaches billing, which must ignore it.
        yield* bus.publish({ subject: "events.org.created", payload, msgId: `replayed.${orgId}` })
        yield* eventually(counts(orgId), (c) => c.customers === 1)
        // The replay is behind the first in the stream: once a later marker is handled, it was too.
        const marker = newOrgId()
        yield* bus.publish({ subject: "events.org.created", payload: orgCreated(marker), msgId: `org.created.${marker}` })
        yield* eventually(counts(marker), (c) => c.customers === 1)
        expect(yield* counts(orgId)).toEqual({ customers: 1, credits: 1, status: "active", subscription: "active" })
      })
    )

    it.effect("events.org.deleted closes the customer and cancels the subscription", () =>
      Effect.gen(function* () {
        const bus = yield* Bus
        const orgId = newOrgId()
        yield* bus.publish({ subject: "events.org.created", payload: orgCreated(orgId), msgId: `org.created.${orgId}` })
        yield* bus.publish({
          subject: "events.org.deleted",
          payload: { org_id: orgId, name: "Acme", deleted_by_user_id: null, deleted_at: new Date().toISOString() },
          msgId: `org.deleted.${orgId}`
        })
        expect(yield* eventually(counts(orgId), (c) => c.status === "closed")).toEqual({ customers: 1, credits: 1, status: "closed", subscription: "canceled" })
      })
    )
  })
})
