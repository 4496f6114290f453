import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Operation } from "../src/domain/models.js"
import { OperationChanges } from "../src/index.js"

const operation = (id: string, version: number): Operation => ({
  id,
  orgId: "org_1",
  type: "branch_create",
  resourceId: "branch_1",
  status: "running",
  stage: "copy",
  stageLabel: "Copying",
  progress: 40,
  result: null,
  error: null,
  setupStatus: null,
  createdAt: new Date("2026-11-24T10:00:00Z"),
  updatedAt: new Date("2026-11-24T10:00:01Z"),
  startedAt: new Date("2026-11-24T10:00:00Z"),
  completedAt: null,
  heartbeatAt: new Date("2026-11-24T10:00:01Z"),
  version
})

/** Two adapters stand for two replicas: what one announces, the other hears. */
const twoReplicas = <E>(adapter: Layer.Layer<OperationChanges, E>) =>
  Effect.gen(function* () {
    const a = yield* Layer.build(adapter)
    const b = yield* Layer.build(adapter)
    return [Context.get(a, OperationChanges), Context.get(b, OperationChanges)] as const
  })

describe("OperationChanges", () => {
  it.scopedLive("nats: a change published by one replica reaches a waiter on another with the operation as written, only for its id", () =>
    Effect.gen(function* () {
      const [a, b] = yield* twoReplicas(OperationChanges.nats)
      const id = `op_test${Date.now()}`
      const waiter = yield* a.subscribe(id)
      const otherWaiter = yield* a.subscribe(`${id}x`)
      const written = operation(id, 3)
      yield* b.publish(written)
      const heard = yield* Effect.timeoutOption(waiter.next, "2 seconds")
      expect(heard).toMatchObject({ _tag: "Some" })
      // Every field survives the trip, dates as dates.
      expect(heard._tag === "Some" ? heard.value : null).toEqual(written)
      expect(yield* Effect.timeoutOption(otherWaiter.next, "300 millis")).toMatchObject({ _tag: "None" })
    })
  )

  it.scopedLive("in memory: hands subscribers of the id the newest change announced before they look", () =>
    Effect.gen(function* () {
      const changes = yield* Effect.provide(OperationChanges, OperationChanges.inMemory)
      const waiter = yield* changes.subscribe("op_1")
      yield* changes.publish(operation("op_1", 2))
      yield* changes.publish(operation("op_1", 3))
      expect(yield* Effect.timeoutOption(waiter.next, "1 second")).toMatchObject({ _tag: "Some", value: { version: 3 } })
      expect(yield* Effect.timeoutOption(waiter.next, "100 millis")).toMatchObject({ _tag: "None" })
    })
  )
})
