import { quoteIdent } from "@scion/kit"
import { Clock, Config, Duration, Effect, Schema } from "effect"
import type { Engine } from "../engine/EngineProvisioner.js"
import { type EngineSessionOptions, onEngineDatabase, onMirrorUnderLock, type PgSession } from "../engine/PgSession.js"
import { publicationMembershipSql } from "./PublicationSql.js"

/**
 * Copying a table again from the source (services/connector/README.md, "Schema changes"): a
 * change that rewrote a table (`scion.alter_table` saw the mirror's file replaced: a type changed
 * by a cast, a volatile default, an identity; or the capture saw the source's rewritten; or two
 * columns swapped names) filled it on the source by the source's own expression, which no
 * snapshot carries. The mirror asks for the table again in
 * `scion.recopy_requests`, and this copies it the way a table joining the publication is copied:
 * the table leaves the publication and the subscription, the mirror's rows go, it joins again and
 * the subscription's table sync copies it from a fresh snapshot and catches up with the stream.
 */

/** TABLE_RECOPY_TIMEOUT (default 10 min): how long a table copied again may take before the failure is recorded (and quarantined). */
export const TableRecopyTimeout = Config.duration("TABLE_RECOPY_TIMEOUT").pipe(Config.withDefault(Duration.minutes(10)))

/** How long one call follows copies under the copy lock before it lets go (the next call follows on). */
const LOCK_HOLD = Duration.seconds(10)

/** A table stayed in the publication the copy took it out of. */
export class RecopyUnfinished extends Schema.TaggedError<RecopyUnfinished>()("RecopyUnfinished", {
  reason: Schema.String
}) {}

/** A table the mirror asked for again: the source's oid, the mirror's name, why the last attempt stopped. */
export interface RecopyRequest extends Record<string, unknown> {
  readonly source_relid: string
  /** When the table was last asked for (a rewrite while it is copied asks again): the request's version. */
  readonly requested_at: string
  readonly path: string
  /** When its table sync was started (null: not yet). */
  readonly copy_started_at: Date | null
  readonly error: string | null
}

/**
 * The mirror's open requests (none on a mirror set up before requests existed), read on the
 * caller's session. One whose last attempt failed waits for the quarantine it opened to be
 * released (which clears the failure), not retried every round.
 */
export const recopyRequests = (mirror: PgSession) =>
  Effect.gen(function* () {
    const [present] = yield* mirror.query<{ present: boolean }>("select to_regclass('scion.recopy_requests') is not null as present")
    if (present?.present !== true) return [] as ReadonlyArray<RecopyRequest>
    return yield* mirror.query<RecopyRequest>(
      `select r.source_relid::text as source_relid, r.requested_at::text as requested_at, pg_catalog.format('%I.%I', m.schema_name, m.table_name) as path, r.copy_started_at, r.error
       from scion.recopy_requests r join scion.mirror_tables m on m.source_relid = r.source_relid order by r.source_relid`
    )
  })

/** The pipeline a recopy runs through. */
export interface RecopyPipeline {
  readonly engine: Engine
  readonly mirrorDatabase: string
  readonly subscriptionName: string
  readonly publicationName: string
}

/**
 * The requested tables as the source has them now: their name there, and whether the role may
 * publish them again (ADD TABLE needs the table's owner).
 */
const SOURCE_TABLES_SQL = `
  select c.oid::text as relid, pg_catalog.format('%I.%I', n.nspname, c.relname) as name,
         pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE') as may_publish
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  where c.oid = any($1::oid[])`

/** How many of the tables the subscription still has. */
const SUBSCRIBED_SQL = `
  select count(*)::int as still
  from pg_catalog.pg_subscription_rel r join pg_catalog.pg_subscription s on s.oid = r.srsubid
  where s.subname = $1 and r.srrelid = any(array(select pg_catalog.to_regclass(p)::oid from unnest($2::text[]) p))`

/**
 * Which of the tables the subscription's table sync has copied: `f` (copy finished, catching up),
 * `s` (in step with the stream) or `r` (ready). Its rows are then whole as of the sync's snapshot.
 */
const COPIED_SQL = `
  select p as path
  from unnest($2::text[]) p
  join pg_catalog.pg_subscription_rel r on r.srrelid = pg_catalog.to_regclass(p)
  join pg_catalog.pg_subscription s on s.oid = r.srsubid
  where s.subname = $1 and r.srsubstate in ('f', 's', 'r')`

/**
 * Copies the requested tables again, in two parts.
 * - Start (a request not yet copying): the table leaves the publication and the subscription,
 *   its rows go, it joins again and the refresh starts its table sync; the request is marked copying.
 * - Follow (every request copying): once the sync has copied the table's rows (state `f`, `s` or
 *   `r`) the request is done.
 * The engine's copy lock is held from the moment the rows go and while the copy is followed, up
 * to `LOCK_HOLD` a call: a branch batch waits meanwhile rather than copy a half-empty table. The
 * lock is not held to the end of a long copy: a reconciling engine's changes take the same lock,
 * and the sync may need one of them (the source's table changed again) before it can copy. A
 * copy still unfinished after `copyTimeout` is recorded as failed, as is any failure. A table the
 * source no longer has is no longer asked for (schema following drops it); one the role may not
 * publish again keeps its request with the reason. The quarantine monitor reports failures.
 * Answers how many tables finished copying.
 */
export const recopyTables = (
  pipeline: RecopyPipeline,
  source: PgSession,
  requests: ReadonlyArray<RecopyRequest>,
  options: EngineSessionOptions & { readonly copyTimeout: Duration.Duration }
) =>
  Effect.gen(function* () {
    const open = requests.filter((request) => request.error === null)
    if (open.length === 0) return 0
    const onSource = yield* source.query<{ relid: string; name: string; may_publish: boolean }>(SOURCE_TABLES_SQL, [open.map((request) => request.source_relid)])
    const bySource = new Map(onSource.map((table) => [table.relid, table]))
    return yield* onMirrorUnderLock(pipeline.engine, pipeline.mirrorDatabase, options, (mirror) =>
      Effect.gen(function* () {
        const gone = open.filter((request) => !bySource.has(request.source_relid))
        if (gone.length > 0) yield* mirror.query(`delete from scion.recopy_requests where ${AS_READ}`, asRead(gone))
        for (const request of open) {
          const table = bySource.get(request.source_relid)
          if (table === undefined || table.may_publish || request.copy_started_at !== null) continue
          yield* recordFailure(mirror, [request], `the source's role may not publish ${table.name} again (adding a table to a publication takes its owner)`)
        }
        // A paused subscription refreshes nothing and syncs nothing; the requests wait for it to run again.
        const [subscription] = yield* mirror.query<{ enabled: boolean }>("select subenabled as enabled from pg_catalog.pg_subscription where subname = $1", [
          pipeline.subscriptionName
        ])
        if (subscription?.enabled !== true) return 0
        const starting = open.flatMap((request) => {
          const table = bySource.get(request.source_relid)
          return request.copy_started_at === null && table?.may_publish === true ? [{ ...request, source: table }] : []
        })
        if (starting.length > 0) yield* startCopies(pipeline, source, mirror, starting)
        const copying = [...open.filter((request) => request.copy_started_at !== null && bySource.has(request.source_relid)), ...starting]
        if (copying.length === 0) return 0
        const copied = yield* awaitCopied(mirror, pipeline.subscriptionName, copying.map((request) => request.path), LOCK_HOLD)
        const done = copying.filter((request) => copied.has(request.path))
        if (done.length > 0) yield* mirror.query(`delete from scion.recopy_requests where ${AS_READ}`, asRead(done))
        const overdue = overdueOf(copying.filter((request) => !copied.has(request.path)), yield* Clock.currentTimeMillis, options.copyTimeout)
        if (overdue.length > 0) {
          yield* recordFailure(mirror, overdue, `the table sync had not copied the rows back after ${Duration.format(options.copyTimeout)} (see the engine's log)`)
        }
        return done.length
      }).pipe(
        // The mirror's session may be what failed: the failure is recorded on one of its own.
        Effect.tapError((e) =>
          onEngineDatabase(pipeline.engine, pipeline.mirrorDatabase, options, (mirror) => recordFailure(mirror, open, e.message)).pipe(Effect.ignore)
        )
      )
    )
  }).pipe(Effect.withSpan("TableRecopy.recopyTables", { attributes: { tables: requests.length } }))

/** The requests whose copy started longer than `copyTimeout` before `now` and has not failed yet. */
const overdueOf = (requests: ReadonlyArray<RecopyRequest>, now: number, copyTimeout: Duration.Duration) =>
  requests.filter((request) => request.error === null && request.copy_started_at !== null && now - new Date(request.copy_started_at).getTime() > Duration.toMillis(copyTimeout))

/**
 * A copy started longer than `copyTimeout` ago is recorded as failed on a short session of its
 * own, whether or not the source can be reached: a source down in the middle of a copy leaves
 * the mirror's table empty, which the quarantine monitor must report. Answers how many.
 */
export const recordOverdue = (pipeline: RecopyPipeline, requests: ReadonlyArray<RecopyRequest>, options: EngineSessionOptions & { readonly copyTimeout: Duration.Duration }) =>
  Effect.gen(function* () {
    const overdue = overdueOf(requests, yield* Clock.currentTimeMillis, options.copyTimeout)
    if (overdue.length === 0) return 0
    yield* onEngineDatabase(pipeline.engine, pipeline.mirrorDatabase, options, (mirror) =>
      recordFailure(mirror, overdue, `the table sync had not copied the rows back after ${Duration.format(options.copyTimeout)} (is the source reachable? see the engine's log)`)
    )
    return overdue.length
  })

/** The start of each copy, under the caller's lock: the table out and back in, its rows gone between, its sync started. */
const startCopies = (pipeline: RecopyPipeline, source: PgSession, mirror: PgSession, tables: ReadonlyArray<RecopyRequest & { readonly source: { readonly name: string } }>) =>
  Effect.gen(function* () {
    // copy_data: a table that joined meanwhile (its own refresh not yet run) is copied, not taken as copied.
    const refresh = `alter subscription ${quoteIdent(pipeline.subscriptionName)} refresh publication with (copy_data = true)`
    const names = tables.map((table) => table.source.name)
    const paths = tables.map((table) => table.path)
    // Out of the publication, then out of the subscription. A DDL on the table meanwhile puts it
    // back in the publication (the capture trigger joins tables of schemas mirrored whole), so the
    // mirror is asked until it no longer has the table, and only then are its rows emptied.
    yield* source.query(publicationMembershipSql(pipeline.publicationName, names, "drop")).pipe(
      Effect.zipRight(mirror.query(refresh)),
      Effect.zipRight(mirror.query<{ still: number }>(SUBSCRIBED_SQL, [pipeline.subscriptionName, paths])),
      Effect.filterOrFail(
        ([row]) => (row?.still ?? 0) === 0,
        () => new RecopyUnfinished({ reason: `the source kept publishing ${names.join(", ")} (a change to it joined it to the publication again)` })
      ),
      Effect.retry({ times: 5, while: (e) => e._tag === "RecopyUnfinished" })
    )
    yield* emptyTables(mirror, paths)
    yield* source.query(publicationMembershipSql(pipeline.publicationName, names, "add"))
    yield* mirror.query(refresh)
    yield* mirror.query(`update scion.recopy_requests set copy_started_at = now() where ${AS_READ}`, asRead(tables))
  })

/**
 * Requests as they were read ($1 relids, $2 versions): a table rewritten again while it was being
 * copied was asked for again (`scion.alter_table` renews the request), and the copy under way
 * neither ends nor marks that newer request.
 */
const AS_READ = "(source_relid, requested_at) in (select * from unnest($1::bigint[], $2::timestamptz[]))"
const asRead = (requests: ReadonlyArray<RecopyRequest>) => [requests.map((r) => r.source_relid), requests.map((r) => r.requested_at)]

/** Why the last attempt for `requests` stopped; the quarantine monitor reports it. */
const recordFailure = (mirror: PgSession, requests: ReadonlyArray<RecopyRequest>, reason: string) =>
  mirror.query(`update scion.recopy_requests set error = $3 where ${AS_READ}`, [...asRead(requests), reason])

/**
 * The mirror's rows of `paths` go: TRUNCATE where no other table's foreign key points at the
 * table (it would refuse), else DELETE with the apply worker's replication role (no foreign-key
 * triggers: the referencing rows stay, as the source has them).
 */
const emptyTables = (mirror: PgSession, paths: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const tables = yield* mirror.query<{ path: string; referenced: boolean }>(
      `select p as path, exists (select 1 from pg_catalog.pg_constraint k where k.contype = 'f' and k.confrelid = pg_catalog.to_regclass(p) and k.conrelid <> k.confrelid) as referenced
       from unnest($1::text[]) p`,
      [[...paths]]
    )
    const truncated = tables.filter((table) => !table.referenced).map((table) => table.path)
    if (truncated.length > 0) yield* mirror.query(`truncate only ${truncated.join(", ")}`)
    const deleted = tables.filter((table) => table.referenced)
    if (deleted.length === 0) return
    yield* mirror.query("set session_replication_role = replica")
    for (const table of deleted) yield* mirror.query(`delete from only ${table.path}`)
    yield* mirror.query("reset session_replication_role")
  })

/** Which of `paths` the subscription's table sync has copied, looking every 100 ms for up to `bound` until all are. */
const awaitCopied = (mirror: PgSession, subscriptionName: string, paths: ReadonlyArray<string>, bound: Duration.Duration) =>
  Effect.gen(function* () {
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(bound)
    for (;;) {
      const copied = new Set((yield* mirror.query<{ path: string }>(COPIED_SQL, [subscriptionName, [...paths]])).map((row) => row.path))
      if (copied.size === paths.length || (yield* Clock.currentTimeMillis) >= deadline) return copied
      yield* Effect.sleep(Duration.millis(100))
    }
  })
