import { Duration, Effect } from "effect"
import type { BranchingEngine } from "./Engines.js"
import { adminSession, type EngineClient, EngineFailure, type OwnedObject } from "./EngineSql.js"

/**
 * What a branch's copy contains, stated (ARCHITECTURE.md, "Pipelines, schema changes and
 * freshness"): the source WAL position the mirror had applied when it was cut, and the source
 * time it is at least as fresh as. And read-your-writes: waiting until the mirror has applied the
 * source up to a position before copying.
 */

/**
 * What the pause found: the source position the paused mirror holds, and the newest heartbeat it
 * had applied (the source time its data is at least as fresh as); null when it cannot tell. And
 * whether it aligned the mirror's sequences, and what it found for the copies' roles to own.
 */
export interface CopyMark {
  readonly sourceLsn: string | null
  readonly dataAsOf: Date | null
  /** The paused mirror's sequences stood past its rows when it was copied: the copy needs no alignment. */
  readonly sequencesAligned: boolean
  /** The objects the copy holds that its role is to own, listed on the paused mirror; null: the copy's readying searches for them. */
  readonly owned: ReadonlyArray<OwnedObject> | null
  /**
   * The copy was a spare readied ahead: everything in it is owned by this placeholder role, which
   * becomes the branch's (EngineSql.adoptSpareOwner) instead of a readying in the copy.
   */
  readonly spareOwner: string | null
}

export const noMark: CopyMark = { sourceLsn: null, dataAsOf: null, sequencesAligned: false, owned: null, spareOwner: null }

/**
 * The source position the mirror has applied, read while its subscriptions are paused: each
 * subscription's replication origin holds the source commit it applied last (the least of them
 * when there are several). Read on any database of the engine: both catalogs are shared.
 */
export const pausedPosition = (client: EngineClient, subscriptionNames: ReadonlyArray<string>) =>
  client
    .query<{ lsn: string | null }>(
      "mark",
      `select min(o.remote_lsn)::text as lsn
       from pg_subscription s join pg_replication_origin_status o on o.external_id = 'pg_' || s.oid
       where s.subname = any($1)`,
      [[...subscriptionNames]]
    )
    .pipe(Effect.map(([row]) => row?.lsn ?? null))

/** The subscriptions among `names` that are enabled now. */
export const runningSubscriptions = (client: EngineClient, names: ReadonlyArray<string>) =>
  client
    .query<{ name: string }>("pause", "select subname as name from pg_subscription where subname = any($1) and subenabled", [[...names]])
    .pipe(Effect.map((rows) => rows.map((r) => r.name)))

/**
 * Waits until the mirror has applied the source up to `target`: the furthest of what the
 * subscription applied (its origin) and what it last confirmed to the source (keepalives move
 * that on when nothing it publishes changed). Bounded by `timeout`. Asked on an admin session
 * (every catalog and view it reads is the cluster's): a session on the mirror through the wait
 * would hold up every branch batch meanwhile, which copies the mirror only once none is connected.
 */
export const waitForSourcePosition = (engine: BranchingEngine, target: string, timeout: Duration.DurationInput) =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(timeout)
    while (true) {
      // Borrowed for each look, not held through the wait: the pool serves the copies too.
      const [row] = yield* Effect.scoped(
        Effect.flatMap(adminSession(engine), (admin) =>
          admin.query<{ reached: boolean | null; at: string | null }>(
            "catch_up",
            `select min(greatest(coalesce(o.remote_lsn, '0/0'), coalesce((select max(w.latest_end_lsn) from pg_stat_subscription w where w.subid = s.oid), '0/0'))) >= $2::pg_lsn as reached,
                    min(greatest(coalesce(o.remote_lsn, '0/0'), coalesce((select max(w.latest_end_lsn) from pg_stat_subscription w where w.subid = s.oid), '0/0')))::text as at
             from pg_subscription s left join pg_replication_origin_status o on o.external_id = 'pg_' || s.oid
             where s.subname = any($1)`,
            [[...engine.subscriptionNames], target]
          )
        )
      )
      if (row?.reached === true) return
      if (Date.now() > deadline) {
        return yield* new EngineFailure({
          step: "catch_up",
          message: `the mirror did not reach the source position ${target} within ${Duration.format(Duration.decode(timeout))} (it has applied up to ${row?.at ?? "nothing"}); see the connector's replication status`
        })
      }
      yield* Effect.sleep(Duration.millis(50))
    }
  }).pipe(Effect.withSpan("Freshness.waitForSourcePosition", { attributes: { target } }))

/**
 * The newest heartbeat of the connector a mirror, or a copy of it, holds: the source time its data
 * is at least as fresh as. Null without Scion's heartbeat (gone from a copy already readied). On a
 * copy it is read before the copy is readied (which drops the `scion` schema in its transaction)
 * and recorded before that too, so a redelivery keeps it.
 */
export const readHeartbeat = (client: EngineClient, connectorId: string) =>
  Effect.gen(function* () {
    const [present] = yield* client.query<{ present: boolean }>("freshness", "select to_regclass('scion.heartbeat') is not null as present")
    if (present?.present !== true) return null
    const [row] = yield* client.query<{ at: Date | null }>("freshness", "select max(at) as at from scion.heartbeat where connector_id = $1", [connectorId])
    return row?.at ?? null
  })
