/**
 * The contract every `Bus` adapter passes: run by nats-bus.test.ts (real JetStream, namespaced
 * streams) and in-memory-bus.test.ts. Each test uses its own subjects (`jobs.<unit>.…`) so the
 * work-queue rule (disjoint durables) holds and tests cannot see each other's messages.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Layer, Option, Ref, Scope } from "effect"
import { Bus, BusHeaders, type Delivery } from "../src/bus/Bus.js"

let counter = 0
const unique = (label: string) => `${label}${Date.now().toString(36)}${(counter++).toString(36)}`

/** Polls until the condition holds (real time), dying after the timeout. */
export const eventually = <E>(what: string, condition: Effect.Effect<boolean, E>, timeout: Duration.DurationInput = "10 seconds") =>
  Effect.gen(function* () {
    while (!(yield* condition)) yield* Effect.sleep("20 millis")
  }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`timed out waiting for ${what}`) }), Effect.orDie)

export const waitUntil = (what: string, condition: () => boolean, timeout: Duration.DurationInput = "10 seconds") =>
  eventually(what, Effect.sync(condition), timeout)

export const busContract = (name: string, busLayer: Layer.Layer<Bus>) =>
  describe(`Bus contract: ${name}`, () => {
    layer(busLayer, { excludeTestServices: true, timeout: "60 seconds" })((it) => {
      it.scoped("publish → consume round trip with payload, headers, msgId and trace parent", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("rt")
          const received = yield* Deferred.make<{ delivery: Delivery; parent: Option.Option<{ traceId: string; spanId: string; _tag: string }> }>()
          yield* bus.consume({ stream: "JOBS", durable: unit, filterSubjects: [`jobs.${unit}.>`] }, (delivery) =>
            Effect.gen(function* () {
              const span = yield* Effect.currentSpan.pipe(Effect.orDie)
              yield* Deferred.succeed(received, { delivery, parent: span.parent })
            })
          )
          const producer = yield* Effect.gen(function* () {
            const span = yield* Effect.currentSpan.pipe(Effect.orDie)
            const ack = yield* bus.publish({ subject: `jobs.${unit}.ping`, payload: { n: 1, s: "é" }, msgId: `m-${unit}`, headers: { "x-custom": "yes" } })
            expect(ack.duplicate).toBe(false)
            return span
          }).pipe(Effect.withSpan("producer"))
          const { delivery, parent } = yield* Deferred.await(received).pipe(Effect.timeout("10 seconds"))
          expect(delivery.subject).toBe(`jobs.${unit}.ping`)
          expect(delivery.payload).toEqual({ n: 1, s: "é" })
          expect(delivery.msgId).toBe(`m-${unit}`)
          expect(delivery.deliveryCount).toBe(1)
          expect(delivery.headers["x-custom"]).toBe("yes")
          expect(delivery.headers[BusHeaders.traceparent]).toMatch(new RegExp(`^00-${producer.traceId}-[0-9a-f]{16}-01$`))
          // The consumer span's parent is the publisher's span, taken from the headers.
          expect(Option.isSome(parent)).toBe(true)
          const p = Option.getOrThrow(parent)
          expect(p._tag).toBe("ExternalSpan")
          expect(p.traceId).toBe(producer.traceId)
          expect(delivery.headers[BusHeaders.traceparent]).toContain(p.spanId)
        })
      )

      it.scoped("a duplicate msgId collapses within the duplicate window", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("dup")
          const seen = yield* Ref.make<Array<unknown>>([])
          const first = yield* bus.publish({ subject: `events.${unit}.x`, payload: { v: 1 }, msgId: `same-${unit}` })
          const second = yield* bus.publish({ subject: `events.${unit}.x`, payload: { v: 2 }, msgId: `same-${unit}` })
          const other = yield* bus.publish({ subject: `events.${unit}.x`, payload: { v: 3 }, msgId: `other-${unit}` })
          expect(first.duplicate).toBe(false)
          expect(second.duplicate).toBe(true)
          expect(second.seq).toBe(first.seq)
          expect(other.duplicate).toBe(false)
          yield* bus.consume({ stream: "EVENTS", durable: unit, filterSubjects: [`events.${unit}.>`] }, (d) => Ref.update(seen, (all) => [...all, d.payload]))
          yield* eventually("two deliveries", Effect.map(Ref.get(seen), (all) => all.length >= 2))
          yield* Effect.sleep("300 millis")
          expect(yield* Ref.get(seen)).toEqual([{ v: 1 }, { v: 3 }])
        })
      )

      it.scoped("a work queue delivers each job once across two consumers of one durable", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("wq")
          const handled: Array<string> = []
          const handler = (tag: string) => (d: Delivery) =>
            Effect.sync(() => handled.push(`${tag}:${(d.payload as { i: number }).i}`)).pipe(Effect.zipRight(Effect.sleep("5 millis")))
          const options = { stream: "JOBS", durable: unit, filterSubjects: [`jobs.${unit}.>`] } as const
          yield* bus.consume(options, handler("a"))
          yield* bus.consume(options, handler("b"))
          yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) => bus.publish({ subject: `jobs.${unit}.work`, payload: { i }, msgId: `${unit}-${i}` }))
          yield* waitUntil("30 jobs", () => handled.length >= 30)
          yield* Effect.sleep("500 millis")
          const ids = handled.map((h) => h.split(":")[1])
          expect(ids).toHaveLength(30)
          expect(new Set(ids).size).toBe(30)
        })
      )

      it.scoped("a work queue rejects a second durable with an overlapping filter", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("ovl")
          yield* bus.consume({ stream: "JOBS", durable: `${unit}a`, filterSubjects: [`jobs.${unit}.>`] }, () => Effect.void)
          const error = yield* Effect.flip(bus.consume({ stream: "JOBS", durable: `${unit}b`, filterSubjects: [`jobs.${unit}.x`] }, () => Effect.void))
          expect(error._tag).toBe("BusError")
          // A disjoint filter is fine.
          yield* bus.consume({ stream: "JOBS", durable: `${unit}c`, filterSubjects: [`jobs.${unit}x.>`] }, () => Effect.void)
        })
      )

      it.scoped("events reach every durable", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("ev")
          const got: Record<string, Array<number>> = { one: [], two: [] }
          for (const durable of ["one", "two"] as const) {
            yield* bus.consume({ stream: "EVENTS", durable: `${unit}${durable}`, filterSubjects: [`events.${unit}.>`], deliverPolicy: "new" }, (d) =>
              Effect.sync(() => got[durable]!.push((d.payload as { i: number }).i))
            )
          }
          yield* Effect.forEach([1, 2, 3], (i) => bus.publish({ subject: `events.${unit}.happened`, payload: { i } }))
          yield* waitUntil("both durables", () => got.one!.length >= 3 && got.two!.length >= 3)
          expect(got.one!.sort()).toEqual([1, 2, 3])
          expect(got.two!.sort()).toEqual([1, 2, 3])
        })
      )

      it.scoped("a failing handler is redelivered with backoff, then dead-lettered once after maxDeliver", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("dl")
          const attempts: Array<{ at: number; count: number }> = []
          const dead: Array<{ delivery: Delivery; cause: Cause.Cause<unknown> }> = []
          const dlq: Array<Delivery> = []
          yield* bus.consume({ stream: "DLQ", durable: `${unit}dlq`, filterSubjects: [`dlq.jobs.${unit}.>`] }, (d) => Effect.sync(() => dlq.push(d)))
          yield* bus.consume(
            {
              stream: "JOBS",
              durable: unit,
              filterSubjects: [`jobs.${unit}.>`],
              maxDeliver: 3,
              backoff: ["300 millis", "600 millis"],
              // Short, so a dead letter that was not really terminated comes back within the test.
              ackWait: "1 second",
              onDeadLetter: (delivery, cause) => Effect.sync(() => dead.push({ delivery, cause }))
            },
            (d) =>
              Effect.gen(function* () {
                attempts.push({ at: Date.now(), count: d.deliveryCount })
                // A typed failure, then a defect, then a typed failure again.
                if (d.deliveryCount === 2) return yield* Effect.die(new Error("boom"))
                return yield* Effect.fail({ _tag: "Nope" as const })
              })
          )
          yield* bus.publish({ subject: `jobs.${unit}.fail`, payload: { job: 1 }, msgId: `${unit}-job` })
          yield* waitUntil("dead letter", () => dead.length >= 1 && dlq.length >= 1)
          yield* Effect.sleep("2500 millis")
          expect(attempts.map((a) => a.count)).toEqual([1, 2, 3])
          expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(250)
          expect(attempts[2]!.at - attempts[1]!.at).toBeGreaterThanOrEqual(550)
          expect(dead).toHaveLength(1)
          expect(dead[0]!.delivery.deliveryCount).toBe(3)
          expect(dead[0]!.delivery.msgId).toBe(`${unit}-job`)
          expect(Cause.isFailType(dead[0]!.cause) || Cause.isFailure(dead[0]!.cause)).toBe(true)
          expect(dlq).toHaveLength(1)
          expect(dlq[0]!.subject).toBe(`dlq.jobs.${unit}.fail`)
          expect(dlq[0]!.payload).toEqual({ job: 1 })
          expect(dlq[0]!.headers[BusHeaders.originalSubject]).toBe(`jobs.${unit}.fail`)
          expect(dlq[0]!.headers[BusHeaders.deliveryCount]).toBe("3")
          expect(dlq[0]!.headers[BusHeaders.deadLetterReason]).toContain("Nope")
        })
      )

      it.scoped("working() keeps a slow handler's message from redelivery past ackWait", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("wk")
          const deliveries: Array<number> = []
          let done = 0
          yield* bus.consume({ stream: "JOBS", durable: unit, filterSubjects: [`jobs.${unit}.>`], ackWait: "1 second", concurrency: 2 }, (d) =>
            Effect.gen(function* () {
              deliveries.push(d.deliveryCount)
              for (let i = 0; i < 10; i++) {
                yield* Effect.sleep("250 millis")
                yield* d.working
              }
              done++
            })
          )
          yield* bus.publish({ subject: `jobs.${unit}.slow`, payload: {} })
          yield* waitUntil("slow job done", () => done >= 1)
          yield* Effect.sleep("1500 millis")
          expect(deliveries).toEqual([1])
        })
      )

      it.scoped("closing the consumer's scope stops consuming; the durable resumes later", () =>
        Effect.gen(function* () {
          const bus = yield* Bus
          const unit = unique("int")
          const handled: Array<number> = []
          const options = { stream: "JOBS", durable: unit, filterSubjects: [`jobs.${unit}.>`] } as const
          const scope = yield* Scope.make()
          yield* bus.consume(options, (d) => Effect.sync(() => handled.push((d.payload as { i: number }).i))).pipe(Scope.extend(scope))
          yield* bus.publish({ subject: `jobs.${unit}.x`, payload: { i: 1 } })
          yield* waitUntil("first job", () => handled.length >= 1)
          yield* Scope.close(scope, Exit.void)
          yield* bus.publish({ subject: `jobs.${unit}.x`, payload: { i: 2 } })
          yield* Effect.sleep("700 millis")
          expect(handled).toEqual([1])
          yield* bus.consume(options, (d) => Effect.sync(() => handled.push((d.payload as { i: number }).i)))
          yield* waitUntil("second job after resuming", () => handled.length >= 2)
          expect(handled).toEqual([1, 2])
        })
      )
    })
  })
