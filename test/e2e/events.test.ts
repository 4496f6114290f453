/**
 * Identity's outbox reaches NATS: an org created through the gateway shows up as
 * `events.org.created` on the EVENTS stream of the machine's NATS (NATS_URL), published by the
 * relay inside the identity process.
 */
import { Bus, type Delivery, NatsBus } from "@scion/kit"
import { Deferred, Effect, Layer, Logger, LogLevel } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

describe("events", () => {
  it("an org created through the gateway is announced as events.org.created on NATS", async () => {
    const program = Effect.gen(function* () {
      const bus = yield* Bus
      const orgs = new Map<string, Delivery>()
      const arrived = yield* Deferred.make<void>()
      let wanted = ""
      // A fresh durable that starts at new messages and goes away a minute after the test.
      yield* bus.consume(
        {
          stream: "EVENTS",
          durable: `e2e_events_${randomBytes(4).toString("hex")}`,
          filterSubjects: ["events.org.created"],
          deliverPolicy: "new",
          inactiveThreshold: "1 minute"
        },
        (delivery) =>
          Effect.gen(function* () {
            const orgId = (delivery.payload as { org_id?: string }).org_id ?? ""
            orgs.set(orgId, delivery)
            if (orgId === wanted) yield* Deferred.succeed(arrived, undefined)
          })
      )
      const { token } = yield* Effect.promise(() => signUp(scion, "events"))
      const response = yield* Effect.promise(() => scion.request("POST", "/v1/orgs", { token, body: { name: "Evented" } }))
      expect(response.status).toBe(201)
      wanted = response.body.org_id
      if (orgs.has(wanted)) yield* Deferred.succeed(arrived, undefined)
      yield* Deferred.await(arrived).pipe(Effect.timeout("15 seconds"))
      const delivery = orgs.get(wanted)!
      expect(delivery.subject).toBe("events.org.created")
      expect(delivery.msgId).toBe(`org.created.${wanted}`)
      expect(delivery.payload).toMatchObject({ org_id: wanted, name: "Evented", created_at: expect.stringMatching(/Z$/) })
    })
    await Effect.runPromise(
      program.pipe(Effect.scoped, Effect.provide(NatsBus.layer({ namespace: scion.busNamespace }).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))))
    )
  })
})
