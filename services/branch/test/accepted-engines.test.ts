import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted, TestClock } from "effect"
import { AcceptedEngines, type BranchingEngine } from "../src/index.js"

const engine = (connectorId: string): BranchingEngine => ({
  connectorId,
  orgId: "org_1",
  status: "ready",
  host: "127.0.0.1",
  port: 5432,
  superuser: { username: "scion", password: Redacted.make("secret") },
  mirrorDatabase: "mirror",
  subscriptionNames: [],
  copyLockKey: "1",
  fileCopyClone: false,
  pooler: Option.none(),
  maskingSuggestions: [],
  quarantine: Option.none()
})

/** The answer an accept acted on waits a few seconds for its job, and is taken once. */
describe("the engine answers accepts hand to their jobs", () => {
  it.effect("a job takes its own accept's answer once; another operation's is not its", () =>
    Effect.gen(function* () {
      const accepted = yield* AcceptedEngines
      yield* accepted.keep("op_a", engine("con_a"))
      yield* accepted.keep("op_b", engine("con_b"))
      expect(Option.map(yield* accepted.take("op_a"), (e) => e.connectorId)).toEqual(Option.some("con_a"))
      // A second attempt of the same job asks the connector.
      expect(yield* accepted.take("op_a")).toEqual(Option.none())
      expect(yield* accepted.take("op_c")).toEqual(Option.none())
      expect(Option.map(yield* accepted.take("op_b"), (e) => e.connectorId)).toEqual(Option.some("con_b"))
    }).pipe(Effect.provide(AcceptedEngines.layer))
  )

  it.effect("an answer older than five seconds is not used, and old answers make room for new ones", () =>
    Effect.gen(function* () {
      const accepted = yield* AcceptedEngines
      yield* accepted.keep("op_late", engine("con_a"))
      yield* TestClock.adjust("5001 millis")
      expect(yield* accepted.take("op_late")).toEqual(Option.none())
      // A thousand wait at most: the oldest go first.
      for (let i = 0; i <= 1000; i++) yield* accepted.keep(`op_${i}`, engine("con_a"))
      expect(yield* accepted.take("op_0")).toEqual(Option.none())
      expect(Option.isSome(yield* accepted.take("op_1"))).toBe(true)
      expect(Option.isSome(yield* accepted.take("op_1000"))).toBe(true)
    }).pipe(Effect.provide(AcceptedEngines.layer))
  )
})
