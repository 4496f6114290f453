import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, FiberRef, Option } from "effect"
import { CurrentRequestId, provideForRequestFiber, setForRequestFiber } from "../src/index.js"

class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}

describe("values for a request's own fiber", () => {
  it.effect("are seen by the request's effect and the fibers it forks, not by the fiber that started it", () =>
    Effect.gen(function* () {
      const served = Effect.gen(function* () {
        const greeting = yield* Greeting
        const requestId = yield* FiberRef.get(CurrentRequestId)
        const forked = yield* Fiber.join(yield* Effect.fork(FiberRef.get(CurrentRequestId)))
        return { greeting, requestId, forked }
      }).pipe(provideForRequestFiber(Greeting, "hello"), setForRequestFiber(CurrentRequestId, Option.some("req_1")))
      // The request runs on a fiber of its own, as the server bridge and the gateway run each request
      // (awaited, not joined: a join would take on the joined fiber's values, set or scoped alike).
      const answer = yield* Effect.flatten(Fiber.await(yield* Effect.fork(served)))
      expect(answer).toEqual({ greeting: "hello", requestId: Option.some("req_1"), forked: Option.some("req_1") })
      expect(yield* FiberRef.get(CurrentRequestId)).toEqual(Option.none())
      expect(Option.isNone(Context.getOption(yield* Effect.context<never>(), Greeting))).toBe(true)
    })
  )
})
