import { quoteIdent, quoteLiteral } from "@scion/kit"

/** The part of a database's catalog a migration changes: user tables (columns, constraints, indexes) and enums. */
export interface Catalog {
  readonly tables: ReadonlyArray<CatalogTable>
  readonly enums: ReadonlyArray<CatalogEnum>
}

export interface CatalogTable {
  readonly schema: string
  readonly name: string
  readonly columns: ReadonlyArray<{ readonly name: string; readonly type: string; readonly not_null: boolean; readonly default: string | null }>
  /** Primary keys, uniques, checks, foreign keys and exclusions, with pg_get_constraintdef's text. */
  readonly constraints: ReadonlyArray<{ readonly name: string; readonly definition: string }>
  /** Indexes no constraint owns, with pg_get_indexdef's text. */
  readonly indexes: ReadonlyArray<{ readonly name: string; readonly definition: string }>
}

export interface CatalogEnum {
  readonly schema: string
  readonly name: string
  readonly labels: ReadonlyArray<string>
}

export type SchemaChangeKind =
  | "create_enum"
  | "add_enum_value"
  | "replace_enum"
  | "create_table"
  | "add_column"
  | "alter_column_type"
  | "set_default"
  | "drop_default"
  | "set_not_null"
  | "drop_not_null"
  | "drop_constraint"
  | "add_constraint"
  | "drop_index"
  | "create_index"
  | "drop_column"
  | "drop_table"
  | "drop_enum"

/** One change, as the statement that makes it. `table` is null for enums. */
export interface SchemaChange {
  readonly kind: SchemaChangeKind
  readonly schema: string
  readonly table: string | null
  readonly name: string
  readonly sql: string
}

const qualified = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`
const key = (schema: string, name: string) => `${schema}.${name}`
const byKey = <T extends { readonly schema: string; readonly name: string }>(items: ReadonlyArray<T>) => new Map(items.map((item) => [key(item.schema, item.name), item]))
const byName = <T extends { readonly name: string }>(items: ReadonlyArray<T>) => new Map(items.map((item) => [item.name, item]))

/** The order statements run in: types first, drops of what depends on others before what they depend on. */
const ORDER: ReadonlyArray<SchemaChangeKind> = [
  "create_enum",
  "add_enum_value",
  "replace_enum",
  "drop_index",
  "drop_constraint",
  "create_table",
  "add_column",
  "alter_column_type",
  "set_default",
  "drop_default",
  "set_not_null",
  "drop_not_null",
  "add_constraint",
  "create_index",
  "drop_column",
  "drop_table",
  "drop_enum"
]

const columnDefinition = (column: CatalogTable["columns"][number]) =>
  `${quoteIdent(column.name)} ${column.type}${column.default !== null ? ` default ${column.default}` : ""}${column.not_null ? " not null" : ""}`

/**
 * The statements that take `from` (the mirror) to `to` (the branch): what a migration run on the
 * branch did, as SQL to run on the source. Constraints and indexes are compared by name and
 * definition (a changed one is dropped and added again); columns by name.
 */
export const schemaDiff = (from: Catalog, to: Catalog): ReadonlyArray<SchemaChange> => {
  const changes: Array<SchemaChange> = []
  const add = (kind: SchemaChangeKind, schema: string, table: string | null, name: string, sql: string) => changes.push({ kind, schema, table, name, sql })

  const fromEnums = byKey(from.enums)
  const toEnums = byKey(to.enums)
  for (const [k, target] of toEnums) {
    const source = fromEnums.get(k)
    const type = qualified(target.schema, target.name)
    if (source === undefined) {
      add("create_enum", target.schema, null, target.name, `create type ${type} as enum (${target.labels.map(quoteLiteral).join(", ")});`)
      continue
    }
    const kept = target.labels.filter((label) => source.labels.includes(label))
    const onlyAdded = source.labels.every((label) => target.labels.includes(label)) && kept.every((label, i) => label === source.labels[i])
    if (!onlyAdded) {
      // Labels removed or reordered: ALTER TYPE cannot say it.
      add("replace_enum", target.schema, null, target.name, `drop type ${type}; create type ${type} as enum (${target.labels.map(quoteLiteral).join(", ")});`)
      continue
    }
    target.labels.forEach((label, i) => {
      if (source.labels.includes(label)) return
      const position = i === 0 ? ` before ${quoteLiteral(target.labels[1]!)}` : ` after ${quoteLiteral(target.labels[i - 1]!)}`
      add("add_enum_value", target.schema, null, target.name, `alter type ${type} add value ${quoteLiteral(label)}${target.labels.length > 1 ? position : ""};`)
    })
  }
  for (const [k, source] of fromEnums) if (!toEnums.has(k)) add("drop_enum", source.schema, null, source.name, `drop type ${qualified(source.schema, source.name)};`)

  const fromTables = byKey(from.tables)
  const toTables = byKey(to.tables)
  for (const [k, target] of toTables) {
    const table = qualified(target.schema, target.name)
    const source = fromTables.get(k) ?? { ...target, columns: [], constraints: [], indexes: [] }
    if (!fromTables.has(k)) add("create_table", target.schema, target.name, target.name, `create table ${table} (${target.columns.map(columnDefinition).join(", ")});`)
    else {
      const sourceColumns = byName(source.columns)
      for (const column of target.columns) {
        const was = sourceColumns.get(column.name)
        const col = quoteIdent(column.name)
        if (was === undefined) {
          add("add_column", target.schema, target.name, column.name, `alter table ${table} add column ${columnDefinition(column)};`)
          continue
        }
        if (was.type !== column.type) add("alter_column_type", target.schema, target.name, column.name, `alter table ${table} alter column ${col} type ${column.type};`)
        if (was.default !== column.default) {
          if (column.default === null) add("drop_default", target.schema, target.name, column.name, `alter table ${table} alter column ${col} drop default;`)
          else add("set_default", target.schema, target.name, column.name, `alter table ${table} alter column ${col} set default ${column.default};`)
        }
        if (was.not_null !== column.not_null) {
          add(column.not_null ? "set_not_null" : "drop_not_null", target.schema, target.name, column.name, `alter table ${table} alter column ${col} ${column.not_null ? "set" : "drop"} not null;`)
        }
      }
      const targetColumns = byName(target.columns)
      for (const column of source.columns) {
        if (!targetColumns.has(column.name)) add("drop_column", target.schema, target.name, column.name, `alter table ${table} drop column ${quoteIdent(column.name)};`)
      }
    }
    const sourceConstraints = byName(source.constraints)
    const targetConstraints = byName(target.constraints)
    for (const constraint of source.constraints) {
      if (targetConstraints.get(constraint.name)?.definition !== constraint.definition) {
        add("drop_constraint", target.schema, target.name, constraint.name, `alter table ${table} drop constraint ${quoteIdent(constraint.name)};`)
      }
    }
    for (const constraint of target.constraints) {
      if (sourceConstraints.get(constraint.name)?.definition !== constraint.definition) {
        add("add_constraint", target.schema, target.name, constraint.name, `alter table ${table} add constraint ${quoteIdent(constraint.name)} ${constraint.definition};`)
      }
    }
    const sourceIndexes = byName(source.indexes)
    const targetIndexes = byName(target.indexes)
    for (const index of source.indexes) {
      if (targetIndexes.get(index.name)?.definition !== index.definition) add("drop_index", target.schema, target.name, index.name, `drop index ${qualified(target.schema, index.name)};`)
    }
    for (const index of target.indexes) {
      if (sourceIndexes.get(index.name)?.definition !== index.definition) add("create_index", target.schema, target.name, index.name, `${index.definition};`)
    }
  }
  for (const [k, source] of fromTables) if (!toTables.has(k)) add("drop_table", source.schema, source.name, source.name, `drop table ${qualified(source.schema, source.name)};`)

  // Stable: by kind in ORDER, then in the order found (tables and enums come sorted from the catalog).
  return changes.map((change, i) => ({ change, i })).sort((a, b) => ORDER.indexOf(a.change.kind) - ORDER.indexOf(b.change.kind) || a.i - b.i).map(({ change }) => change)
}
