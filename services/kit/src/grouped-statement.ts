import { SqlClient } from "@effect/sql"
import { Deferred, Effect, Exit, Option, Queue } from "effect"
import type { Scope } from "effect"
import { withSpanWhenTracing } from "./tracing.js"

export interface GroupedStatementOptions<A, B> {
  /** Names the statement in spans and defects. */
  readonly name: string
  /**
   * One statement for many calls: answers one result per input, in the inputs' order. Called with
   * a single input too, both for a lone call and to isolate a call when its group failed.
   */
  readonly run: (inputs: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<B>>
  /**
   * Statements of this kind in flight at once (default 1: in the operation bench one in flight
   * made larger groups and cost Postgres 455 µs an operation against 600 with two, at a higher rate).
   */
  readonly inFlight?: number
  /** At most this many calls in one statement (default 128). */
  readonly maxGroup?: number
}

/**
 * For a grouped read: each call's row found by its key (none when the statement returned none for
 * it), in the calls' order; calls with the same key get the same row.
 */
export const answersByKey = <K, R>(keys: ReadonlyArray<K>, rows: ReadonlyArray<R>, keyOf: (row: R) => K): Array<Option.Option<R>> => {
  const found = new Map(rows.map((row) => [keyOf(row), row]))
  return keys.map((key) => Option.fromNullable(found.get(key)))
}

/**
 * The keys of a grouped statement as one array parameter, for `where id = any(${keysArray(sql, ids)})`.
 * Not a join or an `in (select …)` over a set-returning function: the planner counts on ~100 rows
 * from a function and read the whole table for every group; an array goes to the key's index.
 */
export const keysArray = (sql: SqlClient.SqlClient, keys: ReadonlyArray<string>) => sql`array(select jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb))`

/** Resumes once the event loop has run what the current turn brought (`setImmediate`: after its I/O callbacks). */
const endOfTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

interface Pending<A, B> {
  readonly input: A
  readonly answer: Deferred.Deferred<B>
}

/**
 * Group commit for one statement. Each call to the statement otherwise pays its own round trip
 * (on this deployment's machines the socket write that wakes Postgres, and Postgres's own
 * per-statement work, cost more than the statement: profiled at ~200 µs of the unit's CPU and
 * ~330 µs of Postgres's a statement). Calls made in the same turn of the event loop go out
 * together, and calls made while a statement of this kind is in flight wait for it and then go
 * out together as the next one, so a lone call is sent at the end of its turn and a busy moment
 * costs one round trip for many callers.
 *
 * A group that fails is retried call by call, so one call's failure (a constraint, a defect) is
 * that call's alone. A call made inside a transaction is not grouped: it runs alone, on the
 * transaction's connection (a group runs on a connection of its own, which would not see the
 * transaction's writes nor be part of it).
 */
export const makeGroupedStatement = <A, B>(options: GroupedStatementOptions<A, B>): Effect.Effect<(input: A) => Effect.Effect<B>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<Pending<A, B>>()
    const maxGroup = options.maxGroup ?? 128

    const settle = (group: ReadonlyArray<Pending<A, B>>, exit: Exit.Exit<ReadonlyArray<B>>) =>
      Effect.forEach(group, (pending, index) =>
        Deferred.done(
          pending.answer,
          Exit.flatMap(exit, (results) =>
            index < results.length ? Exit.succeed(results[index]!) : Exit.die(new Error(`${options.name} answered ${results.length} of ${group.length} calls`))
          )
        )
      )

    const runGroup = (group: ReadonlyArray<Pending<A, B>>) =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(options.run(group.map((pending) => pending.input)))
        if (Exit.isSuccess(exit) || group.length === 1) return yield* settle(group, exit)
        yield* Effect.forEach(group, (pending) => Effect.flatMap(Effect.exit(options.run([pending.input])), (single) => settle([pending], single)), {
          discard: true
        })
      }).pipe(
        // Closing while in flight: the group's callers are answered rather than left waiting.
        Effect.onInterrupt(() => settle(group, Exit.die(new Error(`${options.name}: shutting down`)))),
        withSpanWhenTracing(`GroupedStatement.${options.name}`, { attributes: { "scion.group_size": group.length } })
      )

    // A caller interrupted while its call waited (its client went away) is not sent.
    const stillWanted = (pending: Pending<A, B>) => Effect.negate(Deferred.isDone(pending.answer))
    // The first call waits for the rest of the event loop's turn: calls that arrived in the same
    // read (a burst of requests on one connection, each handled in its own callback) join it.
    // Taken at once, the first went out alone and the burst's others waited for its round trip.
    const worker = Effect.forever(
      Queue.take(queue).pipe(
        Effect.zipLeft(endOfTurn),
        Effect.flatMap((first) => Effect.map(Queue.takeUpTo(queue, maxGroup - 1), (rest) => [first, ...rest])),
        Effect.flatMap((taken) => Effect.filter(taken, stillWanted)),
        Effect.flatMap((group) => (group.length === 0 ? Effect.void : runGroup(group)))
      )
    )
    yield* Effect.forkScoped(Effect.all(Array.from({ length: options.inFlight ?? 1 }, () => worker), { concurrency: "unbounded", discard: true }))
    // Closing: calls still queued are answered with a defect rather than left waiting forever.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (left) =>
        Effect.forEach(left, (pending) => Deferred.die(pending.answer, new Error(`${options.name}: shutting down`)), { discard: true })
      )
    )

    const grouped = (input: A) =>
      Effect.flatMap(Deferred.make<B>(), (answer) =>
        Effect.zipRight(
          Queue.offer(queue, { input, answer }),
          Effect.onInterrupt(Deferred.await(answer), () => Deferred.interrupt(answer))
        )
      )
    const alone = (input: A) =>
      Effect.flatMap(options.run([input]), (results) =>
        results.length === 1 ? Effect.succeed(results[0]!) : Effect.die(new Error(`${options.name} answered ${results.length} of 1 call`))
      )
    return (input: A) => Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) => (Option.isSome(transaction) ? alone(input) : grouped(input)))
  })
