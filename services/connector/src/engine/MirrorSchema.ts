import { Effect } from "effect"
import { quoteIdent, quoteLiteral } from "@scion/kit"
import { TABLE_DEPENDENCIES_SQL } from "../replication/SnapshotSql.js"

/**
 * The mirror's DDL, read from the source's catalog (ARCHITECTURE.md, "The branching engine"):
 * the source database's extensions, schemas, the user-defined types the tables use (enums, domains,
 * composites, ranges), the source's functions they call, sequences named by column defaults, columns with types,
 * defaults, identity and generated expressions, primary/unique/check/exclusion constraints,
 * indexes, and foreign keys among the mirrored tables only. The source session runs with
 * `search_path = pg_catalog`, so every name Postgres prints is schema-qualified.
 */

export interface TableRef {
  readonly schema: string
  readonly name: string
}

/** One mirrored table's DDL: `create` builds it with its keys and indexes; `foreignKeys` come after every table exists. */
export interface TableDdl {
  readonly table: TableRef
  readonly create: ReadonlyArray<string>
  readonly foreignKeys: ReadonlyArray<{ readonly name: string; readonly statement: string }>
}

export interface MirrorDdl {
  readonly schemas: ReadonlyArray<string>
  /** The source database's extensions (plpgsql aside): made first on the mirror, where the engine has them. */
  readonly extensions: ReadonlyArray<SourceExtension>
  /** Types (through the mirror's `scion.ensure_type`) and sequences, in dependency order, each guarded so a rerun changes nothing. */
  readonly prelude: ReadonlyArray<string>
  readonly tables: ReadonlyArray<TableDdl>
}

/** A type or object the mirror cannot reproduce; the message names it. */
export class UnsupportedDdl {
  readonly _tag = "UnsupportedDdl"
  constructor(readonly message: string) {}
}

export type SourceQuery = <R extends Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<R>, unknown>

export const qualified = (table: TableRef) => `${quoteIdent(table.schema)}.${quoteIdent(table.name)}`

/** An extension of the source database, and the schema it is in there. */
export interface SourceExtension extends Record<string, unknown> {
  readonly name: string
  readonly schema: string
}

/** The source database's extensions (plpgsql aside, which every database has). */
export const SOURCE_EXTENSIONS_SQL =
  "select e.extname as name, n.nspname as schema from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname <> 'plpgsql' order by e.extname"

/**
 * The statements that make a source extension on the mirror, in the schema the source has it in.
 * One the engine cannot make is left out with a warning on the mirror (a table or change that
 * needs it then fails, naming what is missing), so it never fails the rest.
 */
export const makeExtension = (extension: SourceExtension): ReadonlyArray<string> => [
  `create schema if not exists ${quoteIdent(extension.schema)}`,
  `do $scion$ begin create extension if not exists ${quoteIdent(extension.name)} with schema ${quoteIdent(extension.schema)};
   exception when others then raise warning 'scion: the source''s extension % could not be made on the mirror: %', ${quoteLiteral(extension.name)}, sqlerrm; end $scion$`
]

interface ColumnRow extends Record<string, unknown> {
  readonly name: string
  readonly type: string
  readonly not_null: boolean
  readonly default_expr: string | null
  readonly identity: string
  readonly generated: string
  readonly collation: string | null
}

const COLUMNS_SQL = `
  select a.attname as name, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
         pg_get_expr(d.adbin, d.adrelid) as default_expr, a.attidentity as identity, a.attgenerated as generated,
         case when a.attcollation <> t.typcollation and a.attcollation <> 0
              then (select quote_ident(n.nspname) || '.' || quote_ident(c.collname) from pg_collation c join pg_namespace n on n.oid = c.collnamespace where c.oid = a.attcollation)
         end as collation
  from pg_attribute a
  join pg_type t on t.oid = a.atttypid
  left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
  where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped
  order by a.attnum`

const CONSTRAINTS_SQL = `
  select c.conname as name, c.contype as kind, pg_get_constraintdef(c.oid) as definition,
         c.confrelid::regclass::text as referenced
  from pg_constraint c
  where c.conrelid = $1::regclass and c.contype in ('p', 'u', 'c', 'x', 'f')
  order by case c.contype when 'p' then 0 when 'u' then 1 when 'x' then 2 when 'c' then 3 else 4 end, c.conname`

const INDEXES_SQL = `
  select pg_get_indexdef(i.indexrelid) as definition
  from pg_index i
  where i.indrelid = $1::regclass
    and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid and c.conrelid = i.indrelid)
  order by i.indexrelid`

/** The regclass text Postgres prints for `nextval('…'::regclass)` defaults. */
const sequencesIn = (expression: string): ReadonlyArray<string> =>
  [...expression.matchAll(/nextval\('((?:[^']|'')+)'::regclass\)/g)].map((m) => m[1]!.replaceAll("''", "'"))

/**
 * Reads the DDL of `tables` from a source session. `query` runs on the source database the
 * tables live in; it is set to `search_path = pg_catalog` first.
 */
export const readMirrorDdl = (query: SourceQuery, tables: ReadonlyArray<TableRef>) =>
  Effect.gen(function* () {
    yield* query("set search_path = pg_catalog")
    // Foreign keys are kept among mirrored tables only: compare catalog oids, not printed names.
    const selectedOids = new Map<number, TableRef>()
    for (const table of tables) {
      const [row] = yield* query<{ oid: number }>("select $1::regclass::oid::int as oid", [qualified(table)])
      if (row !== undefined) selectedOids.set(row.oid, table)
    }

    const prelude: Array<string> = []
    // Extensions first, in the schemas the source has them in: a table's types (citext), defaults
    // (uuid_generate_v4()) and operator classes (gin_trgm_ops) may be theirs, and branches need
    // them to write. One the engine cannot make is left out with a warning on the mirror; a table
    // that needs it then fails, and the schema step names what the engine lacks.
    const extensions = yield* query<SourceExtension>(SOURCE_EXTENSIONS_SQL)
    for (const extension of extensions) prelude.push(...makeExtension(extension))
    // The user-defined types the tables use, in the order they must be made, as the same
    // snapshots captured and reconciled changes carry; the mirror's `scion.ensure_type` (installed
    // before the schema step's DDL) makes each, so setup and every later change agree on a type.
    // Then the source's own functions the tables call from defaults, generated columns, checks
    // and indexes (`scion.ensure_function`, as captured and reconciled changes make them).
    const [needed] = yield* query<{ types?: ReadonlyArray<unknown>; functions?: ReadonlyArray<unknown> }>(TABLE_DEPENDENCIES_SQL, [[...selectedOids.keys()]])
    for (const type of needed?.types ?? []) prelude.push(`select scion.ensure_type(${quoteLiteral(JSON.stringify(type))}::jsonb)`)
    for (const fn of needed?.functions ?? []) prelude.push(`select scion.ensure_function(${quoteLiteral(JSON.stringify(fn))}::jsonb)`)

    const ddl: Array<TableDdl> = []
    const schemas = new Set<string>()
    for (const table of tables) {
      const name = qualified(table)
      schemas.add(table.schema)
      const columns = yield* query<ColumnRow>(COLUMNS_SQL, [name])
      if (columns.length === 0) return yield* Effect.fail(new UnsupportedDdl(`table ${table.schema}.${table.name} no longer exists on the source (run discovery again)`))
      const definitions: Array<string> = []
      for (const column of columns) {
        let definition = `${quoteIdent(column.name)} ${column.type}`
        if (column.collation !== null) definition += ` collate ${column.collation}`
        if (column.generated === "s" || column.generated === "v") {
          definition += ` generated always as (${column.default_expr}) ${column.generated === "s" ? "stored" : "virtual"}`
        } else if (column.identity === "a" || column.identity === "d") {
          definition += ` generated ${column.identity === "a" ? "always" : "by default"} as identity`
        } else if (column.default_expr !== null) {
          for (const sequence of sequencesIn(column.default_expr)) {
            prelude.push(`create sequence if not exists ${sequence}`)
          }
          definition += ` default ${column.default_expr}`
        }
        if (column.not_null) definition += " not null"
        definitions.push(definition)
      }
      const constraints = yield* query<{ name: string; kind: string; definition: string; referenced: string | null }>(CONSTRAINTS_SQL, [name])
      const foreignKeys: Array<{ name: string; statement: string }> = []
      for (const constraint of constraints) {
        if (constraint.kind === "f") {
          const [target] = yield* query<{ oid: number }>("select confrelid::int as oid from pg_constraint where conrelid = $1::regclass and conname = $2", [name, constraint.name])
          // Only among mirrored tables: a key to a table left out of the selection is dropped.
          if (target !== undefined && selectedOids.has(target.oid)) {
            foreignKeys.push({ name: constraint.name, statement: `alter table ${name} add constraint ${quoteIdent(constraint.name)} ${constraint.definition}` })
          }
          continue
        }
        definitions.push(`constraint ${quoteIdent(constraint.name)} ${constraint.definition}`)
      }
      const indexes = yield* query<{ definition: string }>(INDEXES_SQL, [name])
      ddl.push({ table, create: [`create table ${name} (\n  ${definitions.join(",\n  ")}\n)`, ...indexes.map((i) => i.definition)], foreignKeys })
    }
    return {
      schemas: [...schemas],
      extensions,
      prelude: [...new Set(prelude)],
      tables: ddl
    } satisfies MirrorDdl
  })
