import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Runtime } from "effect"
import { makeGroupedStatement, unitDatabase } from "../src/index.js"
import { freshDatabase, withConfig } from "../src/testing.js"

const database = unitDatabase({ schema: "grouped_unit", migrations: new URL("./fixtures/migrations/", import.meta.url), maxConnections: 4 })

/** A grouped insert of widgets, counting the statements it sends. */
const groupedInsert = Effect.gen(function* () {
  const url = yield* freshDatabase("kit_grouped")
  const context = yield* Layer.build(database.pipe(Layer.provide(withConfig({ DATABASE_URL: url }))))
  const sql = context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
  // A name may not be blank: one bad call in a group makes the group's statement fail.
  yield* sql`alter table widgets add constraint named check (name <> '')`
  const statements: Array<number> = []
  const insert = yield* makeGroupedStatement({
    name: "widgets.insert",
    run: (names: ReadonlyArray<string>) => {
      statements.push(names.length)
      return sql<{ readonly id: string; readonly name: string }>`
        insert into widgets (name) select n from jsonb_array_elements_text(${JSON.stringify(names)}::jsonb) with ordinality as e(n, i) order by i
        returning id, name`.pipe(
        Effect.map((rows) => rows.map((row) => row.name)),
        Effect.orDie
      )
    }
  })
  return { sql, insert, statements }
})

describe("grouped statements", () => {
  it.live("calls made together share statements and each gets its own answer", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { sql, insert, statements } = yield* groupedInsert
        const names = Array.from({ length: 40 }, (_, i) => `widget-${i}`)
        const answers = yield* Effect.forEach(names, insert, { concurrency: "unbounded" })
        expect(answers).toEqual(names)
        // Made in the same turn of the event loop, they go out as one statement.
        expect(statements).toEqual([40])
        const stored = yield* sql<{ readonly name: string }>`select name from widgets order by id`
        expect(stored.map((row) => row.name).sort()).toEqual([...names].sort())
        // A lone call is sent at the end of its turn, in a statement of its own.
        statements.length = 0
        expect(yield* insert("alone")).toBe("alone")
        expect(statements).toEqual([1])
      })
    ),
    60_000
  )

  it.live("calls from separate callbacks of one turn share a statement; calls made while one is in flight wait and go together", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const groups: Array<ReadonlyArray<string>> = []
        const gate = yield* Deferred.make<void>()
        const held = yield* makeGroupedStatement({
          name: "held",
          run: (inputs: ReadonlyArray<string>) => Effect.as(Effect.zipRight(Effect.sync(() => groups.push(inputs)), Deferred.await(gate)), inputs)
        })
        const runtime = yield* Effect.runtime<never>()
        // As a burst of requests read at once is handled: each call starts in a callback of its own.
        const burst = yield* Effect.async<ReadonlyArray<Fiber.RuntimeFiber<string>>>((resume) => {
          const fibers: Array<Fiber.RuntimeFiber<string>> = []
          for (let i = 0; i < 3; i++) setImmediate(() => fibers.push(Runtime.runFork(runtime)(held(`burst-${i}`))))
          setImmediate(() => resume(Effect.succeed(fibers)))
        })
        yield* Effect.sleep("20 millis")
        expect(groups).toEqual([["burst-0", "burst-1", "burst-2"]])
        // That statement is in flight: these wait for it, then go out together.
        const later = yield* Effect.forEach(["later-0", "later-1"], (name) => Effect.fork(held(name)))
        yield* Effect.sleep("20 millis")
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Effect.forEach([...burst, ...later], Fiber.join)).toEqual(["burst-0", "burst-1", "burst-2", "later-0", "later-1"])
        expect(groups).toEqual([["burst-0", "burst-1", "burst-2"], ["later-0", "later-1"]])
      })
    ),
    10_000
  )

  it.live("one failing call fails alone: the rest of its group is written", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { sql, insert, statements } = yield* groupedInsert
        const names = ["a", "b", "c", "", "d", "e", "f", "g", "h", "i"]
        const exits = yield* Effect.forEach(names, (name) => Effect.exit(insert(name)), { concurrency: "unbounded" })
        expect(exits.map(Exit.isSuccess)).toEqual(names.map((name) => name !== ""))
        const failed = exits[names.indexOf("")]!
        expect(Exit.isFailure(failed) && Cause.pretty(failed.cause)).toContain("SqlError")
        // Some group held the bad call with others, failed, and was retried call by call.
        expect(statements.some((size) => size > 1)).toBe(true)
        const stored = yield* sql<{ readonly name: string }>`select name from widgets order by name`
        expect(stored.map((row) => row.name)).toEqual(names.filter((name) => name !== "").sort())
      })
    ),
    60_000
  )

  it.live("a call inside a transaction runs on the transaction's connection: it sees its writes and rolls back with it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { sql, insert, statements } = yield* groupedInsert
        const count = sql<{ readonly n: number }>`select count(*)::int as n from widgets`.pipe(Effect.map((rows) => rows[0]!.n))
        const seenInside = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`insert into widgets (name) values ('written first')`
              const answers = yield* Effect.forEach(["inside-1", "inside-2", "inside-3"], insert, { concurrency: "unbounded" })
              expect(answers).toEqual(["inside-1", "inside-2", "inside-3"])
              const seen = yield* count
              return yield* Effect.fail({ rollback: true, seen })
            })
          )
          .pipe(Effect.flip)
        // Each call ran alone, inside the transaction (it saw the row written before it) ...
        expect(statements).toEqual([1, 1, 1])
        expect(seenInside).toEqual({ rollback: true, seen: 4 })
        // ... and went with its rollback.
        expect(yield* count).toBe(0)
      })
    ),
    60_000
  )

  it.live("a call interrupted while it waits for its group is not sent", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const sent: Array<string> = []
        const gate = yield* Deferred.make<void>()
        const held = yield* makeGroupedStatement({
          name: "held",
          run: (inputs: ReadonlyArray<string>) => Effect.as(Effect.zipRight(Effect.sync(() => sent.push(...inputs)), Deferred.await(gate)), inputs)
        })
        const first = yield* Effect.fork(held("first"))
        yield* Effect.sleep("20 millis")
        // "first" is in flight; these two queue behind it, and one of them is given up.
        const kept = yield* Effect.fork(held("kept"))
        const abandoned = yield* Effect.fork(held("abandoned"))
        yield* Effect.sleep("20 millis")
        yield* Fiber.interrupt(abandoned)
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(first)).toBe("first")
        expect(yield* Fiber.join(kept)).toBe("kept")
        expect(sent).toEqual(["first", "kept"])
      })
    ),
    10_000
  )

  it.live("calls in flight or still queued when the scope closes are answered, not left waiting", () =>
    Effect.gen(function* () {
      const callers = yield* Effect.scoped(
        Effect.gen(function* () {
          const slow = yield* makeGroupedStatement({
            name: "slow",
            inFlight: 1,
            run: (inputs: ReadonlyArray<number>) => Effect.as(Effect.sleep("1 hour"), inputs)
          })
          const first = yield* Effect.fork(slow(1))
          yield* Effect.sleep("20 millis")
          // The first call is in flight; this one queues behind it.
          const second = yield* Effect.fork(slow(2))
          yield* Effect.sleep("20 millis")
          return [first, second]
        })
      )
      for (const caller of callers) {
        const exit = yield* Fiber.await(caller)
        expect(Exit.isFailure(exit) && Cause.pretty(exit.cause)).toContain("slow: shutting down")
      }
    }),
    10_000
  )
})
