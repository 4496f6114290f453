import { quoteIdent, quoteLiteral } from "@scion/kit"
import { Effect, Option, Schema } from "effect"
import type { BranchingEngine } from "./Engines.js"
import { connectEngine, type EngineClient, type OwnedObject, ownershipOf } from "./EngineSql.js"

/**
 * Spare copies: a copy of the paused mirror cut ahead of the create that will use it, stamped
 * with what the mirror held (its fingerprint, below). A later pause that finds the mirror's
 * fingerprint unchanged hands the spare to a waiting copy by renaming it: its data and schema are
 * exactly what a copy cut now would hold. Every statement here runs under the engine's copy lock.
 */

/** The names spares go by on an engine (never a branch's or snapshot's `scion_br_` / `scion_sn_`). */
export const SPARE_PREFIX = "scion_spare_"

/** The first object id an installation's own objects get (FirstNormalObjectId); the system's are below it. */
const FIRST_USER_OID = 16384

/**
 * Catalogs whose rows every change to the mirror's schema writes, each with the column that says
 * the row describes an object made in this database (an id from FIRST_USER_OID on, read through
 * the catalog's index): DDL of the connector's (reconciled columns, selection roll-outs, resets'
 * TRUNCATE, which gives the table a new relfilenode in `pg_class`) inserts, updates or deletes
 * such rows, and each row version carries the writing transaction's id. Their count and the sum
 * of their `xmin`s move with any such change. (ANALYZE's `pg_statistic` is left out: it says
 * nothing of the data.)
 */
const SCHEMA_CATALOGS: ReadonlyArray<readonly [catalog: string, key: string]> = [
  ["pg_namespace", "oid"],
  ["pg_class", "oid"],
  ["pg_attribute", "attrelid"],
  ["pg_attrdef", "oid"],
  ["pg_constraint", "oid"],
  ["pg_index", "indexrelid"],
  ["pg_inherits", "inhrelid"],
  ["pg_type", "oid"],
  ["pg_enum", "oid"],
  ["pg_sequence", "seqrelid"],
  ["pg_proc", "oid"],
  ["pg_trigger", "oid"],
  ["pg_rewrite", "oid"],
  ["pg_policy", "oid"],
  ["pg_extension", "oid"],
  ["pg_description", "objoid"],
  ["pg_collation", "oid"],
  ["pg_default_acl", "oid"],
  ["pg_statistic_ext", "oid"],
  // A table sync's progress: its rows arrive before the subscription's own origin moves.
  ["pg_subscription_rel", "srsubid"]
]

/** The user's tables and sequences: the mirror's own, not Scion's `scion` schema (the heartbeat). */
const USER_RELATIONS = `from pg_class c where c.oid >= ${FIRST_USER_OID} and c.relnamespace <> coalesce(to_regnamespace('scion')::oid, 0)`

/**
 * What the paused mirror holds, as one digest; null when the engine does not count row changes
 * (`track_counts` off), which leaves nothing to compare by. Read on the paused mirror once its
 * subscriptions' workers have exited (each flushes its counters as it exits), it moves when:
 * - a row of a user table was inserted, updated or deleted (the tables' cumulative counters;
 *   `scion`'s heartbeat table is left out: the connector writes a heartbeat every few seconds, and
 *   a copy drops the `scion` schema anyway);
 * - the schema changed (SCHEMA_CATALOGS), a TRUNCATE included;
 * - a sequence moved;
 * - the counters could have been reset (the server restarted, or the database's stats reset),
 *   or the mirror database is another one of the same name.
 * Equal digests mean the mirror's user data and schema are what they were. ~1 ms on a warm
 * session: the catalogs are read through their indexes, only the rows of the user's objects.
 */
/** The schema's digest (SCHEMA_CATALOGS, and which database the mirror is): what only DDL moves. */
const CATALOG_DIGEST = `md5(concat_ws('|',
  (select oid::text from pg_database where datname = current_database()),
  ${SCHEMA_CATALOGS.map(([catalog, key]) => `(select count(*)::text || ':' || coalesce(sum(xmin::text::bigint), 0)::text from pg_catalog.${catalog} where ${key} >= ${FIRST_USER_OID})`).join(",\n  ")}
))`

const FINGERPRINT = `select case when current_setting('track_counts')::bool then md5(concat_ws('|',
  (select d.oid::text || ':' || coalesce(pg_stat_get_db_stat_reset_time(d.oid)::text, '-') from pg_database d where d.datname = current_database()),
  pg_postmaster_start_time()::text,
  (select string_agg(format('%s:%s:%s:%s', c.oid, pg_stat_get_tuples_inserted(c.oid), pg_stat_get_tuples_updated(c.oid), pg_stat_get_tuples_deleted(c.oid)), ',' order by c.oid) ${USER_RELATIONS} and c.relkind in ('r', 'p', 'm')),
  (select string_agg(format('%s:%s', c.oid, pg_sequence_last_value(c.oid)), ',' order by c.oid) ${USER_RELATIONS} and c.relkind = 'S')
)) end as fingerprint, ${CATALOG_DIGEST} as catalogs`

export interface MirrorFingerprint {
  /** The data's counters (null when the engine counts nothing): equal only while the paused mirror's rows are. */
  readonly fingerprint: string | null
  /** The schema's digest: equal while the mirror's schema (and its tables' files) are. */
  readonly catalogs: string
}

/** The paused mirror's fingerprint (FINGERPRINT), on a session connected to it. */
export const mirrorFingerprint = (mirror: EngineClient) =>
  mirror.query<{ fingerprint: string | null; catalogs: string }>("spare", FINGERPRINT).pipe(
    Effect.map(([row]): MirrorFingerprint | null => (row === undefined ? null : { fingerprint: row.fingerprint, catalogs: row.catalogs })),
    Effect.withSpan("SpareSql.mirrorFingerprint")
  )

/** The running mirror's schema digest (MirrorFingerprint.catalogs), on a session connected to it. */
export const mirrorCatalogs = (mirror: EngineClient) =>
  mirror.query<{ catalogs: string }>("spare", `select ${CATALOG_DIGEST} as catalogs`).pipe(
    Effect.map(([row]) => row?.catalogs ?? null),
    Effect.withSpan("SpareSql.mirrorCatalogs")
  )

/**
 * The mirror's DDL marker: a replication origin (`scion_ddl_<mirror's database oid>`, cluster-wide
 * like every origin) that an event trigger in the mirror moves to the WAL's insert position at the
 * end of every DDL command run there, by any session (ENABLE ALWAYS: `session_replication_role`
 * does not silence it). Read with the subscriptions' origins (mirrorOrigins), it tells from the
 * `postgres` database that the mirror's schema has not changed, which otherwise takes a login on
 * the mirror to read its catalogs. The trigger's function lives in the `scion` schema, which every
 * copy's readying drops (the trigger with it), so a branch's own DDL never moves it. A rolled
 * back DDL moves it too (an origin's advance is not transactional): only ever a false "changed".
 * TRUNCATE fires no event trigger; the connector truncates the mirror only with its
 * subscription dropped and made anew, which the subscriptions' origins show. ALTER SUBSCRIPTION
 * is left out: every pause disables and enables the subscriptions, and what else it changes (a
 * publication refreshed: new table syncs) moves the subscriptions' origins.
 */
const DDL_MARKER = "scion_ddl_marker"
const ddlMarkerOrigin = (database: string) => `'scion_ddl_' || (select oid from pg_database where datname = ${quoteLiteral(database)})`

/** Installs the DDL marker on the mirror when it is missing, on a session in it, under the copy lock (one round trip when present). */
export const ensureDdlMarker = (mirror: EngineClient, mirrorDatabase: string) =>
  mirror
    .query(
      "spare",
      `do $scion$
       begin
         if not exists (select 1 from pg_event_trigger where evtname = ${quoteLiteral(DDL_MARKER)}) then
           create schema if not exists scion;
           -- Whoever runs the DDL (the function runs as its owner, the engine's superuser).
           create or replace function scion.ddl_marker() returns event_trigger language plpgsql security definer set search_path = pg_catalog as $fn$
           begin
             -- Pausing and resuming the subscriptions (every batch does) changes no schema; their
             -- other changes (a publication refreshed, made anew) move their own origins.
             if tg_tag = 'ALTER SUBSCRIPTION' then return; end if;
             perform pg_replication_origin_advance('scion_ddl_' || (select oid from pg_database where datname = current_database()), pg_current_wal_insert_lsn());
           exception when undefined_object then
             -- No marker of this database's (a copy not readied yet, or the marker dropped): a DDL
             -- must never fail for it, and a marker that is gone vouches for nothing.
             null;
           end $fn$;
           if not exists (select 1 from pg_replication_origin where roname = ${ddlMarkerOrigin(mirrorDatabase)}) then
             perform pg_replication_origin_create(${ddlMarkerOrigin(mirrorDatabase)});
           end if;
           perform pg_replication_origin_advance(${ddlMarkerOrigin(mirrorDatabase)}, pg_current_wal_insert_lsn());
           create event trigger ${DDL_MARKER} on ddl_command_end execute function scion.ddl_marker();
           alter event trigger ${DDL_MARKER} enable always;
         end if;
       end $scion$`
    )
    .pipe(Effect.asVoid, Effect.withSpan("SpareSql.ensureDdlMarker"))

/**
 * Where every replication origin of the subscriptions stands (their apply workers' and table
 * syncs'), and the mirror's DDL marker when it has one, as one string: it moves with every
 * transaction a worker commits into the mirror and every DDL command run in it. Read on any
 * database of the engine (the catalogs are the cluster's), paused or not.
 */
export const mirrorOrigins = (client: EngineClient, subscriptionNames: ReadonlyArray<string>, mirrorDatabase: string) =>
  client
    .query<{ origins: string | null }>(
      "spare",
      `select coalesce(string_agg(external_id || '=' || remote_lsn::text, ',' order by external_id), '') as origins from (
         select o.external_id, o.remote_lsn
         from pg_subscription s join pg_replication_origin_status o on o.external_id = 'pg_' || s.oid or starts_with(o.external_id, 'pg_' || s.oid || '_')
         where s.subname = any($1)
         union all
         select roname, pg_replication_origin_progress(roname, false) from pg_replication_origin where roname = ${ddlMarkerOrigin(mirrorDatabase)}
       ) origins`,
      [[...subscriptionNames]]
    )
    .pipe(Effect.map(([row]) => row?.origins ?? ""))

/**
 * DDL markers of mirrors that are gone (a deep reset's retired mirror dropped): each marker holds
 * one of the engine's replication origin slots while it has progress to keep.
 */
export const dropOrphanDdlMarkers = (admin: EngineClient) =>
  admin
    .query(
      "spare",
      `select pg_replication_origin_drop(roname) from pg_replication_origin
       where roname ~ '^scion_ddl_[0-9]+$' and not exists (select 1 from pg_database d where d.oid::text = substr(roname, 11))`
    )
    .pipe(Effect.asVoid, Effect.withSpan("SpareSql.dropOrphanDdlMarkers"))

/** Whether origins read by mirrorOrigins include the mirror's DDL marker (a stamp's, or the mirror's now). */
export const hasDdlMarker = (origins: string) => origins.split(",").some((origin) => origin.startsWith("scion_ddl_"))

/** What a spare was cut from, stamped on it (its database's comment). */
export const SpareStamp = Schema.Struct({
  /** The paused mirror's fingerprint. */
  fingerprint: Schema.String,
  /** Its schema's digest and its origins: while both stand, nothing has changed the mirror since, paused or not. */
  catalogs: Schema.String,
  origins: Schema.String,
  /** The copy's mark: the source position and heartbeat the paused mirror held. */
  sourceLsn: Schema.NullOr(Schema.String),
  dataAsOf: Schema.NullOr(Schema.DateFromString),
  /** The placeholder role that owns everything in the spare once it is warmed (warmSpare); null until then. */
  owner: Schema.NullOr(Schema.String)
})
export type SpareStamp = typeof SpareStamp.Type
const StampJson = Schema.parseJson(SpareStamp)

export interface Spare {
  readonly name: string
  /** What the spare was cut from; null for one whose cut was never stamped (a crash), or unreadable. */
  readonly stamp: SpareStamp | null
}

/** The engine's spares, each with its stamp. */
export const listSpares = (admin: EngineClient) =>
  admin
    .query<{ name: string; stamp: string | null }>(
      "spare",
      `select datname as name, shobj_description(oid, 'pg_database') as stamp from pg_database where starts_with(datname, $1) order by datname`,
      [SPARE_PREFIX]
    )
    .pipe(
      Effect.map((rows): ReadonlyArray<Spare> =>
        rows.map((row) => ({ name: row.name, stamp: row.stamp === null ? null : Option.getOrNull(Schema.decodeUnknownOption(StampJson)(row.stamp)) }))
      )
    )

/** Stamps a spare just cut with what it was cut from: until then it is never handed out. */
export const stampSpare = (admin: EngineClient, name: string, stamp: SpareStamp) =>
  admin.query("spare", `comment on database ${quoteIdent(name)} is ${quoteLiteral(Schema.encodeSync(StampJson)(stamp))}`).pipe(Effect.asVoid)

/**
 * The spare becomes `database`, in one transaction: renamed (the data stays where it is) and its
 * stamp removed. It was closed to PUBLIC when it was cut, as every copy is.
 */
export const handOutSpare = (admin: EngineClient, spare: string, database: string) =>
  admin
    .query("spare", `begin; alter database ${quoteIdent(spare)} rename to ${quoteIdent(database)}; comment on database ${quoteIdent(database)} is null; commit`)
    .pipe(
      Effect.tapError(() => Effect.ignore(admin.query("spare", "rollback"))),
      Effect.asVoid,
      Effect.withSpan("SpareSql.handOutSpare", { attributes: { spare, database } })
    )

/**
 * Readies a new spare for the branch that will take it, on a session in it, in one transaction:
 * Scion's `scion` schema goes (as every copy's readying drops it), and a placeholder role of the
 * spare's name (NOLOGIN) is made the owner of the database and of everything in it (`owned`, as
 * the pause listed it; searched in the spare when null). The create that takes the spare then
 * renames that role to its branch's (EngineSql.adoptSpareOwner) instead of opening a session in
 * the copy to ready it. The first session in a database also builds its relation cache file, and a
 * reflink clone shares the mirror's blocks but none of its page cache: both are warm for the
 * branch's first client too. Answers the placeholder's name.
 */
export const warmSpare = (engine: BranchingEngine, name: string, owned: ReadonlyArray<OwnedObject> | null) =>
  Effect.scoped(
    Effect.flatMap(connectEngine(engine, name), (spare) =>
      spare.query(
        "spare",
        [
          "drop schema if exists scion cascade",
          `create role ${quoteIdent(name)} nologin`,
          ...ownershipOf(owned, name),
          `alter database ${quoteIdent(name)} owner to ${quoteIdent(name)}`
        ].join(";\n")
      )
    )
  ).pipe(Effect.as(name), Effect.withSpan("SpareSql.warmSpare", { attributes: { spare: name } }))

/** Drops a spare that no longer matches the mirror (or was never stamped), and its placeholder owner. */
export const dropSpare = (admin: EngineClient, name: string) =>
  admin
    .query("spare", `drop database if exists ${quoteIdent(name)} with (force)`)
    .pipe(
      Effect.zipRight(admin.query("spare", `drop role if exists ${quoteIdent(name)}`)),
      Effect.asVoid,
      Effect.withSpan("SpareSql.dropSpare", { attributes: { spare: name } })
    )

/**
 * Placeholder owners left without their spare: a spare handed to a copy whose branch was then
 * readied the usual way (a redelivery, a reset), so its objects went to the branch's role. One
 * still owning what a create has yet to adopt cannot be dropped (Postgres refuses while it owns
 * anything, in any database), and is left for the create.
 */
export const dropOrphanSpareOwners = (admin: EngineClient) =>
  Effect.gen(function* () {
    const orphans = yield* admin.query<{ name: string }>(
      "spare",
      "select rolname as name from pg_roles r where starts_with(rolname, $1) and not exists (select 1 from pg_database d where d.datname = r.rolname)",
      [SPARE_PREFIX]
    )
    yield* Effect.forEach(orphans, ({ name }) => Effect.ignore(admin.query("spare", `drop role if exists ${quoteIdent(name)}`)), { discard: true })
  }).pipe(Effect.withSpan("SpareSql.dropOrphanSpareOwners"))
