import { SqlClient } from "@effect/sql"
import { Effect, Either, Option } from "effect"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { preflightAfterDiscovery } from "../connectors/ReplicaIdentity.js"
import { type DiscoveredDatabase, type DiscoveredSchema, isStructure, SourceIntrospector, structureHash, structureOf, tablesOf } from "../connectors/SchemaIntrospection.js"
import { resolveSelection } from "../connectors/Selection.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"

/** The source's structure read again for the connector's database; the selection follows it where it still resolves. */
export const refreshStructure = (connectorId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ConnectorsRepo
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
        const locked = yield* repo.lockStructure(connectorId)
        if (Option.isNone(locked)) return
        const row = locked.value
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
        yield* repo.recordStructure(connectorId, { structure, hash, version, preflight, selected: Either.isRight(resolved) ? Option.some(resolved.right.selected) : Option.none() })
      })
    )
  }).pipe(Effect.withSpan("StructureRefresh.refreshStructure", { attributes: { connectorId } }))
