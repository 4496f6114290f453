import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import { preflightAfterDiscovery } from "../connectors/ReplicaIdentity.js"
import { type DiscoveredDatabase, type DiscoveredSchema, isStructure, SourceIntrospector, structureHash, structureOf, tablesOf } from "../connectors/SchemaIntrospection.js"
import { resolveSelection } from "../connectors/Selection.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"

/** The source's structure read again for the connector's database; the selection follows it where it still resolves. */
export const refreshStructure = (connectorId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const introspector = yield* SourceIntrospector
    const details = yield* storedPostgresDetails(connectorId)
    const database = yield* Effect.scoped(
      Effect.gen(function* () {
        const session = yield* introspector.open(details, details.password)
        const schemas: Array<DiscoveredSchema> = []
        for (const name of yield* session.schemas) schemas.push(yield* session.readSchema(name))
        return { name: details.database, schemas } satisfies DiscoveredDatabase
      })
    )
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const [row] = yield* sql<{
          readonly schema_structure: unknown
          readonly schema_hash: string | null
          readonly schema_version: number
          readonly selection_schema_version: number | null
          readonly selected_entity_paths: ReadonlyArray<string>
          readonly replica_identity_preflight: unknown
          readonly replica_identity_decisions_version: number
        }>`select schema_structure, schema_hash, schema_version, selection_schema_version, selected_entity_paths, replica_identity_preflight, replica_identity_decisions_version
           from connectors where id = ${connectorId} for update`
        if (row === undefined) return
        // The other databases of the details keep what discovery read; the order stays discovery's.
        const previous = isStructure(row.schema_structure) ? row.schema_structure.databases : []
        const structure = structureOf(previous.some((d) => d.name === database.name) ? previous.map((d) => (d.name === database.name ? database : d)) : [...previous, database])
        const hash = structureHash(structure)
        if (hash === row.schema_hash) return
        const version = row.schema_version + 1
        // A selection taken from the current schema stays current when every path still names
        // something; otherwise needs_reselection turns true (a selected table was dropped or renamed).
        const resolved = row.selection_schema_version === row.schema_version && row.selected_entity_paths.length > 0 ? resolveSelection(structure, row.selected_entity_paths) : Either.left("")
        const missingIdentity = tablesOf(structure).filter((t) => !t.has_replica_identity).map((t) => t.path)
        const preflight = preflightAfterDiscovery(missingIdentity, row.replica_identity_preflight, row.replica_identity_decisions_version)
        yield* sql`
          update connectors set schema_structure = ${JSON.stringify(structure)}::jsonb, schema_hash = ${hash}, schema_version = ${version},
            replica_identity_preflight = ${JSON.stringify(preflight)}::jsonb, last_discovered_at = now(), updated_at = now()
            ${Either.isRight(resolved) ? sql`, selected_schema_structure = ${JSON.stringify(resolved.right.selected)}::jsonb, selection_schema_version = ${version}` : sql``}
          where id = ${connectorId}`
      })
    )
  }).pipe(Effect.withSpan("StructureRefresh.refreshStructure", { attributes: { connectorId } }))
