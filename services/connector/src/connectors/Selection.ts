import { Either } from "effect"
import type { SchemaStructure } from "./SchemaIntrospection.js"
import { structureOf } from "./SchemaIntrospection.js"

/** At most this many paths in one selection. */
export const MAX_SELECTED_PATHS = 1000

/**
 * Resolves `selected_paths` against the discovered structure (pure). Forms: `*` alone (everything),
 * `db.*`, `db.schema.*`, `db.schema.table`; names are matched exactly (case-sensitive, as Postgres
 * stores them) and a name containing a dot can only be reached by a wildcard of its parent. Every
 * path must match something discovered. Foreign-key targets are not added: what is named is what
 * is selected. Answers the paths (trimmed, duplicates dropped, in the caller's order) and the
 * pruned structure, or a message for the 400.
 */
export const resolveSelection = (
  structure: SchemaStructure,
  input: ReadonlyArray<string>
): Either.Either<{ readonly paths: ReadonlyArray<string>; readonly selected: SchemaStructure }, string> => {
  if (input.length === 0) return Either.left("selected_paths must not be empty: send [\"*\"] or database.schema.table paths")
  if (input.length > MAX_SELECTED_PATHS) return Either.left(`selected_paths may hold at most ${MAX_SELECTED_PATHS} paths`)
  const paths = [...new Set(input.map((p) => p.trim()))]
  if (paths.includes("*")) {
    return paths.length === 1 ? Either.right({ paths, selected: structure }) : Either.left("* selects everything and must be the only path")
  }
  const wanted = new Set<string>()
  for (const path of paths) {
    const parts = path.split(".")
    const invalid = parts.some((p) => p === "") || parts.length < 2 || parts.length > 3 || (parts.length === 2 && parts[1] !== "*") || parts.slice(0, -1).includes("*")
    if (invalid) return Either.left(`selected path ${JSON.stringify(path)} is invalid: use *, database.*, database.schema.* or database.schema.table`)
    const [db, schema, table] = parts as [string, string, string | undefined]
    const database = structure.databases.find((d) => d.name === db)
    if (database === undefined) return Either.left(`selected path ${JSON.stringify(path)} names database ${JSON.stringify(db)}, which discovery did not find`)
    if (schema === "*") {
      database.schemas.forEach((s) => s.tables.forEach((t) => wanted.add(t.path)))
      continue
    }
    const found = database.schemas.find((s) => s.name === schema)
    if (found === undefined) return Either.left(`selected path ${JSON.stringify(path)} names schema ${JSON.stringify(`${db}.${schema}`)}, which discovery did not find`)
    if (table === "*") {
      found.tables.forEach((t) => wanted.add(t.path))
      continue
    }
    const named = found.tables.find((t) => t.name === table)
    if (named === undefined) return Either.left(`selected path ${JSON.stringify(path)} names a table discovery did not find`)
    wanted.add(named.path)
  }
  const databases = structure.databases
    .map((d) => ({ ...d, schemas: d.schemas.map((s) => ({ ...s, tables: s.tables.filter((t) => wanted.has(t.path)) })).filter((s) => s.tables.length > 0) }))
    .filter((d) => d.schemas.length > 0)
  return Either.right({ paths, selected: structureOf(databases) })
}
