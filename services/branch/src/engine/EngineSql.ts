import { connectPostgres, GENERATED_PASSWORD_SCRAM_ITERATIONS, pooledSession, type PostgresEndpoint, type PostgresPools, type PostgresSession, quoteIdent, quoteLiteral, scramVerifier, tlsWithoutVerification, warmPool } from "@scion/kit"
import { Duration, Effect, Redacted, Schema, type Scope } from "effect"
import type { MaskingRule } from "../domain/models.js"
import type { BranchingEngine } from "./Engines.js"

/** A statement on the engine failed, or the engine could not be reached. Worth another attempt. */
export class EngineFailure extends Schema.TaggedError<EngineFailure>()("EngineFailure", { step: Schema.String, message: Schema.String }) {}


export interface EngineClient {
  readonly query: <R extends Record<string, unknown> = Record<string, unknown>>(step: string, text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<R>, EngineFailure>
}

/** The engine's superuser on one of its databases: TLS (sslmode=require) and SCRAM. */
const superuserOn = (engine: BranchingEngine, database: string): PostgresEndpoint => ({
  host: engine.host,
  port: engine.port,
  database,
  user: engine.superuser.username,
  password: engine.superuser.password,
  ssl: tlsWithoutVerification
})

const clientOf = (session: PostgresSession): EngineClient => ({
  query: <R extends Record<string, unknown>>(step: string, text: string, values: ReadonlyArray<unknown> = []) =>
    session.query<R>(text, values).pipe(Effect.mapError((failure) => new EngineFailure({ step, message: failure.message })))
})

/** A connection of its own to one database of the engine as its superuser, for the life of the scope. */
export const connectEngine = (
  engine: BranchingEngine,
  database: string,
  options: { readonly connectTimeout?: Duration.DurationInput; readonly applicationName?: string } = {}
): Effect.Effect<EngineClient, EngineFailure, Scope.Scope> =>
  connectPostgres(superuserOn(engine, database), {
    applicationName: options.applicationName ?? "scion-branch",
    connectMillis: Duration.toMillis(options.connectTimeout ?? Duration.seconds(10))
  }).pipe(
    Effect.mapError((failure) => new EngineFailure({ step: "connect", message: `connecting to ${database} on ${engine.host}:${engine.port}: ${failure.message}` })),
    Effect.map(clientOf)
  )

/**
 * The application name of the Copier's sessions on a mirror (its pauses and resumes). Such a
 * session is only ever used by a batch holding the engine's copy lock, so one that a lock holder
 * finds idle on the mirror is another batch's, kept for its next pause: the holder ends it rather
 * than wait for it (see waitTemplateFree).
 */
export const MIRROR_SESSION_APPLICATION = "scion-branch-mirror"

/** A session of the Copier's on the mirror (MIRROR_SESSION_APPLICATION). */
export const connectMirror = (engine: BranchingEngine): Effect.Effect<EngineClient, EngineFailure, Scope.Scope> =>
  connectEngine(engine, engine.mirrorDatabase, { applicationName: MIRROR_SESSION_APPLICATION })

/** Sessions per engine in this process's pool of admin sessions (adminSession). */
export const ADMIN_SESSIONS = 8

/** The pool adminSession borrows from and warmAdminSessions fills (one per engine and process). */
const adminPool = { applicationName: "scion-branch", connectMillis: 10_000, max: ADMIN_SESSIONS }

/**
 * A session on the engine's `postgres` database as its superuser, borrowed from this process's pool
 * for the engine (PostgresPools, up to ADMIN_SESSIONS): a branch create runs several statements there,
 * and a TLS + SCRAM login costs more than they do. Session state (advisory locks, settings) must be
 * undone before the scope closes; a session whose statement failed is discarded.
 */
export const adminSession = (engine: BranchingEngine): Effect.Effect<EngineClient, EngineFailure, Scope.Scope | PostgresPools> =>
  pooledSession(superuserOn(engine, "postgres"), adminPool).pipe(
    Effect.mapError((failure) => new EngineFailure({ step: "connect", message: `connecting to postgres on ${engine.host}:${engine.port}: ${failure.message}` })),
    Effect.map(clientOf)
  )

/**
 * Sessions on a branch create's path to its copy: its copy batch's (lock, checks, pause
 * bookkeeping) and its copy's. (The role's, made beside the copy, costs the create no time.)
 */
const CREATE_ADMIN_SESSIONS = 2

/**
 * Logs in, ahead of a create's job, the admin sessions its copy waits for (see warmPool): idle
 * ones close after 30 s, so every create after a quiet spell would otherwise wait for the logins
 * at the start of its copy batch and of its copy. Never fails; nothing when the pool holds them.
 */
export const warmAdminSessions = (engine: BranchingEngine): Effect.Effect<void, never, PostgresPools> =>
  engine.host === ""
    ? Effect.void
    : warmPool(superuserOn(engine, "postgres"), adminPool, CREATE_ADMIN_SESSIONS).pipe(
        Effect.withSpan("EngineSql.warmAdminSessions")
      )

/**
 * Pauses the named subscriptions on a session connected to the mirror. A disabled subscription's
 * workers notice on their next loop; they are ended now (they are not restarted while it is
 * disabled, and resume from their replication origin when enabled).
 */
export const disableSubscriptions = (mirror: EngineClient, names: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    for (const name of names) yield* mirror.query("pause", `alter subscription ${quoteIdent(name)} disable`)
    yield* mirror.query(
      "pause",
      "select pg_terminate_backend(pid) from pg_stat_subscription s join pg_subscription p on p.oid = s.subid where p.subname = any($1) and s.pid is not null",
      [[...names]]
    )
  })

/** Resumes (ENABLE) the named subscriptions, on a session connected to the mirror. */
export const enableSubscriptions = (mirror: EngineClient, names: ReadonlyArray<string>) =>
  Effect.forEach(names, (name) => mirror.query("resume", `alter subscription ${quoteIdent(name)} enable`), { discard: true }).pipe(
    Effect.withSpan("EngineSql.enableSubscriptions")
  )

/**
 * Asks `count` (a query answering `n` and a description of what is left) every 5 ms until it
 * answers none; fails naming what is left once `timeout` has passed.
 */
const untilNoneLeft = (client: EngineClient, step: string, count: string, values: ReadonlyArray<unknown>, timeout: Duration.DurationInput, left: (what: string) => string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(timeout)
    while (true) {
      const [row] = yield* client.query<{ n: number; what: string | null }>(step, count, values)
      if ((row?.n ?? 0) === 0) return
      if (Date.now() > deadline) return yield* new EngineFailure({ step, message: left(row?.what ?? "?") })
      yield* Effect.sleep("5 millis")
    }
  })

/**
 * Waits, on a session connected to the mirror, until the named subscriptions' workers have exited:
 * until then a terminated worker may still commit the transaction it was applying. A worker leaves
 * pg_stat_subscription first and flushes its table counters after (Postgres runs its exit
 * callbacks last registered first), and only then leaves pg_stat_activity: the wait is for both, so
 * the counters a spare's fingerprint reads (SpareSql) include everything the worker applied. After
 * this the paused mirror's data and its counters no longer change. No apply worker of any other
 * subscription can be on the mirror while a copy is made (it would be a session on the template),
 * so every one on this database is waited for. Bounded.
 */
export const waitSubscriptionWorkersGone = (mirror: EngineClient, names: ReadonlyArray<string>, timeout: Duration.DurationInput) =>
  untilNoneLeft(
    mirror,
    "pause",
    `select count(*)::int as n, string_agg(what, ', ') as what from (
       select p.subname as what from pg_stat_subscription s join pg_subscription p on p.oid = s.subid where p.subname = any($1) and s.pid is not null
       union all
       select format('%s (pid %s)', backend_type, pid) from pg_stat_activity where datname = current_database() and backend_type like 'logical replication%worker'
     ) workers`,
    [[...names]],
    timeout,
    (what) => `the mirror's subscription workers (${what}) did not exit within ${Duration.format(Duration.decode(timeout))}`
  )

/**
 * Tables the connector copies again (its `scion.recopy_requests`, connector/README "Rows the
 * mirror cannot compute"): a change rewrote them on the source by the source's own values. Until
 * the copy starts the mirror holds its own values (`toCopyAgain`, with a copy that failed: the
 * table may be in part); once it has started, the table is empty or partial while the named
 * subscriptions' table sync copies it (`copying`, states `i` and `d`). A table that joins the
 * mirror (a roll-out's, one made on the source) is not waited for: a branch then has it as far as
 * it is copied, as it did before, where a roll-out's copy may run for hours.
 */
const TABLES_COPIED_AGAIN = `
  select string_agg(t.name, ', ' order by t.name) filter (where t.copy_started_at is null or t.error is not null) as to_copy_again,
         string_agg(t.name, ', ' order by t.name) filter (where t.copy_started_at is not null and t.error is null and t.state in ('i', 'd')) as copying
  from (select pg_catalog.format('%I.%I', m.schema_name, m.table_name) as name, r.copy_started_at, r.error,
               (select sr.srsubstate::text from pg_subscription_rel sr join pg_subscription s on s.oid = sr.srsubid
                where s.subname = any($1) and sr.srrelid = pg_catalog.to_regclass(pg_catalog.format('%I.%I', m.schema_name, m.table_name))) as state
        from scion.recopy_requests r join scion.mirror_tables m on m.source_relid = r.source_relid) t`

/** Whether the mirror has the connector's requests to copy tables again (a mirror of an older connector has none). */
const HAS_COPY_REQUESTS = "select pg_catalog.to_regclass('scion.recopy_requests') is not null and pg_catalog.to_regclass('scion.mirror_tables') is not null as present"

/** What keeps the paused mirror from being copied now (TABLES_COPIED_AGAIN), null where nothing does. */
export const tablesBeingCopied = (mirror: EngineClient, names: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const [requests] = yield* mirror.query<{ present: boolean }>("pause", HAS_COPY_REQUESTS)
    if (requests?.present !== true) return { toCopyAgain: null, copying: null }
    const [row] = yield* mirror.query<{ to_copy_again: string | null; copying: string | null }>("pause", TABLES_COPIED_AGAIN, [[...names]])
    return { toCopyAgain: row?.to_copy_again ?? null, copying: row?.copying ?? null }
  })

/**
 * Waits, the subscriptions running, until their table syncs have copied every table the connector
 * copies again (looking every 100 ms: a copy takes seconds to minutes); fails naming the tables
 * once `timeout` has passed.
 */
export const awaitTablesCopied = (mirror: EngineClient, names: ReadonlyArray<string>, timeout: Duration.DurationInput) =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(timeout)
    while (true) {
      const [row] = yield* mirror.query<{ copying: string | null }>("pause", TABLES_COPIED_AGAIN, [[...names]])
      if ((row?.copying ?? null) === null) return
      if (Date.now() > deadline) {
        return yield* new EngineFailure({
          step: "pause",
          message: `the mirror is still copying ${row?.copying} from the source after ${Duration.format(Duration.decode(timeout))}: a branch now would hold it in part; try again once it is copied`
        })
      }
      yield* Effect.sleep("100 millis")
    }
  }).pipe(Effect.withSpan("EngineSql.awaitTablesCopied"))

/**
 * Waits until no other session is connected to the mirror (a template copy refuses to start
 * otherwise): after DISABLE the subscriptions' apply workers exit within moments. A Copier session
 * idle on the mirror (MIRROR_SESSION_APPLICATION) is another replica's, kept from its last resume
 * for its next pause: it is ended, not waited for (that replica logs in again when it pauses; a
 * kept session lives up to BRANCH_MIRROR_SESSION_KEEP, which would otherwise hold this copy up).
 * Autovacuum workers are not waited for either: CREATE DATABASE ends those on its template itself
 * (it signals them and retries for up to 5 s), and one vacuuming a table the initial copy just
 * filled runs for minutes — waited for, it failed the first branch of a 3 GB mirror. They are
 * ended here first, which spares the copy its 100 ms retry. Bounded.
 */
export const waitTemplateFree = (client: EngineClient, mirror: string, timeout: Duration.DurationInput) =>
  // Ended once, before the wait: another batch keeps a session only from its own resume, which
  // it makes holding the copy lock this batch holds now, so none can appear meanwhile.
  client
    .query(
      "wait",
      `select pg_terminate_backend(pid) from pg_stat_activity
       where datname = $1 and pid <> pg_backend_pid() and ((application_name = $2 and state = 'idle') or backend_type = 'autovacuum worker')`,
      [mirror, MIRROR_SESSION_APPLICATION]
    )
    .pipe(
      Effect.zipRight(
        untilNoneLeft(
          client,
          "wait",
          `select count(*)::int as n, string_agg(distinct coalesce(backend_type, '?'), ', ') as what from pg_stat_activity
           where datname = $1 and pid <> pg_backend_pid() and backend_type is distinct from 'autovacuum worker'`,
          [mirror],
          timeout,
          (what) => `other sessions (${what}) stayed connected to the mirror database ${mirror}`
        )
      )
    )

export const databaseExists = (client: EngineClient, name: string) =>
  Effect.map(client.query<{ one: number }>("inspect", "select 1 as one from pg_database where datname = $1", [name]), (rows) => rows.length > 0)

export const roleExists = (client: EngineClient, name: string) =>
  Effect.map(client.query<{ one: number }>("inspect", "select 1 as one from pg_roles where rolname = $1", [name]), (rows) => rows.length > 0)

/**
 * A new database takes PUBLIC's default CONNECT and TEMP, and every branch role on the engine is
 * PUBLIC: revoked in the statement after the copy, not only in the grant a hundred milliseconds
 * later. Without waiting for its WAL flush (one round trip, inside the pause); the grant revokes
 * again and its commit is flushed.
 */
const closeToPublic = (client: EngineClient, name: string) =>
  client.query("copy", `begin; set local synchronous_commit = off; revoke all on database ${quoteIdent(name)} from public; commit`)

/** CREATE DATABASE … TEMPLATE mirror STRATEGY FILE_COPY, reflinking when the engine can. */
export const copyDatabase = (client: EngineClient, engine: BranchingEngine, name: string) =>
  Effect.gen(function* () {
    if (engine.fileCopyClone) yield* client.query("copy", "set file_copy_method = clone")
    yield* client.query("copy", `create database ${quoteIdent(name)} template ${quoteIdent(engine.mirrorDatabase)} strategy file_copy`).pipe(
      Effect.ensuring(engine.fileCopyClone ? Effect.ignore(client.query("copy", "reset file_copy_method")) : Effect.void)
    )
    yield* closeToPublic(client, name)
  }).pipe(Effect.withSpan("EngineSql.copyDatabase", { attributes: { database: name, clone: engine.fileCopyClone } }))

/** The branch's login role with the password's SCRAM verifier; an existing role gets the verifier again. */
export const ensureRole = (client: EngineClient, role: string, password: Redacted.Redacted<string>) =>
  Effect.gen(function* () {
    const verifier = quoteLiteral(yield* scramVerifier(Redacted.value(password), GENERATED_PASSWORD_SCRAM_ITERATIONS))
    const exists = yield* roleExists(client, role)
    yield* client.query(
      "role",
      exists
        ? `alter role ${quoteIdent(role)} with login password ${verifier}`
        : `create role ${quoteIdent(role)} with login nosuperuser nocreatedb nocreaterole noreplication password ${verifier}`
    )
  })

/** An object a copy brings that its branch's role is made the owner of (ALTER <kind> <name> OWNER TO). */
export interface OwnedObject {
  readonly kind: OwnedKind
  readonly name: string
}

const OWNED_KINDS = ["schema", "table", "sequence", "view", "materialized view", "foreign table", "type", "function", "procedure", "aggregate"] as const
type OwnedKind = (typeof OWNED_KINDS)[number]

/**
 * The objects a branch's role is made the owner of: listed on the paused mirror for every copy of
 * the pause, or walked by ownershipBlock in a copy (Scion's own `scion` schema left out: a copy
 * drops it first). Types: enums, domains, ranges (a range's multirange follows it; it cannot be
 * altered alone) and standalone composites. Names are quoted and schema-qualified by the
 * engine (format %I); a function's by its identity arguments, printed for the default search_path,
 * which the copy's session has too.
 */
const OWNED_OBJECTS = `
select 'schema' as kind, format('%I', n.nspname) as name, 0 as ord from pg_namespace n
where n.nspname not like 'pg\\_%' and n.nspname not in ('information_schema', 'scion')
union all
select case c.relkind when 'S' then 'sequence' when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' else 'table' end,
       format('%I.%I', n.nspname, c.relname), 1
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname not like 'pg\\_%' and n.nspname not in ('information_schema', 'scion') and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
  and not (c.relkind = 'S' and exists (select 1 from pg_depend d where d.objid = c.oid and d.classid = 'pg_class'::regclass and d.deptype in ('a', 'i')))
union all
select 'type', format('%I.%I', n.nspname, t.typname), 2 from pg_type t join pg_namespace n on n.oid = t.typnamespace
where n.nspname not like 'pg\\_%' and n.nspname not in ('information_schema', 'scion')
  and (t.typtype in ('e', 'd', 'r') or (t.typtype = 'c' and exists (select 1 from pg_class c where c.oid = t.typrelid and c.relkind = 'c')))
union all
select case p.prokind when 'p' then 'procedure' when 'a' then 'aggregate' else 'function' end,
       format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)), 3
from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname not like 'pg\\_%' and n.nspname not in ('information_schema', 'scion')
  and not exists (select 1 from pg_depend d where d.objid = p.oid and d.classid = 'pg_proc'::regclass and d.deptype = 'e')
order by 3, 2`

/**
 * The role gets everything the copy brought (the engine superuser's): every schema, table, view,
 * sequence, type and function — what OWNED_OBJECTS lists, searched in the copy itself when the pause
 * could not list it. REASSIGN OWNED cannot move objects of the bootstrap superuser, hence the
 * explicit ALTER … OWNER TO over the catalog.
 */
const ownershipBlock = (role: string) =>
  `do $scion$
declare r record; target text := ${quoteLiteral(role)};
begin
  for r in ${OWNED_OBJECTS}
  loop
    execute format('alter %s %s owner to %I', r.kind, r.name, target);
  end loop;
end
$scion$`

/**
 * The objects every copy of a pause will hold, read on the paused mirror (whose schema the
 * connector changes only under the engine's copy lock, which the batch holds until its copies are
 * made): a copy's readying then alters them without searching its own catalogs, whose pages a
 * reflink clone reads from disk (`pg_proc` whole, for the functions).
 */
export const listOwnedObjects = (mirror: EngineClient) =>
  mirror.query<{ kind: string; name: string }>("owners", OWNED_OBJECTS).pipe(
    Effect.flatMap((rows) =>
      Effect.forEach(rows, (row) =>
        (OWNED_KINDS as ReadonlyArray<string>).includes(row.kind)
          ? Effect.succeed<OwnedObject>({ kind: row.kind as OwnedKind, name: row.name })
          : Effect.fail(new EngineFailure({ step: "owners", message: `unexpected object kind ${row.kind}` }))
      )
    ),
    Effect.withSpan("EngineSql.listOwnedObjects")
  )

const ownershipStatements = (owned: ReadonlyArray<OwnedObject>, role: string) =>
  owned.map((o) => `alter ${o.kind} ${o.name} owner to ${quoteIdent(role)}`)

/** The statements that give `role` everything a copy brought: as listed, or searched in the copy (`owned` null). */
export const ownershipOf = (owned: ReadonlyArray<OwnedObject> | null, role: string) => (owned !== null ? ownershipStatements(owned, role) : [ownershipBlock(role)])

/**
 * Logical replication carries rows, not sequence values: the mirror's sequences stay where its
 * setup left them while its tables fill up, so a branch would hand out keys its rows already use.
 * At the cut, every sequence a column draws from — identity (pg_depend 'i'), serial / OWNED BY
 * ('a'), or a default calling nextval (the default depends on the sequence, 'n'), one sequence
 * shared by several columns too — is moved to the furthest value those columns hold: max for an
 * ascending sequence, min for a descending one; only forward (a sequence already past the data
 * stays), never for empty tables, within the sequence's bounds. Columns that cannot hold the
 * sequence's value as such (not an integer or numeric type, e.g. 'ord_' || nextval(…)) say nothing
 * about it and are left out. One DO block, part of readyBranchDatabase's and
 * readySnapshotDatabase's round trip; no data value leaves the engine (none can end up in a log
 * or an error).
 */
const ALIGN_SEQUENCES = `do $scion$
declare s record; probe text; v numeric; furthest numeric; at_value bigint; called boolean;
begin
  for s in
    with uses as (
      select d.objid as seq, d.refobjid as rel, d.refobjsubid as attnum from pg_depend d
      where d.classid = 'pg_class'::regclass and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i') and d.refobjsubid > 0
      union
      select d.refobjid, ad.adrelid, ad.adnum from pg_attrdef ad
      join pg_depend d on d.classid = 'pg_attrdef'::regclass and d.objid = ad.oid and d.refclassid = 'pg_class'::regclass and d.deptype = 'n'
    )
    select u.seq, q.seqincrement > 0 as ascending, q.seqmin, q.seqmax, format('%I.%I', sn.nspname, sc.relname) as seq_name,
           array_agg(format('select %s(%I)::numeric from %I.%I', case when q.seqincrement > 0 then 'max' else 'min' end, a.attname, tn.nspname, t.relname)) as probes
    from uses u
    join pg_sequence q on q.seqrelid = u.seq
    join pg_class sc on sc.oid = u.seq and sc.relkind = 'S'
    join pg_namespace sn on sn.oid = sc.relnamespace
    join pg_class t on t.oid = u.rel and t.relkind in ('r', 'p')
    join pg_namespace tn on tn.oid = t.relnamespace
    join pg_attribute a on a.attrelid = u.rel and a.attnum = u.attnum and not a.attisdropped
    join pg_type ty on ty.oid = a.atttypid
    where tn.nspname not like 'pg\\_%' and tn.nspname <> 'information_schema'
      and coalesce(nullif(ty.typbasetype, 0), ty.oid) in ('int2'::regtype::oid, 'int4'::regtype::oid, 'int8'::regtype::oid, 'numeric'::regtype::oid)
    group by u.seq, q.seqincrement, q.seqmin, q.seqmax, sn.nspname, sc.relname
  loop
    furthest := null;
    foreach probe in array s.probes loop
      execute probe into v;
      if v is not null then
        furthest := case when furthest is null then v when s.ascending then greatest(furthest, v) else least(furthest, v) end;
      end if;
    end loop;
    -- Empty tables: whatever the sequence gives next is free.
    continue when furthest is null;
    -- At its bound a (non-cycling) sequence says it is exhausted rather than reusing a key.
    furthest := least(greatest(case when s.ascending then ceil(furthest) else floor(furthest) end, s.seqmin), s.seqmax);
    execute format('select last_value, is_called from %s', s.seq_name) into at_value, called;
    -- Moved only when its next value could be one the data holds (never moved back).
    if (s.ascending and (at_value < furthest or (at_value = furthest and not called)))
       or (not s.ascending and (at_value > furthest or (at_value = furthest and not called))) then
      perform setval(s.seq::regclass, furthest::bigint, true);
    end if;
  end loop;
end
$scion$`

const textTypes = new Set(["text", "character varying", "character", "citext", "name"])

/**
 * Masks the branch's columns in place, deterministically (the same value masks to the same value
 * in every table and every branch, so joins on masked columns still match): hash →
 * h<md5 hex>, email → u<12 hex>@example.invalid (from the lower-cased address), redact →
 * REDACTED, null → NULL; values are cut to a varchar's length. Triggers and foreign-key checks
 * do not fire (session_replication_role = replica). Rules naming a column the branch does not
 * have are skipped and reported; hash, email and redact need a text column.
 */
export const applyMasking = (branch: EngineClient, rules: ReadonlyArray<MaskingRule>) =>
  (
    Effect.gen(function* () {
      const columns = yield* branch.query<{ schema: string; table: string; column: string; type: string; max: number | null }>(
        "mask",
        `select table_schema as schema, table_name as table, column_name as column, data_type as type, character_maximum_length as max
         from information_schema.columns where table_schema not in ('pg_catalog', 'information_schema')`
      )
      const byKey = new Map(columns.map((c) => [JSON.stringify([c.schema, c.table, c.column]), c]))
      const perTable = new Map<string, { schema: string; table: string; sets: Array<string> }>()
      const skipped: Array<string> = []
      const applied: Array<string> = []
      for (const rule of rules) {
        const column = byKey.get(JSON.stringify([rule.schema, rule.table, rule.column]))
        const label = `${rule.schema}.${rule.table}.${rule.column}`
        if (column === undefined) {
          skipped.push(label)
          continue
        }
        const c = quoteIdent(rule.column)
        const fit = (expr: string) => (column.max !== null ? `left(${expr}, ${column.max})` : expr)
        let expr: string
        if (rule.method === "null") expr = "null"
        else if (!textTypes.has(column.type)) {
          return yield* new EngineFailure({ step: "mask", message: `masking ${label} with ${rule.method} needs a text column; it is ${column.type} (use method null)` })
        } else if (rule.method === "hash") expr = fit(`'h' || md5(${c}::text)`)
        else if (rule.method === "email") expr = fit(`'u' || left(md5(lower(${c}::text)), 12) || '@example.invalid'`)
        else expr = fit(`case when ${c} is null then null else 'REDACTED' end`)
        const key = JSON.stringify([rule.schema, rule.table])
        const entry = perTable.get(key) ?? { schema: rule.schema, table: rule.table, sets: [] }
        entry.sets.push(`${c} = ${expr}`)
        perTable.set(key, entry)
        applied.push(label)
      }
      if (perTable.size > 0) {
        yield* branch.query("mask", "begin")
        yield* branch.query("mask", "set local session_replication_role = replica")
        for (const t of perTable.values()) {
          yield* branch.query("mask", `update ${quoteIdent(t.schema)}.${quoteIdent(t.table)} set ${t.sets.join(", ")}`)
        }
        yield* branch.query("mask", "commit")
      }
      return { applied, skipped }
    })
  ).pipe(Effect.withSpan("EngineSql.applyMasking", { attributes: { rules: rules.length } }))

/** Drops the branch's database (closing its sessions) and its role; absent ones are fine. */
export const dropBranch = (engine: BranchingEngine, database: string, role: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const admin = yield* adminSession(engine)
      yield* admin.query("drop", `drop database if exists ${quoteIdent(database)} with (force)`)
      yield* admin.query("drop", `drop role if exists ${quoteIdent(role)}`)
    })
  ).pipe(Effect.withSpan("EngineSql.dropBranch", { attributes: { database, role } }))

/** Drops a branch's database (closing its sessions), keeping its role: the first step of a reset. */
export const dropDatabase = (engine: BranchingEngine, database: string) =>
  Effect.scoped(Effect.flatMap(adminSession(engine), (admin) => admin.query("drop", `drop database if exists ${quoteIdent(database)} with (force)`))).pipe(
    Effect.asVoid,
    Effect.withSpan("EngineSql.dropDatabase", { attributes: { database } })
  )


/**
 * Whether a readying moves the copy's sequences past its rows: not when the copy was cut from a
 * mirror whose sequences the pause aligned (CopyMark.sequencesAligned), or from a readied snapshot.
 */
export interface ReadyOptions {
  readonly alignSequences: boolean
}

/** And the objects its role is to own, when the pause listed them (CopyMark.owned); else the copy's catalog is searched. */
export interface BranchReadyOptions extends ReadyOptions {
  readonly owned: ReadonlyArray<OwnedObject> | null
}

/**
 * Aligns the paused mirror's sequences (ALIGN_SEQUENCES), once for every copy of the pause: on a
 * reflink clone the same work reads every catalog page and index it touches from disk (the clone's
 * files share the mirror's blocks but not its page cache), on the mirror they are in memory.
 */
export const alignMirrorSequences = (mirror: EngineClient) =>
  mirror.query("align", ALIGN_SEQUENCES).pipe(Effect.asVoid, Effect.withSpan("EngineSql.alignMirrorSequences"))

/**
 * Readies a fresh copy for its role in one round trip and one transaction (a multi-statement
 * query: one commit, one WAL flush, so it is durable before the branch is reported ready), run on
 * a session in the copy: Scion's own `scion` schema goes (the branch holds the user's tables
 * only), the sequences are aligned before the role can get in, and the role is given the database
 * (CONNECT, CREATE, TEMP as its owner; nobody else may connect: branch roles never see each
 * other's branches) and everything in it. Every part is idempotent, so a redelivery repeats it.
 */
export const readyBranchDatabase = (branch: EngineClient, database: string, role: string, options: BranchReadyOptions) =>
  branch
    .query(
      "ready",
      [
        "drop schema if exists scion cascade",
        ...(options.alignSequences ? [ALIGN_SEQUENCES] : []),
        ...ownershipOf(options.owned, role),
        `alter database ${quoteIdent(database)} owner to ${quoteIdent(role)}`,
        `revoke all on database ${quoteIdent(database)} from public`
      ].join(";\n")
    )
    .pipe(Effect.asVoid, Effect.withSpan("EngineSql.readyBranchDatabase", { attributes: { database, role } }))

/**
 * A spare readied ahead (SpareSql.warmSpare: everything in it owned by a placeholder role, the
 * `scion` schema gone, the sequences aligned) becomes the branch's, without a session in it: the
 * role made beside the copy (it owns nothing yet) gives way to the placeholder, renamed to the
 * branch's role and given its password. One transaction on the admin session; role names and
 * passwords live in the cluster's shared catalogs, so the copy itself is not touched.
 */
export const adoptSpareOwner = (admin: EngineClient, spareOwner: string, role: string, password: Redacted.Redacted<string>) =>
  Effect.gen(function* () {
    const verifier = quoteLiteral(yield* scramVerifier(Redacted.value(password), GENERATED_PASSWORD_SCRAM_ITERATIONS))
    yield* admin
      .query(
        "ready",
        `begin;
         drop role if exists ${quoteIdent(role)};
         alter role ${quoteIdent(spareOwner)} rename to ${quoteIdent(role)};
         alter role ${quoteIdent(role)} with login password ${verifier};
         commit`
      )
      .pipe(Effect.tapError(() => Effect.ignore(admin.query("ready", "rollback"))))
  }).pipe(Effect.withSpan("EngineSql.adoptSpareOwner", { attributes: { role } }))

/**
 * A snapshot's copy, readied in one round trip and one transaction: Scion's `scion` schema goes
 * and the sequences are aligned (the branches copied from it own what they copy; nobody owns the
 * snapshot: a spare's placeholder owner gives what it owned back to the engine's superuser, and
 * goes). Idempotent.
 */
export const readySnapshotDatabase = (snapshot: EngineClient, options: ReadyOptions & { readonly spareOwner: string | null }) =>
  snapshot
    .query(
      "ready",
      [
        "drop schema if exists scion cascade",
        ...(options.alignSequences ? [ALIGN_SEQUENCES] : []),
        ...(options.spareOwner !== null ? [`reassign owned by ${quoteIdent(options.spareOwner)} to current_user`, `drop role ${quoteIdent(options.spareOwner)}`] : [])
      ].join(";\n")
    )
    .pipe(Effect.asVoid, Effect.withSpan("EngineSql.readySnapshotDatabase"))

/**
 * Seals a snapshot's database: a template nobody can connect to, so branches can be copied from it
 * concurrently and it never changes.
 */
export const sealSnapshotDatabase = (engine: BranchingEngine, database: string) =>
  Effect.scoped(
    Effect.flatMap(adminSession(engine), (admin) => admin.query("seal", `alter database ${quoteIdent(database)} with is_template true allow_connections false`))
  ).pipe(Effect.asVoid, Effect.withSpan("EngineSql.sealSnapshotDatabase", { attributes: { database } }))

/**
 * Opens a sealed snapshot database again, so a job redelivered after the seal (and before the
 * snapshot was recorded ready) can stamp it and seal it anew; an open or absent one is left as is.
 */
export const reopenSnapshotDatabase = (engine: BranchingEngine, database: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const admin = yield* adminSession(engine)
      const [row] = yield* admin.query<{ open: boolean }>("seal", "select datallowconn as open from pg_database where datname = $1", [database])
      if (row !== undefined && !row.open) yield* admin.query("seal", `alter database ${quoteIdent(database)} with is_template false allow_connections true`)
    })
  ).pipe(Effect.withSpan("EngineSql.reopenSnapshotDatabase", { attributes: { database } }))

/** Drops a snapshot's database (a template: unmarked first); an absent one is fine. */
export const dropSnapshotDatabase = (engine: BranchingEngine, database: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const admin = yield* adminSession(engine)
      if (!(yield* databaseExists(admin, database))) return
      yield* admin.query("drop", `alter database ${quoteIdent(database)} with is_template false`)
      yield* admin.query("drop", `drop database if exists ${quoteIdent(database)} with (force)`)
    })
  ).pipe(Effect.withSpan("EngineSql.dropSnapshotDatabase", { attributes: { database } }))

/**
 * A branch's database copied from a snapshot's (a template nobody connects to): no pause of the
 * mirror, and copies of one snapshot may run at once. Nothing to do when it exists already.
 */
export const copyFromSnapshot = (engine: BranchingEngine, snapshotDatabase: string, database: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const admin = yield* adminSession(engine)
      if (yield* databaseExists(admin, database)) return
      if (engine.fileCopyClone) yield* admin.query("copy", "set file_copy_method = clone")
      yield* admin.query("copy", `create database ${quoteIdent(database)} template ${quoteIdent(snapshotDatabase)} strategy file_copy`).pipe(
        Effect.ensuring(engine.fileCopyClone ? Effect.ignore(admin.query("copy", "reset file_copy_method")) : Effect.void)
      )
      yield* closeToPublic(admin, database)
    })
  ).pipe(Effect.withSpan("EngineSql.copyFromSnapshot", { attributes: { database, snapshotDatabase } }))
