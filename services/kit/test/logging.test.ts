import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer } from "effect"
import { vi } from "vitest"
import { LoggingLive, withRequestId } from "../src/index.js"

/** The JSON lines LoggingLive writes while `effect` runs (at LOG_LEVEL Info). */
const linesOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const written: Array<string> = []
    const spy = vi.spyOn(console, "log").mockImplementation((line: unknown) => void written.push(String(line)))
    yield* Effect.ensuring(
      effect.pipe(Effect.provide(LoggingLive.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson({ LOG_LEVEL: "Info" })))))),
      Effect.sync(() => spy.mockRestore())
    )
    return written.map((line) => JSON.parse(line) as { message: unknown; annotations: Record<string, unknown> })
  })

describe("log lines", () => {
  it.effect("carry the id of the request they were written for, in forked work too, and none outside a request", () =>
    Effect.gen(function* () {
      const lines = yield* linesOf(
        Effect.gen(function* () {
          yield* Effect.logInfo("outside")
          yield* withRequestId("req_abc")(
            Effect.gen(function* () {
              yield* Effect.logInfo("inside")
              yield* Fiber.join(yield* Effect.fork(Effect.logWarning("forked")))
            })
          )
          // An id that could forge a log line is not taken.
          yield* withRequestId("bad\nid")(Effect.logInfo("refused id"))
        })
      )
      const byMessage = Object.fromEntries(lines.map((line) => [String(line.message), line.annotations]))
      expect(byMessage["outside"]).toEqual({})
      expect(byMessage["inside"]).toEqual({ request_id: "req_abc" })
      expect(byMessage["forked"]).toEqual({ request_id: "req_abc" })
      expect(byMessage["refused id"]).toEqual({})
    }))
})
