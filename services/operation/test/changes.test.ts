import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { OperationChanges } from "../src/index.js"

/** Two adapters stand for two replicas: what one announces, the other hears. */
const twoReplicas = <E>(adapter: Layer.Layer<OperationChanges, E>) =>
  Effect.gen(function* () {
    const a = yield* Layer.build(adapter)
    const b = yield* Layer.build(adapter)
    return [Context.get(a, OperationChanges), Context.get(b, OperationChanges)] as const
  })

describe("OperationChanges", () => {
  it.scopedLive("nats: a change published by one replica wakes a waiter subscribed on another, only for its id", () =>
    Effect.gen(function* () {
      const [a, b] = yield* twoReplicas(OperationChanges.nats)
      const id = `op_test${Date.now()}`
      const waiter = yield* a.subscribe(id)
      const otherWaiter = yield* a.subscribe(`${id}x`)
      yield* b.publish(id)
      expect(yield* Effect.timeoutOption(waiter.next, "2 seconds")).toMatchObject({ _tag: "Some" })
      expect(yield* Effect.timeoutOption(otherWaiter.next, "300 millis")).toMatchObject({ _tag: "None" })
    })
  )

  it.scopedLive("in memory: wakes subscribers of the id; announcements before a wait are kept", () =>
    Effect.gen(function* () {
      const changes = yield* Effect.provide(OperationChanges, OperationChanges.inMemory)
      const waiter = yield* changes.subscribe("op_1")
      yield* changes.publish("op_1")
      yield* changes.publish("op_1")
      expect(yield* Effect.timeoutOption(waiter.next, "1 second")).toMatchObject({ _tag: "Some" })
      expect(yield* Effect.timeoutOption(waiter.next, "100 millis")).toMatchObject({ _tag: "None" })
    })
  )
})
