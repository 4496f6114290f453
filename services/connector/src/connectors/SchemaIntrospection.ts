import { createHash } from "node:crypto"
import { Config, Context, Duration, Effect, Layer, Schema, type Scope } from "effect"
import type { PostgresDetails } from "./ConnectionDetails.js"
import { openSourceSession, sourceReason } from "./SourceConnection.js"

// ---------------------------------------------------------------------------------------------
// schema_structure: what discovery writes (services/connector/README.md, "schema_structure").
// ---------------------------------------------------------------------------------------------

export type ReplicaIdentity = "default" | "full" | "index" | "nothing"

export interface DiscoveredColumn {
  readonly name: string
  /** format_type(): `integer`, `character varying(20)`, `sales.order_status`, … */
  readonly type: string
  readonly nullable: boolean
  /** The default expression as Postgres prints it, or null. */
  readonly default: string | null
  /** `always` / `by_default` for identity columns, else null. */
  readonly identity: "always" | "by_default" | null
  /** The labels when the type is an enum, else null. */
  readonly enum_values: ReadonlyArray<string> | null
  /**
   * A masking method suggested by the column's name (maskingSuggestion), for branches' masking
   * rules: `email`, `hash` or `redact` on text columns, `null` on a nullable birth date; null when
   * the name says nothing.
   */
  readonly masking_suggestion: MaskingSuggestion | null
}

export type MaskingSuggestion = "email" | "hash" | "redact" | "null"

const TEXT_TYPE = /^(text|citext|character varying|character|varchar|char)\b/
/** Name patterns of personal or secret data, first match wins; names are compared lower-case. */
const MASKING_PATTERNS: ReadonlyArray<readonly [RegExp, "email" | "hash" | "redact"]> = [
  [/(^|_)e_?mail(_|$)|email/, "email"],
  [/(^|_)(password|passwd|pwd|secret|token|api_key|apikey|ssn|social_security|tax_id|passport|national_id|iban|card_number|credit_card|cc_number|cvv)(_|$)/, "redact"],
  [/(^|_)(phone|mobile|cell|telephone|tel|first_name|last_name|full_name|given_name|family_name|surname|maiden_name|street|address|address_line\d?|postcode|postal_code|zip|zip_code|birth_date|date_of_birth|dob|ip_address|ip)(_|$)/, "hash"]
]

/**
 * What a column's name suggests masking with (discovery's detection by name patterns). Text
 * columns get the pattern's method; a nullable non-text birth date `null`; anything else no
 * suggestion.
 */
export const maskingSuggestion = (name: string, type: string, nullable: boolean): MaskingSuggestion | null => {
  const lower = name.toLowerCase()
  const match = MASKING_PATTERNS.find(([pattern]) => pattern.test(lower))
  if (match === undefined) return null
  if (TEXT_TYPE.test(type)) return match[1]
  // Not text: only a birth date is worth nulling (a boolean email_verified is not personal data).
  return nullable && /(birth|dob)/.test(lower) ? "null" : null
}

export interface DiscoveredTable {
  readonly name: string
  /** `database.schema.table`: the key selections and replica-identity decisions use. */
  readonly path: string
  readonly kind: "table" | "partitioned_table"
  readonly columns: ReadonlyArray<DiscoveredColumn>
  readonly primary_key: ReadonlyArray<string> | null
  readonly unique_keys: ReadonlyArray<{ readonly name: string; readonly columns: ReadonlyArray<string> }>
  readonly foreign_keys: ReadonlyArray<{
    readonly name: string
    readonly columns: ReadonlyArray<string>
    readonly references: { readonly schema: string; readonly table: string; readonly columns: ReadonlyArray<string> }
  }>
  readonly replica_identity: ReplicaIdentity
  /** The index named by REPLICA IDENTITY USING INDEX, else null. */
  readonly replica_identity_index: string | null
  /** Whether logical replication can carry updates and deletes: full, index, or default with a primary key. */
  readonly has_replica_identity: boolean
  /** pg_class.reltuples; null when never analyzed. Not part of the version hash. */
  readonly estimated_rows: number | null
  /** pg_total_relation_size (table, indexes, TOAST). Not part of the version hash. */
  readonly size_bytes: number
}

export interface DiscoveredSchema {
  readonly name: string
  readonly tables: ReadonlyArray<DiscoveredTable>
}

export interface DiscoveredDatabase {
  readonly name: string
  readonly schemas: ReadonlyArray<DiscoveredSchema>
}

export interface SchemaStructure {
  readonly format: 1
  readonly databases: ReadonlyArray<DiscoveredDatabase>
  readonly totals: { readonly databases: number; readonly schemas: number; readonly tables: number; readonly columns: number }
}

export const structureOf = (databases: ReadonlyArray<DiscoveredDatabase>): SchemaStructure => {
  const schemas = databases.flatMap((d) => d.schemas)
  const tables = schemas.flatMap((s) => s.tables)
  return {
    format: 1,
    databases,
    totals: { databases: databases.length, schemas: schemas.length, tables: tables.length, columns: tables.reduce((n, t) => n + t.columns.length, 0) }
  }
}

/**
 * A stable digest of the structure: row estimates and sizes move with every write on the source,
 * so they are left out; everything else is in catalog order (collation "C"), so equal catalogs
 * give equal hashes.
 */
export const structureHash = (structure: SchemaStructure): string =>
  createHash("sha256")
    .update(JSON.stringify(structure, (key, value) => (key === "estimated_rows" || key === "size_bytes" ? undefined : value)))
    .digest("hex")

/** Every table of the structure, in order. */
export const tablesOf = (structure: SchemaStructure): ReadonlyArray<DiscoveredTable> =>
  structure.databases.flatMap((d) => d.schemas.flatMap((s) => s.tables))

/** What is stored as jsonb decoded back: discovery wrote it, so only the format is checked. */
export const isStructure = (value: unknown): value is SchemaStructure =>
  typeof value === "object" && value !== null && (value as { format?: unknown }).format === 1 && Array.isArray((value as { databases?: unknown }).databases)

/** A column discovery suggests masking, by its name: what EngineAccessService hands the branch unit. */
export interface SuggestedMasking {
  readonly schema: string
  readonly table: string
  readonly column: string
  readonly method: string
}

/** Discovery's masking suggestions in a (selected) structure, from its columns' hints. */
export const maskingSuggestionsOf = (structure: unknown): ReadonlyArray<SuggestedMasking> =>
  isStructure(structure)
    ? structure.databases.flatMap((database) =>
        database.schemas.flatMap((schema) =>
          schema.tables.flatMap((table) =>
            table.columns.flatMap((column) =>
              // Structures discovered before suggestions existed have none.
              column.masking_suggestion === undefined || column.masking_suggestion === null
                ? []
                : [{ schema: schema.name, table: table.name, column: column.name, method: column.masking_suggestion }]
            )
          )
        )
      )
    : []

// ---------------------------------------------------------------------------------------------
// Reading a source's catalog.
// ---------------------------------------------------------------------------------------------

/** The source could not be reached or read; the reason is safe to show (no credentials). */
export class SourceUnavailable extends Schema.TaggedError<SourceUnavailable>()("SourceUnavailable", { database: Schema.String, reason: Schema.String }) {
  override get message() {
    return `Database ${this.database} could not be read: ${this.reason}`
  }
}

// scion is Scion's own schema-change capture on the source (src/replication/SourceCaptureSql.ts).
const SYSTEM_SCHEMAS = `n.nspname not in ('pg_catalog', 'information_schema', 'scion') and n.nspname not like 'pg\\_toast%' and n.nspname not like 'pg\\_temp\\_%'`

const SCHEMAS_SQL = `select n.nspname as name from pg_namespace n where ${SYSTEM_SCHEMAS} order by n.nspname collate "C"`

// Ordinary and partitioned tables; partitions are reached through their parent.
const TABLES_SQL = `
select c.relname as name, c.relkind::text as kind, c.relreplident::text as replident,
       c.reltuples::float8 as reltuples, pg_total_relation_size(c.oid)::float8 as size,
       (select ic.relname from pg_index i join pg_class ic on ic.oid = i.indexrelid where i.indrelid = c.oid and i.indisreplident limit 1) as replident_index
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = $1 and c.relkind in ('r', 'p') and not c.relispartition
order by c.relname collate "C"`

const COLUMNS_SQL = `
select c.relname as table_name, a.attname as name, format_type(a.atttypid, a.atttypmod) as type, not a.attnotnull as nullable,
       pg_get_expr(d.adbin, d.adrelid) as default_expr, a.attidentity::text as identity,
       case when t.typtype = 'e' then array(select e.enumlabel::text from pg_enum e where e.enumtypid = t.oid order by e.enumsortorder) end as enum_values
from pg_attribute a
join pg_class c on c.oid = a.attrelid
join pg_namespace n on n.oid = c.relnamespace
join pg_type t on t.oid = a.atttypid
left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where n.nspname = $1 and c.relkind in ('r', 'p') and not c.relispartition and a.attnum > 0 and not a.attisdropped
order by c.relname collate "C", a.attnum`

const CONSTRAINTS_SQL = `
select c.relname as table_name, con.conname as name, con.contype::text as kind,
       array(select a.attname::text from unnest(con.conkey) with ordinality k(attnum, ord)
             join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum order by k.ord) as columns,
       fn.nspname as ref_schema, fc.relname as ref_table,
       array(select a.attname::text from unnest(con.confkey) with ordinality k(attnum, ord)
             join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.attnum order by k.ord) as ref_columns
from pg_constraint con
join pg_class c on c.oid = con.conrelid
join pg_namespace n on n.oid = c.relnamespace
left join pg_class fc on fc.oid = con.confrelid
left join pg_namespace fn on fn.oid = fc.relnamespace
where n.nspname = $1 and con.contype in ('p', 'u', 'f') and c.relkind in ('r', 'p') and not c.relispartition
order by c.relname collate "C", con.conname collate "C"`

interface TableRow extends Record<string, unknown> {
  readonly name: string
  readonly kind: string
  readonly replident: string
  readonly reltuples: number
  readonly size: number
  readonly replident_index: string | null
}
interface ColumnRow extends Record<string, unknown> {
  readonly table_name: string
  readonly name: string
  readonly type: string
  readonly nullable: boolean
  readonly default_expr: string | null
  readonly identity: string
  readonly enum_values: ReadonlyArray<string> | null
}
interface ConstraintRow extends Record<string, unknown> {
  readonly table_name: string
  readonly name: string
  readonly kind: string
  readonly columns: ReadonlyArray<string>
  readonly ref_schema: string | null
  readonly ref_table: string | null
  readonly ref_columns: ReadonlyArray<string>
}

const replicaIdentities: Record<string, ReplicaIdentity> = { d: "default", f: "full", i: "index", n: "nothing" }

/** The rows of one schema as the structure's tables (pure). */
export const tablesFromRows = (
  database: string,
  schema: string,
  rows: { readonly tables: ReadonlyArray<TableRow>; readonly columns: ReadonlyArray<ColumnRow>; readonly constraints: ReadonlyArray<ConstraintRow> }
): ReadonlyArray<DiscoveredTable> =>
  rows.tables.map((t) => {
    const constraints = rows.constraints.filter((c) => c.table_name === t.name)
    const primary = constraints.find((c) => c.kind === "p")
    const replicaIdentity = replicaIdentities[t.replident] ?? "default"
    return {
      name: t.name,
      path: `${database}.${schema}.${t.name}`,
      kind: t.kind === "p" ? "partitioned_table" : "table",
      columns: rows.columns
        .filter((c) => c.table_name === t.name)
        .map((c) => ({
          name: c.name,
          type: c.type,
          nullable: c.nullable,
          default: c.default_expr,
          identity: c.identity === "a" ? "always" : c.identity === "d" ? "by_default" : null,
          enum_values: c.enum_values,
          masking_suggestion: maskingSuggestion(c.name, c.type, c.nullable)
        })),
      primary_key: primary === undefined ? null : primary.columns,
      unique_keys: constraints.filter((c) => c.kind === "u").map((c) => ({ name: c.name, columns: c.columns })),
      foreign_keys: constraints
        .filter((c) => c.kind === "f")
        .map((c) => ({ name: c.name, columns: c.columns, references: { schema: c.ref_schema ?? "", table: c.ref_table ?? "", columns: c.ref_columns } })),
      replica_identity: replicaIdentity,
      replica_identity_index: t.replident_index,
      has_replica_identity: replicaIdentity === "full" || replicaIdentity === "index" || (replicaIdentity === "default" && primary !== undefined),
      estimated_rows: t.reltuples < 0 ? null : Math.round(t.reltuples),
      size_bytes: Math.round(t.size)
    }
  })

/** An open, read-only session on one source database. */
export interface SourceSession {
  readonly database: string
  readonly schemas: Effect.Effect<ReadonlyArray<string>, SourceUnavailable>
  readonly readSchema: (schema: string) => Effect.Effect<DiscoveredSchema, SourceUnavailable>
}

/**
 * Reads a PostgreSQL source's catalog: one connection per database, acquired and released in the
 * caller's scope, read-only, with connect and statement timeouts. The password is used for the
 * login only and never appears in an error.
 */
export class SourceIntrospector extends Context.Tag("@scion/connector/SourceIntrospector")<
  SourceIntrospector,
  { readonly open: (details: PostgresDetails, password: string) => Effect.Effect<SourceSession, SourceUnavailable, Scope.Scope> }
>() {
  static make(options: { readonly connectTimeout: Duration.DurationInput; readonly queryTimeout: Duration.DurationInput }): Context.Tag.Service<SourceIntrospector> {
    const connectMillis = Duration.toMillis(options.connectTimeout)
    const queryMillis = Duration.toMillis(options.queryTimeout)

    const open = (details: PostgresDetails, password: string) =>
      openSourceSession(details, password, { applicationName: "scion-discovery", connectMillis, queryMillis, readOnly: true }).pipe(
        Effect.mapError((failure) => new SourceUnavailable({ database: details.database, reason: sourceReason(failure) })),
        Effect.map((session): SourceSession => {
          const query = <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) =>
            session.query<R>(text, values).pipe(Effect.mapError((failure) => new SourceUnavailable({ database: details.database, reason: sourceReason(failure) })))
          return {
            database: details.database,
            schemas: Effect.map(query<{ name: string }>(SCHEMAS_SQL), (rows) => rows.map((r) => r.name)),
            readSchema: (schema) =>
              Effect.map(
                Effect.all({ tables: query<TableRow>(TABLES_SQL, [schema]), columns: query<ColumnRow>(COLUMNS_SQL, [schema]), constraints: query<ConstraintRow>(CONSTRAINTS_SQL, [schema]) }),
                (rows) => ({ name: schema, tables: tablesFromRows(details.database, schema, rows) })
              ).pipe(Effect.withSpan("SourceIntrospector.readSchema", { attributes: { database: details.database, schema } }))
          }
        }),
        Effect.withSpan("SourceIntrospector.open", { attributes: { host: details.host, port: details.port, database: details.database } })
      )

    return SourceIntrospector.of({ open })
  }

  /** The preflight timeouts (PREFLIGHT_CONNECT_TIMEOUT, default 5 s) and DISCOVERY_QUERY_TIMEOUT (default 60 s). */
  static readonly layerConfig: Layer.Layer<SourceIntrospector> = Layer.effect(
    SourceIntrospector,
    Effect.gen(function* () {
      const connectTimeout = yield* Config.duration("PREFLIGHT_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5)))
      const queryTimeout = yield* Config.duration("DISCOVERY_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(60)))
      return SourceIntrospector.make({ connectTimeout, queryTimeout })
    }).pipe(Effect.orDie)
  )
}
