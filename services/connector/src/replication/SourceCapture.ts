import { Effect } from "effect"
import { quoteIdent } from "@scion/kit"
import type { PgSession, PgStepFailed } from "../engine/PgSession.js"
import { mirrorFollowingInstall } from "./MirrorFollowingSql.js"
import { TABLE_SNAPSHOT_SQL } from "./SnapshotSql.js"
import {
  CAPTURE_PUBLISHED_TABLES,
  HEARTBEAT_PRESENT_SQL,
  HEARTBEAT_TABLE,
  heartbeatInstall,
  SOURCE_CAPTURE_PRESENT_SQL,
  sourceCaptureInstall,
  sourceCaptureUninstall
} from "./SourceCaptureSql.js"

/** A query on an open source session, whatever its error type. */
export type SessionQuery<E> = <R extends Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<R>, E>

/** How a connector follows the source's schema: capture (event triggers) or reconciliation. */
export type SchemaFollowMode = "capture" | "reconcile"

/** A table's catalog snapshot as the source's `scion.table_snapshot` writes it. */
export interface TableSnapshot {
  readonly relid: number
  readonly schema: string
  readonly name: string
}

/** How a source database follows schema changes, and whether it carries the heartbeat. */
export interface CapturePlan {
  readonly mode: SchemaFollowMode
  readonly heartbeat: boolean
}

/**
 * Decides and prepares capture on a source database: a role that may create event triggers
 * (a superuser) installs the capture objects; a DBA may have installed them already (the grant
 * script's section); otherwise the connector follows the schema by reconciliation, with the
 * heartbeat alone where the role may create a schema.
 */
export const prepareCapture = (source: PgSession): Effect.Effect<CapturePlan, PgStepFailed> =>
  Effect.gen(function* () {
    const [present] = yield* source.query<{ present: boolean }>(SOURCE_CAPTURE_PRESENT_SQL)
    const [role] = yield* source.query<{ superuser: boolean }>("select rolsuper as superuser from pg_roles where rolname = current_user")
    if (role?.superuser === true) {
      // One transaction: a half-installed capture is never left behind.
      yield* inTransaction(source, sourceCaptureInstall)
      return { mode: "capture", heartbeat: true }
    }
    if (present?.present === true) return { mode: "capture", heartbeat: true }
    const [heartbeat] = yield* source.query<{ present: boolean; can_create: boolean }>(HEARTBEAT_PRESENT_SQL)
    if (heartbeat?.present !== true && heartbeat?.can_create === true) yield* inTransaction(source, heartbeatInstall)
    return { mode: "reconcile", heartbeat: heartbeat?.present === true || heartbeat?.can_create === true }
  })

const inTransaction = (session: PgSession, statements: ReadonlyArray<string>) =>
  session.query(`begin; ${statements.join(";\n")}; commit`).pipe(Effect.tapError(() => session.query("rollback").pipe(Effect.ignore)))

/** The publication's tables: the mirrored tables, plus the capture log and the heartbeat. */
export const publishedTables = (tables: ReadonlyArray<string>, plan: CapturePlan) =>
  plan.mode === "capture" ? [...tables, ...CAPTURE_PUBLISHED_TABLES] : plan.heartbeat ? [...tables, HEARTBEAT_TABLE] : [...tables]

/** The heartbeat's table on the mirror (the subscription's target), for a connector that only reconciles. */
export const prepareMirrorHeartbeat = (mirror: PgSession) => inTransaction(mirror, heartbeatInstall)

/** Records which schemas the publication mirrors whole, so tables created there join it. */
export const recordPublicationScope = (source: PgSession, publication: string, wholeSchemas: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* source.query("delete from scion.publication_scope where publication = $1", [publication])
    for (const schema of wholeSchemas) {
      yield* source.query("insert into scion.publication_scope (publication, schema_name) values ($1, $2) on conflict do nothing", [publication, schema])
    }
  })

/** A table's snapshot read on the source (null when the table is gone); the session's search_path is pg_catalog. */
export const snapshotOf = <E>(source: { readonly query: SessionQuery<E> }, oid: string) =>
  Effect.map(source.query<{ snapshot: (TableSnapshot & Record<string, unknown>) | null }>(TABLE_SNAPSHOT_SQL, [oid]), ([row]) => row?.snapshot ?? null)

/**
 * The snapshots of the mirrored tables and, when capturing, the log position they are current
 * at. Read directly (not through scion.table_snapshot), so reconciliation needs nothing on the source.
 */
export const readSnapshots = (source: PgSession, tables: ReadonlyArray<string>, mode: SchemaFollowMode) =>
  Effect.gen(function* () {
    yield* source.query("set search_path = pg_catalog")
    const [position] = mode === "capture" ? yield* source.query<{ position: string }>("select coalesce(max(id), 0)::text as position from scion.schema_log") : []
    const snapshots: Array<TableSnapshot & Record<string, unknown>> = []
    for (const table of tables) {
      const [row] = yield* source.query<{ oid: string }>("select $1::regclass::oid::text as oid", [table])
      const snapshot = row === undefined ? null : yield* snapshotOf(source, row.oid)
      if (snapshot !== null) snapshots.push(snapshot)
    }
    return { position: position?.position ?? "0", snapshots }
  })

/**
 * Scion's objects on the mirror (idempotent, one transaction): the replicated log with its apply
 * trigger and the functions that make and alter tables and types, which the schema step's own
 * DDL uses too. Installed before the mirror's tables are made.
 */
export const installMirrorFollowing = (mirror: PgSession) => inTransaction(mirror, mirrorFollowingInstall)

/**
 * Makes the mirror follow captured changes (its objects installed: `installMirrorFollowing`): the
 * map of mirrored tables (kept where it exists: the mirror may still have changes of them to
 * apply), the schemas mirrored whole, and the log position of the first setup (older entries are history).
 */
export const prepareMirror = (
  mirror: PgSession,
  input: { readonly position: string; readonly snapshots: ReadonlyArray<TableSnapshot>; readonly wholeSchemas: ReadonlyArray<string>; readonly tables: ReadonlyArray<string> }
) =>
  Effect.gen(function* () {
    yield* mirror.query("insert into scion.apply_state (setup_log_id) values ($1) on conflict do nothing", [input.position])
    for (const snapshot of input.snapshots) {
      yield* mirror.query(
        `insert into scion.mirror_tables (source_relid, schema_name, table_name, snapshot, log_id) values ($1, $2, $3, $4, $5)
         on conflict (source_relid) do nothing`,
        [snapshot.relid, snapshot.schema, snapshot.name, JSON.stringify(snapshot), input.position]
      )
    }
    // Tables the selection no longer holds leave the map (the rollout drops them from the mirror).
    const keep = input.snapshots.map((s) => s.relid)
    yield* mirror.query("delete from scion.mirror_tables where not (source_relid = any($1::bigint[]))", [keep])
    yield* mirror.query("delete from scion.selection")
    for (const schema of input.wholeSchemas) yield* mirror.query("insert into scion.selection (schema_name) values ($1)", [schema])
  })

/**
 * What became of Scion's capture objects (log, heartbeat, event triggers) on a source database
 * when a connector let go of them: none there; kept for other connectors; removed; or left
 * installed because an administrator installed them (the grant script) and the connector's role
 * may not drop what it does not own — event triggers belong to a superuser.
 */
export type CaptureRelease = "none" | "kept" | "removed" | "left_installed"

/** Whether the session's role may drop the capture objects: it owns (or is a member of the owner of) the event triggers and the `scion` schema. */
const MAY_UNINSTALL_CAPTURE = `
select not exists (select 1 from pg_event_trigger e where e.evtname in ('scion_capture_ddl', 'scion_capture_drop', 'scion_capture_rewrite') and not pg_has_role(current_user, e.evtowner, 'USAGE'))
   and not exists (select 1 from pg_namespace n where n.nspname = 'scion' and not pg_has_role(current_user, n.nspowner, 'USAGE')) as may`

/**
 * Undoes a connector's capture on a source database: its scope and heartbeat, and the capture
 * objects themselves when no other publication uses them any more and the role may drop them.
 */
export const releaseCapture = <E>(source: { readonly query: SessionQuery<E> }, publication: string, connectorId: string) =>
  Effect.gen(function* () {
    const [present] = yield* source.query<{ log: boolean; heartbeat: boolean }>(
      "select to_regclass('scion.schema_log') is not null as log, to_regclass('scion.heartbeat') is not null as heartbeat"
    )
    if (present?.heartbeat !== true) return "none" satisfies CaptureRelease
    if (present.log) yield* source.query("delete from scion.publication_scope where publication = $1", [publication])
    yield* source.query("delete from scion.heartbeat where connector_id = $1", [connectorId])
    const [others] = yield* source.query<{ n: number }>(
      `select count(*)::int as n from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid
       where pr.prrelid = 'scion.heartbeat'::regclass and p.pubname <> $1`,
      [publication]
    )
    if ((others?.n ?? 0) > 0) return "kept" satisfies CaptureRelease
    const [permitted] = yield* source.query<{ may: boolean }>(MAY_UNINSTALL_CAPTURE)
    if (permitted?.may !== true) return "left_installed" satisfies CaptureRelease
    yield* source.query(`begin; ${sourceCaptureUninstall.join(";\n")}; commit`).pipe(Effect.tapError(() => source.query("rollback").pipe(Effect.ignore)))
    return "removed" satisfies CaptureRelease
  })

/** The heartbeat the mirror receives through the publication: how fresh its data is. */
export const writeHeartbeat = (source: PgSession, connectorId: string) =>
  source.query(
    `insert into scion.heartbeat (connector_id, at, lsn) values ($1, now(), pg_current_wal_lsn())
     on conflict (connector_id) do update set at = excluded.at, lsn = excluded.lsn`,
    [connectorId]
  )

export const qualifiedPath = (path: string) => {
  const [, schema, name] = path.split(".")
  return `${quoteIdent(schema!)}.${quoteIdent(name!)}`
}
