import { Effect, Option } from "effect"
import { quoteIdent } from "@scion/kit"
import { makeExtension, SOURCE_EXTENSIONS_SQL, type SourceExtension } from "../engine/MirrorSchema.js"
import type { PgSession, PgStepFailed } from "../engine/PgSession.js"
import type { SchemaChangesRepo } from "./SchemaChangesRepo.js"
import { MIRROR_OBJECTS_CURRENT_SQL } from "./MirrorFollowingSql.js"
import { MIRROR_TABLE_DEPENDENCIES_SQL, TABLE_DEPENDENCIES_SQL } from "./SnapshotSql.js"
import { publicationMembershipSql } from "./PublicationSql.js"
import { slotPosition } from "./SlotSql.js"
import { installMirrorFollowing, snapshotOf } from "./SourceCapture.js"

/**
 * Drift reconciliation (services/connector/README.md, "Schema changes"), for sources whose role
 * may not create event triggers: each monitor round, every mirrored table's catalog on the source
 * is compared with the snapshot the mirror last followed (columns by attnum, so a rename is a
 * rename) and the mirror is altered by the same diff the capture path applies.
 *
 * Without capture, DDL and rows are not ordered, so only additive changes (new columns, indexes,
 * constraints) are applied at once: rows written before them never mind an extra column. Anything
 * else (a drop, a rename, a type change, a dropped table) waits until the mirror has applied the
 * source up to the position where the change was first seen — older rows have the old shape — or
 * until the apply is failing, which means newer rows need the new shape. What cannot be applied
 * is answered as a drift for the monitor to quarantine, naming the table, the change and the remedy.
 */

interface Snapshot extends Record<string, unknown> {
  readonly relid: number
  readonly schema: string
  readonly name: string
  readonly columns: ReadonlyArray<Record<string, unknown> & { readonly attnum: number; readonly name: string }>
  readonly constraints: ReadonlyArray<Record<string, unknown> & { readonly name: string }>
  readonly indexes: ReadonlyArray<Record<string, unknown> & { readonly name: string }>
}

/** A change that could not be applied on the mirror. */
export interface Drift {
  readonly table: string
  readonly change: string
  readonly error: string
}

export interface ReconcileOutcome {
  readonly applied: number
  /** Changes seen that wait for the mirror to catch up (apply errors meanwhile are likely theirs). */
  readonly pending: number
  readonly drift: Option.Option<Drift>
  /**
   * The tables the mirror follows (`schema.table`) when a change applied renamed, moved or dropped
   * one: the engine's record of its mirrored tables follows, as capture mode's follower does (a
   * rollout drops the deselected tables by that record).
   */
  readonly mirroredTables: Option.Option<ReadonlyArray<string>>
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * A column without the value its ADD COLUMN gave the rows already there (`missing`): that matters
 * only when the column is added; the source drops it when a rewrite fills the rows, which changes
 * nothing the mirror follows.
 */
const withoutMissing = (column: Record<string, unknown> | undefined) => {
  if (column === undefined) return undefined
  const { missing: _, ...rest } = column
  return rest
}

/** Two snapshots alike in all the mirror follows. */
const sameTable = (a: Snapshot, b: Snapshot) => same({ ...a, columns: a.columns.map(withoutMissing) }, { ...b, columns: b.columns.map(withoutMissing) })

const byKey = <T extends Record<string, unknown>>(items: ReadonlyArray<T>, key: keyof T) => new Map(items.map((i) => [String(i[key]), i]))

/**
 * Only additions that no row older than them can refuse: every column, constraint and index the
 * mirror follows is still there, unchanged, and nothing added constrains rows. A new check,
 * unique, exclusion or foreign key constraint (or unique index) waits like any other change: a
 * migration that fixes rows and then constrains them would otherwise meet, on a lagging mirror,
 * the rows it had not fixed yet.
 */
export const isAdditive = (prev: Snapshot, next: Snapshot) => {
  if (prev.schema !== next.schema || prev.name !== next.name) return false
  const columns = byKey(next.columns, "attnum")
  const constraints = byKey(next.constraints, "name")
  const indexes = byKey(next.indexes, "name")
  const indexesBefore = byKey(prev.indexes, "name")
  return (
    prev.columns.every((c) => same(withoutMissing(c), withoutMissing(columns.get(String(c.attnum))))) &&
    prev.constraints.every((c) => same(c, constraints.get(c.name))) &&
    next.constraints.length === prev.constraints.length &&
    prev.indexes.every((i) => same(i, indexes.get(i.name))) &&
    next.indexes.every((i) => indexesBefore.has(i.name) || !/^CREATE UNIQUE INDEX /.test(String(i.definition)))
  )
}

/** What changed, in words, for the schema-changes list and a quarantine's detail. */
export const describeChange = (prev: Snapshot, next: Snapshot | null) => {
  if (next === null) return `table ${prev.schema}.${prev.name} dropped`
  const parts: Array<string> = []
  if (prev.schema !== next.schema || prev.name !== next.name) parts.push(`renamed to ${next.schema}.${next.name}`)
  const before = byKey(prev.columns, "attnum")
  const after = byKey(next.columns, "attnum")
  for (const [attnum, column] of after) {
    const old = before.get(attnum)
    if (old === undefined) parts.push(`column ${column.name} added`)
    else if (old.name !== column.name) parts.push(`column ${old.name} renamed to ${column.name}`)
    else if (!same(withoutMissing(old), withoutMissing(column))) parts.push(`column ${column.name} changed`)
  }
  for (const [attnum, column] of before) if (!after.has(attnum)) parts.push(`column ${column.name} dropped`)
  const constraintsBefore = byKey(prev.constraints, "name")
  for (const c of next.constraints) if (!same(constraintsBefore.get(c.name), c)) parts.push(`constraint ${c.name} added or changed`)
  for (const c of prev.constraints) if (!next.constraints.some((n) => n.name === c.name)) parts.push(`constraint ${c.name} dropped`)
  const indexesBefore = byKey(prev.indexes, "name")
  for (const i of next.indexes) if (!same(indexesBefore.get(i.name), i)) parts.push(`index ${i.name} added or changed`)
  for (const i of prev.indexes) if (!next.indexes.some((n) => n.name === i.name)) parts.push(`index ${i.name} dropped`)
  return parts.length === 0 ? "definition changed" : parts.join(", ")
}

/** A user-defined type a followed table uses, as `TABLE_DEPENDENCIES_SQL` reads it on either side. */
export interface TypeSnapshot extends Record<string, unknown> {
  readonly schema: string
  readonly name: string
  readonly kind: string
}

/** A function of the source's own a followed table calls, as `TABLE_DEPENDENCIES_SQL` reads it on either side. */
export interface FunctionSnapshot extends Record<string, unknown> {
  readonly schema: string
  readonly name: string
  readonly arguments: string
  readonly definition: string
}

/** What the mirror's followed tables depend on beside themselves: the types they use, the functions they call. */
export interface MirrorDependencies {
  readonly types: ReadonlyArray<TypeSnapshot>
  readonly functions: ReadonlyArray<FunctionSnapshot>
}

/**
 * The types the mirror's followed tables use and the functions they call, read on the caller's
 * short session with the tables (names printed as on the source: search_path is pg_catalog for
 * the read only).
 */
export const mirrorDependencies = (mirror: PgSession) =>
  Effect.gen(function* () {
    yield* mirror.query("set search_path = pg_catalog")
    const [row] = yield* mirror.query<Partial<MirrorDependencies>>(MIRROR_TABLE_DEPENDENCIES_SQL)
    yield* mirror.query("reset search_path")
    return { types: row?.types ?? [], functions: row?.functions ?? [] } satisfies MirrorDependencies
  })

const typeLabel = (type: TypeSnapshot) => `${type.schema}.${type.name}`

const functionLabel = (fn: FunctionSnapshot) => `${fn.schema}.${fn.name}(${fn.arguments})`

/** A definition without the oid each side knows it by (the mirror's `scion.mirror_types` maps a type's). */
const withoutOid = ({ oid: _, ...definition }: Record<string, unknown>) => definition

/** A table the mirror follows: the source's table by oid, the snapshot the mirror was last altered to. */
export interface FollowedTable extends Record<string, unknown> {
  readonly source_relid: string
  readonly snapshot: Snapshot
  readonly reconcile_after: string | null
}

/** The extensions the mirror has, read on the caller's short session with the tables it follows. */
export const mirrorExtensions = (mirror: PgSession) =>
  Effect.map(mirror.query<{ name: string }>("select extname as name from pg_extension order by 1"), (rows) => rows.map((row) => row.name))

/** The tables the mirror follows (its `scion.mirror_tables`), read on the caller's short session. */
export const followedTables = (mirror: PgSession) =>
  mirror.query<FollowedTable>("select source_relid::text as source_relid, snapshot, reconcile_after::text as reconcile_after from scion.mirror_tables order by source_relid")

/**
 * The schemas the mirror's selection holds whole (its `scion.selection`; `*` is every schema),
 * read on the caller's short session: a table made there on the source joins the mirror.
 */
export const wholeSchemas = (mirror: PgSession) =>
  Effect.map(mirror.query<{ schema_name: string }>("select schema_name from scion.selection order by 1"), (rows) => rows.map((row) => row.schema_name))

/**
 * Tables in `$1` (schemas held whole; `*` every schema) that the mirror does not follow (`$2`),
 * that can replicate updates and deletes (others wait for a replica-identity decision) and that
 * the role may publish (it owns them): the tables that join the mirror. Partitions replicate
 * through their root; an extension's tables are the extension's.
 */
const NEW_TABLES_SQL = `
  select c.oid::text as relid
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p') and not c.relispartition and c.relpersistence = 'p'
    and (n.nspname = any($1::text[]) or ('*' = any($1::text[]) and n.nspname not in ('scion', 'pg_catalog', 'information_schema') and n.nspname !~ '^pg_'))
    and c.oid <> all($2::oid[])
    and pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE')
    and not exists (select 1 from pg_catalog.pg_depend d where d.classid = 'pg_catalog.pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
    and (c.relreplident = 'f'
         or (c.relreplident = 'i' and exists (select 1 from pg_catalog.pg_index x where x.indrelid = c.oid and x.indisreplident))
         or (c.relreplident = 'd' and exists (select 1 from pg_catalog.pg_constraint k where k.conrelid = c.oid and k.contype = 'p')))
  order by c.oid`

/** A pg_lsn ("16/B374D848") as a number that orders like it. */
const lsnValue = (lsn: string) => {
  const [high = "0", low = "0"] = lsn.split("/")
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`)
}

/** The mirror has applied the source at least up to `position` (unknown → no). */
export const appliedPast = (confirmed: string | null, position: string) => confirmed !== null && lsnValue(confirmed) >= lsnValue(position)

interface Change {
  readonly table: FollowedTable
  readonly next: Snapshot | null
  readonly label: string
  readonly change: string
}

/**
 * One reconciliation pass. The mirror's side was read by the caller (`followed`, `erroring`: the
 * subscription's apply has been failing since the last round, so newer rows need a shape the
 * mirror lacks); the source is compared on `source`; the mirror is opened again only when
 * something changed, on short sessions (`onMirror` for Scion's bookkeeping, `onMirrorUnderCopyLock`
 * for the changes themselves, one transaction each), never while the source is being read: a
 * branch batch copies the mirror only once no session is connected to it. Answers the slot's lag
 * too (bytes of WAL, null when the slot is gone or invalidated), read on the same source session.
 */
export const reconcile = (input: {
  readonly connectorId: string
  readonly slotName: string
  readonly publicationName: string
  readonly subscriptionName: string
  /** The schemas the mirror holds whole (`wholeSchemas`): a table made there joins. */
  readonly wholeSchemas: ReadonlyArray<string>
  readonly followed: ReadonlyArray<FollowedTable>
  /** The mirror's extensions (`mirrorExtensions`): a change applied makes the source's missing ones first. */
  readonly mirrorExtensions: ReadonlyArray<string>
  /** What the mirror's tables use (`mirrorDependencies`): a type or function the source made or changed is made or changed first. */
  readonly mirrorDependencies: MirrorDependencies
  readonly erroring: boolean
  readonly source: PgSession
  readonly changes: SchemaChangesRepo
  readonly onMirror: <A, E>(use: (mirror: PgSession) => Effect.Effect<A, E>) => Effect.Effect<A, E | PgStepFailed>
  /** Runs `use` on the mirror under the engine's subscription lock, or answers None when a branch batch holds it (the changes wait for the next round). */
  readonly onMirrorUnderCopyLock: <A, E>(use: (mirror: PgSession) => Effect.Effect<A, E>) => Effect.Effect<Option.Option<A>, E | PgStepFailed>
}): Effect.Effect<ReconcileOutcome & { readonly lag: number | null }, PgStepFailed> =>
  Effect.gen(function* () {
    const { source } = input
    // A column's `missing` value is text the mirror parses back: ISO dates, floats in full.
    yield* source.query("set search_path = pg_catalog; set datestyle = 'ISO, YMD'; set intervalstyle = postgres; set extra_float_digits = 3")
    const { current, confirmed, lag } = yield* slotPosition(source, input.slotName)
    // What changed on the source, and what each change waits for.
    const marks: Array<FollowedTable> = []
    const toApply: Array<Change> = []
    let pending = 0
    for (const table of input.followed) {
      const next = (yield* snapshotOf(source, table.source_relid)) as Snapshot | null
      if (next !== null && sameTable(table.snapshot, next)) continue
      const change: Change = { table, next, label: `${table.snapshot.schema}.${table.snapshot.name}`, change: describeChange(table.snapshot, next) }
      if (next !== null && isAdditive(table.snapshot, next)) toApply.push(change)
      // First seen now: rows the mirror has yet to apply may still have the old shape.
      else if (table.reconcile_after === null) {
        marks.push(table)
        if (input.erroring) toApply.push(change)
        else pending++
      } else if (input.erroring || appliedPast(confirmed, table.reconcile_after)) toApply.push(change)
      else pending++
    }
    if (marks.length > 0) {
      yield* input.onMirror((mirror) =>
        mirror.query("update scion.mirror_tables set reconcile_after = $2::pg_lsn where source_relid = any($1::bigint[])", [marks.map((t) => t.source_relid), current])
      )
    }
    // A table made in a schema the mirror holds whole joins it, as capture's trigger joins it:
    // published, made on the mirror, copied by the subscription's refresh. A table's creation is
    // additive (no row older than it), so it joins at once.
    const joining: Array<Snapshot> = []
    if (input.wholeSchemas.length > 0) {
      const found = yield* source.query<{ relid: string }>(NEW_TABLES_SQL, [input.wholeSchemas, input.followed.map((t) => t.source_relid)])
      for (const { relid } of found) {
        const snapshot = (yield* snapshotOf(source, relid)) as Snapshot | null
        if (snapshot !== null) joining.push(snapshot)
      }
    }
    // Types are compared whole, every round: an enum's new label changes no table, yet the rows
    // that use it need it. Making or extending a type never breaks an older row, so they apply at once.
    // So are the source's functions the tables call: a new default may call one the mirror lacks.
    const [onSource] = yield* source.query<Partial<MirrorDependencies>>(TABLE_DEPENDENCIES_SQL, [
      [...input.followed.map((t) => t.source_relid), ...joining.map((snapshot) => String(snapshot.relid))]
    ])
    const onMirrorTypes = new Map(input.mirrorDependencies.types.map((type) => [typeLabel(type), withoutOid(type)]))
    const onMirrorFunctions = new Map(input.mirrorDependencies.functions.map((fn) => [functionLabel(fn), fn.definition]))
    // Types first: a function's signature may use one.
    const dependenciesToApply: ReadonlyArray<Dependency> = [
      ...(onSource?.types ?? []).filter((type) => !same(onMirrorTypes.get(typeLabel(type)), withoutOid(type))).map((type) => typeDependency(type, onMirrorTypes.has(typeLabel(type)))),
      ...(onSource?.functions ?? []).filter((fn) => onMirrorFunctions.get(functionLabel(fn)) !== fn.definition).map(functionDependency)
    ]
    const nothingMoved = Option.none<ReadonlyArray<string>>()
    if (toApply.length === 0 && dependenciesToApply.length === 0 && joining.length === 0) {
      return { applied: 0, pending, drift: Option.none<Drift>(), mirroredTables: nothingMoved, lag }
    }
    // Published first: the mirror's refresh copies what the publication has (a repeat finds it done).
    if (joining.length > 0) yield* source.query(publicationMembershipSql(input.publicationName, joining.map(qualifiedName), "add"))
    // Extensions the source has and the mirror lacks (one made since setup): a change may use
    // their types or functions, so they are made first. Only when changes apply: a round that
    // changes nothing does not open the mirror for them.
    const sourceExtensions = yield* source.query<SourceExtension>(SOURCE_EXTENSIONS_SQL)
    const missingExtensions = sourceExtensions.filter((extension) => !input.mirrorExtensions.includes(extension.name))
    // Each change in one transaction on the mirror: the table and the snapshot it follows move
    // together. The first that fails ends the pass (the lock's own failure, the engine
    // unreachable, ends the round: it is no drift).
    const done = yield* input.onMirrorUnderCopyLock((mirror) =>
      Effect.gen(function* () {
        // A mirror set up by an older connector may lack the functions below: install them first.
        const [objects] = yield* mirror.query<{ current: boolean }>(MIRROR_OBJECTS_CURRENT_SQL)
        if (objects?.current !== true) yield* installMirrorFollowing(mirror)
        for (const statement of missingExtensions.flatMap(makeExtension)) yield* mirror.query(statement)
        // Each type and function in a transaction of its own (an enum's new label is usable once committed).
        const dependencies = yield* ensureEach(mirror, dependenciesToApply)
        let failed = Option.map(dependencies.failure, ({ dependency, error }): Failure => ({ ...dependency, error }))
        const applied: Array<{ readonly change: Change; readonly actions: ReadonlyArray<string> }> = []
        for (const change of Option.isSome(failed) ? [] : toApply) {
          const outcome = yield* Effect.either(mirror.query("begin").pipe(Effect.zipRight(applyChange(mirror, change)), Effect.tap(() => mirror.query("commit"))))
          if (outcome._tag === "Left") {
            yield* mirror.query("rollback").pipe(Effect.ignore)
            failed = Option.some({ commandTag: "ALTER TABLE", label: change.label, change: change.change, error: outcome.left.reason })
            break
          }
          applied.push({ change, actions: outcome.right })
        }
        const joined: Array<{ readonly snapshot: Snapshot; readonly actions: ReadonlyArray<string> }> = []
        for (const snapshot of Option.isSome(failed) ? [] : joining) {
          const outcome = yield* Effect.either(mirror.query("begin").pipe(Effect.zipRight(makeTable(mirror, snapshot)), Effect.tap(() => mirror.query("commit"))))
          if (outcome._tag === "Left") {
            yield* mirror.query("rollback").pipe(Effect.ignore)
            failed = Option.some({ commandTag: "CREATE TABLE", label: `${snapshot.schema}.${snapshot.name}`, change: `table ${snapshot.schema}.${snapshot.name} made`, error: outcome.left.reason })
            break
          }
          joined.push({ snapshot, actions: outcome.right })
        }
        // The refresh starts the new tables' copy (outside a transaction, as ALTER SUBSCRIPTION … REFRESH must be).
        if (joined.length > 0) yield* mirror.query(`alter subscription ${quoteIdent(input.subscriptionName)} refresh publication with (copy_data = true)`)
        const mirroredTables = applied.some(({ change }) => movesTable(change)) || joined.length > 0
          ? Option.some((yield* mirror.query<{ path: string }>("select schema_name || '.' || table_name as path from scion.mirror_tables order by 1")).map((row) => row.path))
          : nothingMoved
        return { dependenciesApplied: dependencies.applied, applied, joined, failed, mirroredTables }
      })
    )
    // A branch batch is copying the mirror: the changes go in next round.
    if (Option.isNone(done)) return { applied: 0, pending: pending + toApply.length, drift: Option.none<Drift>(), mirroredTables: nothingMoved, lag }
    const { mirroredTables } = done.value
    for (const { dependency, actions } of done.value.dependenciesApplied) {
      if (actions.length === 0) continue
      yield* input.changes.recordReconciled(input.connectorId, { commandTag: dependency.commandTag, objectIdentity: dependency.label, status: "reconciled", actions, error: null })
      yield* Effect.logInfo("schema drift reconciled").pipe(Effect.annotateLogs({ connector_id: input.connectorId, object: dependency.label, change: dependency.change }))
    }
    for (const { change, actions } of done.value.applied) {
      yield* input.changes.recordReconciled(input.connectorId, {
        commandTag: change.next === null ? "DROP TABLE" : "ALTER TABLE",
        objectIdentity: change.label,
        status: "reconciled",
        actions,
        error: null
      })
      yield* Effect.logInfo("schema drift reconciled").pipe(Effect.annotateLogs({ connector_id: input.connectorId, table: change.label, change: change.change }))
    }
    for (const { snapshot, actions } of done.value.joined) {
      const label = `${snapshot.schema}.${snapshot.name}`
      yield* input.changes.recordReconciled(input.connectorId, { commandTag: "CREATE TABLE", objectIdentity: label, status: "reconciled", actions: [...actions, `copy ${qualifiedName(snapshot)} from the source`], error: null })
      yield* Effect.logInfo("schema drift reconciled").pipe(Effect.annotateLogs({ connector_id: input.connectorId, table: label, change: "table made" }))
    }
    const applied = done.value.applied.length + done.value.dependenciesApplied.length + done.value.joined.length
    if (Option.isNone(done.value.failed)) return { applied, pending, drift: Option.none<Drift>(), mirroredTables, lag }
    const failure = done.value.failed.value
    yield* input.changes.recordReconciled(input.connectorId, { commandTag: failure.commandTag, objectIdentity: failure.label, status: "failed", actions: [], error: failure.error })
    return { applied, pending, drift: Option.some({ table: failure.label, change: failure.change, error: failure.error }), mirroredTables, lag }
  }).pipe(Effect.withSpan("Reconciler.reconcile", { attributes: { connectorId: input.connectorId } }))

/** A type or function the mirror's tables need, made or followed by the mirror's `scion.<ensure>`. */
interface Dependency {
  readonly ensure: "ensure_type" | "ensure_function"
  readonly snapshot: TypeSnapshot | FunctionSnapshot
  /** For the schema-changes list and a drift's detail. */
  readonly commandTag: string
  readonly label: string
  readonly change: string
}

const typeDependency = (type: TypeSnapshot, present: boolean): Dependency => ({
  ensure: "ensure_type",
  snapshot: type,
  commandTag: `${present ? "ALTER" : "CREATE"} ${type.kind === "d" ? "DOMAIN" : "TYPE"}`,
  label: typeLabel(type),
  change: `type ${typeLabel(type)} made or changed`
})

const functionDependency = (fn: FunctionSnapshot): Dependency => ({
  ensure: "ensure_function",
  snapshot: fn,
  commandTag: "CREATE FUNCTION",
  label: functionLabel(fn),
  change: `function ${functionLabel(fn)} made or replaced`
})

/** What could not be applied on the mirror, as the schema-changes list and a drift name it. */
interface Failure {
  readonly commandTag: string
  readonly label: string
  readonly change: string
  readonly error: string
}

/** Each dependency on the mirror in turn, each its own statement, until one fails. */
const ensureEach = (mirror: PgSession, dependencies: ReadonlyArray<Dependency>) =>
  Effect.gen(function* () {
    const applied: Array<{ readonly dependency: Dependency; readonly actions: ReadonlyArray<string> }> = []
    for (const dependency of dependencies) {
      const outcome = yield* Effect.either(
        mirror.query<{ actions: ReadonlyArray<string> }>(`select scion.${dependency.ensure}($1::jsonb) as actions`, [JSON.stringify(dependency.snapshot)])
      )
      if (outcome._tag === "Left") return { applied, failure: Option.some({ dependency, error: outcome.left.reason }) }
      applied.push({ dependency, actions: outcome.right[0]?.actions ?? [] })
    }
    return { applied, failure: Option.none<{ readonly dependency: Dependency; readonly error: string }>() }
  })

/** A snapshot's table as SQL names it. */
const qualifiedName = (snapshot: Snapshot) => `${quoteIdent(snapshot.schema)}.${quoteIdent(snapshot.name)}`

/** A table that joins, made on the mirror inside the caller's transaction and followed from now on: the statements it ran. */
const makeTable = (mirror: PgSession, snapshot: Snapshot) =>
  Effect.gen(function* () {
    // Followed first: a foreign key to itself counts as one among mirrored tables.
    yield* mirror.query("insert into scion.mirror_tables (source_relid, schema_name, table_name, snapshot, log_id) values ($1::bigint, $2, $3, $4::jsonb, 0)", [
      String(snapshot.relid),
      snapshot.schema,
      snapshot.name,
      JSON.stringify(snapshot)
    ])
    const [row] = yield* mirror.query<{ actions: ReadonlyArray<string> }>("select scion.create_table($1::jsonb) as actions", [JSON.stringify(snapshot)])
    return row?.actions ?? []
  })

/** The change renames, moves or drops its table. */
const movesTable = ({ table, next }: Change) => next === null || next.schema !== table.snapshot.schema || next.name !== table.snapshot.name

/** One change on the mirror, inside the caller's transaction: the statements it ran. */
const applyChange = (mirror: PgSession, { table, next }: Change) =>
  next === null
    ? Effect.gen(function* () {
        const drop = `drop table if exists ${quoteIdent(table.snapshot.schema)}.${quoteIdent(table.snapshot.name)} cascade`
        yield* mirror.query(drop)
        yield* mirror.query("delete from scion.mirror_tables where source_relid = $1::bigint", [table.source_relid])
        yield* mirror.query("delete from scion.recopy_requests where source_relid = $1::bigint", [table.source_relid])
        return [drop] as ReadonlyArray<string>
      })
    : Effect.gen(function* () {
        const [row] = yield* mirror.query<{ actions: ReadonlyArray<string> }>("select scion.alter_table($1::jsonb, $2::jsonb) as actions", [
          JSON.stringify(table.snapshot),
          JSON.stringify(next)
        ])
        yield* mirror.query(
          "update scion.mirror_tables set schema_name = $2, table_name = $3, snapshot = $4::jsonb, reconcile_after = null where source_relid = $1::bigint",
          [table.source_relid, next.schema, next.name, JSON.stringify(next)]
        )
        return row?.actions ?? []
      })
