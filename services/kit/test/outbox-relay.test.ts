import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Exit, Layer, Logger, LogLevel, Redacted, Scope } from "effect"
import { Bus, type BusShape, type Delivery } from "../src/bus/Bus.js"
import { makeNatsBus, NatsBus } from "../src/bus/NatsBus.js"
import { outboxDdl, relayOnce, runOutboxRelay } from "../src/outbox/OutboxRelay.js"
import { freshDatabase } from "../src/testing.js"
import { eventually, waitUntil } from "./bus.contract.js"
import { deleteNamespace, testNamespace } from "./support.js"

const namespace = testNamespace()
const Database = Layer.unwrapScoped(Effect.map(freshDatabase("outbox_test"), (url) => PgClient.layer({ url: Redacted.make(url), maxConnections: 6 })))
const TestLayer = Layer.mergeAll(Database, NatsBus.layer({ namespace })).pipe(
  Layer.provideMerge(Layer.scopedDiscard(Effect.addFinalizer(() => deleteNamespace(namespace)))),
  Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)),
  Layer.orDie
)

let counter = 0
/** A fresh outbox table and event subject prefix for one test. */
const setup = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const unit = `u${Date.now().toString(36)}${counter++}`
  yield* sql.unsafe(outboxDdl(`outbox_${unit}`))
  const insert = (n: number, from = 0) =>
    Effect.forEach(Array.from({ length: n }, (_, i) => from + i), (i) =>
      sql`insert into ${sql(`outbox_${unit}`)} (subject, msg_id, payload) values (${`events.${unit}.thing`}, ${`${unit}-${i}`}, ${JSON.stringify({ i })}::jsonb)`
    )
  const unpublished = Effect.map(
    sql<{ n: number }>`select count(*)::int as n from ${sql(`outbox_${unit}`)} where published_at is null`,
    (rows) => rows[0]!.n
  )
  return { unit, table: `outbox_${unit}`, insert, unpublished }
})

/** Every delivery on events.<unit>.> seen by a fresh durable (from the start of the stream). */
const collect = (unit: string) =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const seen: Array<Delivery> = []
    yield* bus.consume({ stream: "EVENTS", durable: `${unit}watch`, filterSubjects: [`events.${unit}.>`] }, (d) => Effect.sync(() => seen.push(d)))
    return seen
  })

/** A NOTIFY on `<unit>_wake` for every insert into the table, as the units' triggers do (branch 0010, identity 0004); the channel. */
const wakeTrigger = (unit: string, table: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const channel = `${unit}_wake`
    yield* sql.unsafe(`create function ${unit}_wake() returns trigger language plpgsql as $$ begin perform pg_notify('${channel}', 'outbox'); return null; end $$`)
    yield* sql.unsafe(`create trigger ${unit}_wake after insert on ${table} for each statement execute function ${unit}_wake()`)
    return channel
  })

/**
 * A relay listening on its wake channel (the poll a minute away), once it listens: the pids of the
 * connections LISTENing on the channel, what it published, and a row that must wake it at once.
 */
const listeningRelay = (listenCheckInterval: Duration.DurationInput) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { unit, table, insert, unpublished } = yield* setup
    const channel = yield* wakeTrigger(unit, table)
    const seen = yield* collect(unit)
    yield* runOutboxRelay({ table, pollInterval: "60 seconds", wakeChannel: channel, listenCheckInterval }).pipe(Effect.forkScoped)
    const listeners = Effect.map(sql<{ pid: number }>`select pid from pg_stat_activity where query = ${`LISTEN "${channel}"`}`, (rows) => rows.map((row) => row.pid))
    yield* eventually("the relay listening", Effect.map(listeners, (pids) => pids.length === 1))
    const wokenByARow = Effect.gen(function* () {
      yield* insert(1)
      yield* waitUntil("the row published", () => seen.length >= 1, "3 seconds")
      yield* eventually("the row marked", Effect.map(unpublished, (n) => n === 0))
    })
    return { listeners, seen, wokenByARow }
  })

const countsByMsgId = (seen: ReadonlyArray<Delivery>) => {
  const counts = new Map<string, number>()
  for (const d of seen) counts.set(d.msgId ?? "", (counts.get(d.msgId ?? "") ?? 0) + 1)
  return counts
}

describe("outbox relay (Postgres + NATS)", () => {
  layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("publishes unpublished rows in id order with msgId = msg_id and marks them", () =>
      Effect.gen(function* () {
        const { unit, table, insert, unpublished } = yield* setup
        yield* insert(12)
        const seen = yield* collect(unit)
        yield* runOutboxRelay({ table, pollInterval: "50 millis", batchSize: 5 }).pipe(Effect.forkScoped)
        yield* waitUntil("12 events", () => seen.length >= 12)
        expect(seen.map((d) => (d.payload as { i: number }).i)).toEqual(Array.from({ length: 12 }, (_, i) => i))
        expect(seen.map((d) => d.msgId)).toEqual(Array.from({ length: 12 }, (_, i) => `${unit}-${i}`))
        expect(seen.every((d) => d.subject === `events.${unit}.thing`)).toBe(true)
        yield* eventually("rows marked", Effect.map(unpublished, (n) => n === 0))
      })
    )

    it.scoped("a restart loses nothing and duplicates nothing, even after a crash between publish and commit", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const bus = yield* Bus
        const { unit, table, insert, unpublished } = yield* setup
        const seen = yield* collect(unit)
        yield* insert(5)
        const first = yield* Scope.make()
        yield* runOutboxRelay({ table, pollInterval: "50 millis" }).pipe(Effect.forkIn(first))
        yield* waitUntil("first five", () => seen.length >= 5)
        yield* eventually("first five marked", Effect.map(unpublished, (n) => n === 0))
        yield* Scope.close(first, Exit.void)
        yield* insert(5, 5)
        // A crash after publishing row 5 but before the commit: published, yet not marked.
        yield* bus.publish({ subject: `events.${unit}.thing`, payload: { i: 5 }, msgId: `${unit}-5` })
        expect(yield* unpublished).toBe(5)
        yield* runOutboxRelay({ table, pollInterval: "50 millis" }).pipe(Effect.forkScoped)
        yield* waitUntil("ten", () => seen.length >= 10)
        yield* eventually("rows marked", Effect.map(unpublished, (n) => n === 0))
        yield* Effect.sleep("300 millis")
        const counts = countsByMsgId(seen)
        expect(counts.size).toBe(10)
        expect([...counts.values()].every((n) => n === 1)).toBe(true)
        expect(yield* unpublished).toBe(0)
        expect((yield* sql<{ n: number }>`select count(*)::int as n from ${sql(table)}`)[0]!.n).toBe(10)
      })
    )

    it.scoped("NATS unreachable: rows stay unpublished, then a working relay publishes each exactly once", () =>
      Effect.gen(function* () {
        const { unit, table, insert, unpublished } = yield* setup
        const seen = yield* collect(unit)
        yield* insert(8)
        const deadBus = yield* makeNatsBus("nats://127.0.0.1:9", { namespace, requestTimeout: "300 millis" })
        const failed = yield* Effect.flip(relayOnce({ table }).pipe(Effect.provideService(Bus, deadBus)))
        expect(failed._tag).toBe("BusError")
        yield* runOutboxRelay({ table, pollInterval: "50 millis" }).pipe(Effect.provideService(Bus, deadBus), Effect.forkScoped)
        yield* Effect.sleep("1500 millis")
        expect(yield* unpublished).toBe(8)
        expect(seen).toHaveLength(0)
        // A working relay next to the dead one.
        yield* runOutboxRelay({ table, pollInterval: "50 millis" }).pipe(Effect.forkScoped)
        yield* waitUntil("eight", () => seen.length >= 8)
        yield* eventually("rows marked", Effect.map(unpublished, (n) => n === 0))
        yield* Effect.sleep("300 millis")
        expect([...countsByMsgId(seen).values()]).toEqual(Array(8).fill(1))
      })
    )

    it.scoped("a row committed with a NOTIFY on the wake channel is published at once, not on the next poll", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { unit, table, insert, unpublished } = yield* setup
        const channel = yield* wakeTrigger(unit, table)
        const seen = yield* collect(unit)
        yield* runOutboxRelay({ table, pollInterval: "60 seconds", wakeChannel: channel }).pipe(Effect.forkScoped)
        yield* eventually(
          "the relay listening",
          Effect.map(sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where query = ${`LISTEN "${channel}"`}`, (rows) => rows[0]!.n === 1)
        )
        yield* insert(1)
        yield* waitUntil("the row published", () => seen.length >= 1, "5 seconds")
        yield* eventually("the row marked", Effect.map(unpublished, (n) => n === 0))
      })
    )

    it.scoped("while its listening connection works, the relay keeps it: its checks are heard, not taken for a dead LISTEN", () =>
      Effect.gen(function* () {
        const relay = yield* listeningRelay("150 millis")
        const [first] = yield* relay.listeners
        // Ten check intervals: a check that went unheard would have replaced the connection by now.
        yield* Effect.sleep("1500 millis")
        expect(yield* relay.listeners).toEqual([first])
        // The checks woke no pass (the poll is a minute away): nothing was published before this row.
        expect(relay.seen).toHaveLength(0)
        yield* relay.wokenByARow
      })
    )

    it.scoped("after its listening connection is ended (a Postgres restart or failover), the relay listens again: a NOTIFY still wakes it at once", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const relay = yield* listeningRelay("500 millis")
        const [ended] = yield* relay.listeners
        yield* sql`select pg_terminate_backend(${ended!})`
        // A new connection LISTENs (its last statement), the ended one is gone.
        yield* eventually("the relay listening again", Effect.map(relay.listeners, (pids) => pids.length === 1 && pids[0] !== ended), "5 seconds")
        yield* relay.wokenByARow
      })
    )

    it.scoped("replicas never publish the same row (for update skip locked)", () =>
      Effect.gen(function* () {
        const bus = yield* Bus
        const { unit, table, insert, unpublished } = yield* setup
        const seen = yield* collect(unit)
        yield* insert(60)
        const publishes = new Map<string, number>()
        const counting: BusShape = {
          ...bus,
          publish: (input) =>
            Effect.sync(() => publishes.set(input.msgId ?? "", (publishes.get(input.msgId ?? "") ?? 0) + 1)).pipe(
              Effect.zipRight(Effect.sleep("5 millis")),
              Effect.zipRight(bus.publish(input))
            )
        }
        yield* Effect.forEach([1, 2, 3], () =>
          runOutboxRelay({ table, pollInterval: "20 millis", batchSize: 7 }).pipe(Effect.provideService(Bus, counting), Effect.forkScoped)
        )
        yield* waitUntil("sixty", () => seen.length >= 60, "20 seconds")
        expect(publishes.size).toBe(60)
        expect([...publishes.values()].every((n) => n === 1)).toBe(true)
        yield* eventually("rows marked", Effect.map(unpublished, (n) => n === 0))
      })
    )
  })
})
