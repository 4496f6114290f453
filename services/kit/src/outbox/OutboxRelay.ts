import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Config, Deferred, Duration, Effect, Fiber, Layer, Option, Queue, Schedule, Stream } from "effect"
import { Bus, type BusError } from "../bus/Bus.js"

/**
 * The transactional outbox: a unit writes its state change and a row in its own `outbox` table in
 * one transaction; the relay publishes the rows to the bus (`Nats-Msg-Id` = `msg_id`) and marks
 * them. Units put this DDL in one of their own migrations (identity's 0001 has the same table).
 */
export const outboxDdl = (table = "outbox") => `
create table if not exists ${table} (
  id           bigserial primary key,
  subject      text not null,
  msg_id       text not null unique,
  payload      jsonb not null,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
create index if not exists ${table}_unpublished on ${table} (id) where published_at is null;
`

export const OUTBOX_DDL = outboxDdl()

export interface OutboxRelayOptions {
  /** The table, in the unit's schema (search_path); default "outbox". */
  readonly table?: string
  /** Sleep between polls when there was nothing to publish (default OUTBOX_POLL_INTERVAL_MS, 200 ms). */
  readonly pollInterval?: Duration.DurationInput
  /** Rows claimed per transaction (default OUTBOX_BATCH_SIZE, 100). */
  readonly batchSize?: number
  /** Longest wait between attempts while publishing fails (default 10 s). */
  readonly maxBackoff?: Duration.DurationInput
  /**
   * A Postgres NOTIFY channel the unit's outbox trigger signals on commit: the relay LISTENs and
   * passes at once instead of waiting out the poll interval, which remains the backstop. The
   * notification must carry a payload: the listener (@effect/sql-pg) drops empty ones.
   */
  readonly wakeChannel?: string
  /**
   * How often the relay checks that its LISTEN still hears the channel (default 5 s): it sends a
   * check on the channel and, not hearing it within this long, listens again on a new connection.
   * @effect/sql-pg swallows the listening connection's errors and never ends its stream, so after
   * a Postgres restart or failover the relay would otherwise be down to polling for good.
   */
  readonly listenCheckInterval?: Duration.DurationInput
}

/** The payload of the relay's own checks on its wake channel: heard, they wake no pass. */
const LISTEN_CHECK = "scion-outbox-listen-check"

interface Row {
  readonly id: string
  readonly subject: string
  readonly msg_id: string
  readonly payload: unknown
}

export interface RelayBatch {
  readonly published: number
  readonly claimed: number
}

/**
 * One pass: claim up to batchSize unpublished rows in id order with `for update skip locked`
 * (replicas never hold the same row), publish them one by one in order, mark those published and
 * commit. A publish failure stops the pass: the rows published before it are marked, the rest stay
 * unpublished, and the pass fails with the BusError. A crash between publish and commit leaves rows
 * that are published again later; the stream drops them as duplicates within its window.
 */
export const relayOnce = (options: { readonly table?: string; readonly batchSize?: number } = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const table = sql(options.table ?? "outbox")
    const batchSize = options.batchSize ?? 100
    const result = yield* sql.withTransaction(
      Effect.gen(function* () {
        const rows = yield* sql<Row>`
          select id, subject, msg_id, payload from ${table}
          where published_at is null order by id limit ${batchSize} for update skip locked`
        const published: Array<string> = []
        let failure: Option.Option<BusError> = Option.none()
        for (const row of rows) {
          const outcome = yield* Effect.either(bus.publish({ subject: row.subject, payload: row.payload, msgId: row.msg_id }))
          if (outcome._tag === "Left") {
            failure = Option.some(outcome.left)
            break
          }
          published.push(row.id)
        }
        if (published.length > 0) yield* sql`update ${table} set published_at = now() where id in ${sql.in(published)}`
        return { claimed: rows.length, published: published.length, failure }
      })
    )
    if (Option.isSome(result.failure)) return yield* result.failure.value
    return { claimed: result.claimed, published: result.published } satisfies RelayBatch
  }).pipe(Effect.withSpan("OutboxRelay.relayOnce"))

export const outboxRelayConfig = Config.all({
  pollInterval: Config.integer("OUTBOX_POLL_INTERVAL_MS").pipe(Config.withDefault(200), Config.map(Duration.millis)),
  batchSize: Config.integer("OUTBOX_BATCH_SIZE").pipe(Config.withDefault(100))
})

/**
 * The relay loop: a pass, then again at once while batches come back full, else after the poll
 * interval; while publishing (or the database) fails, retries with exponential backoff from the
 * poll interval up to maxBackoff. Never ends by itself; interrupted when its scope closes.
 */
export const runOutboxRelay = (options: OutboxRelayOptions = {}) =>
  Effect.gen(function* () {
    const config = yield* Effect.orDie(outboxRelayConfig)
    const pollInterval = Duration.decode(options.pollInterval ?? config.pollInterval)
    const batchSize = options.batchSize ?? config.batchSize
    const maxBackoff = Duration.decode(options.maxBackoff ?? Duration.seconds(10))
    const pass = relayOnce({ batchSize, ...(options.table !== undefined ? { table: options.table } : {}) })
    const wake = yield* Queue.sliding<void>(1)
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (options.wakeChannel !== undefined && Option.isSome(pg)) {
      yield* Effect.fork(listenForWakeUps(pg.value, options.wakeChannel, wake, Duration.decode(options.listenCheckInterval ?? Duration.seconds(5))))
    }
    const idle = Effect.ignore(Effect.timeout(Queue.take(wake), pollInterval))
    let failures = 0
    while (true) {
      const outcome = yield* Effect.exit(pass)
      if (outcome._tag === "Success") {
        if (failures > 0) yield* Effect.logInfo("outbox relay: publishing again")
        failures = 0
        if (outcome.value.claimed < batchSize) yield* idle
      } else {
        failures++
        const delay = Duration.min(Duration.times(pollInterval, 2 ** Math.min(failures, 16)), maxBackoff)
        if (failures === 1 || failures % 20 === 0) {
          yield* Effect.logWarning(`outbox relay: pass failed (${failures} in a row), retrying in ${Duration.format(delay)}`, outcome.cause)
        }
        yield* Effect.sleep(delay)
      }
    }
  })

/**
 * LISTENs on `channel` and wakes the relay on each notification, for as long as the relay runs.
 * Every `checkInterval` it NOTIFYs a check of its own on the channel; not heard within the same
 * interval (the listening connection ended without a word), it listens again, which takes a new
 * connection once the old one is released. A check that could not be sent (the database is
 * unreachable) says nothing about the listener: it is kept, and checked again next interval.
 */
const listenForWakeUps = (pg: PgClient.PgClient, channel: string, wake: Queue.Queue<void>, checkInterval: Duration.Duration) =>
  Effect.gen(function* () {
    // The check in flight, completed when the listener hears it.
    let check = yield* Deferred.make<void>()
    const listening = pg.listen(channel).pipe(
      Stream.runForEach((payload) => (payload === LISTEN_CHECK ? Deferred.succeed(check, undefined) : Queue.offer(wake, undefined))),
      Effect.tapError((error) => Effect.logWarning("outbox relay: LISTEN failed; polling until it works again", error)),
      Effect.retry(Schedule.spaced("1 second"))
    )
    // pg_notify, not PgClient.notify: @effect/sql-pg 0.53 sends `NOTIFY channel, $1`, which
    // Postgres refuses (a utility statement takes no parameters), so every check went unheard and
    // the relay left a working connection every two intervals.
    const sendCheck = pg`select pg_notify(${channel}, ${LISTEN_CHECK})`
    /** Whether a check sent now is heard within the interval; true when it could not be sent. */
    const checked = Effect.gen(function* () {
      check = yield* Deferred.make<void>()
      const sent = yield* Effect.exit(sendCheck)
      if (sent._tag === "Failure") {
        yield* Effect.logDebug("outbox relay: could not send its LISTEN check", sent.cause)
        return true
      }
      return Option.isSome(yield* Effect.timeoutOption(Deferred.await(check), checkInterval))
    })
    while (true) {
      const listener = yield* Effect.fork(listening)
      while (yield* Effect.zipRight(Effect.sleep(checkInterval), checked)) {
        // Heard (or not sendable): the connection is kept.
      }
      yield* Effect.logWarning("outbox relay: its LISTEN no longer hears the channel; listening again on a new connection")
      yield* Fiber.interrupt(listener)
    }
  })

/** Runs the relay in a background fiber for the life of the layer. Needs a Bus and the unit's SqlClient. */
export const OutboxRelay = {
  layer: (options: OutboxRelayOptions = {}): Layer.Layer<never, never, Bus | SqlClient.SqlClient> =>
    Layer.scopedDiscard(Effect.forkScoped(runOutboxRelay(options)))
}
