import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { BranchingEngineStatus, Byoc, Connector, IndexingStatus, ReplicationState } from "../domain/models.js"
import type { Envelope } from "../secrets/SecretStore.js"
import { maskingSuggestionsOf } from "./SchemaIntrospection.js"

/** The secret name of a connector's connection details in the secrets table. */
export const CONNECTION_DETAILS = "connection_details"

interface ConnectorRow {
  readonly id: string
  readonly org_id: string
  readonly project_id: string | null
  readonly name: string
  readonly service_name: string
  readonly connector_category: string
  readonly byoc: Byoc | null
  readonly use_environment: boolean
  readonly private_link_id: string | null
  readonly environment_id: string | null
  readonly source_provider: string | null
  readonly schema_structure: Record<string, unknown> | null
  readonly schema_version: number
  readonly selection_schema_version: number | null
  readonly selected_schema_version: number
  readonly last_indexed_version: number
  readonly selected_entity_paths: ReadonlyArray<string>
  readonly selected_schema_structure: Record<string, unknown> | null
  readonly indexing_status: IndexingStatus
  readonly branching_engine_status: BranchingEngineStatus
  readonly deletion_locked: boolean
  readonly delete_operation_id: string | null
  readonly setup_operation_id: string | null
  readonly replica_identity_preflight: Record<string, unknown> | null
  readonly replication: ReplicationState | null
  readonly created_by: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toConnector = (row: ConnectorRow): Connector => ({
  id: row.id,
  orgId: row.org_id,
  projectId: row.project_id,
  name: row.name,
  serviceName: row.service_name,
  connectorCategory: row.connector_category,
  byoc: row.byoc,
  useEnvironment: row.use_environment,
  privateLinkId: row.private_link_id,
  environmentId: row.environment_id,
  sourceProvider: row.source_provider,
  schemaStructure: row.schema_structure,
  schemaVersion: row.schema_version,
  selectionSchemaVersion: row.selection_schema_version,
  selectedSchemaVersion: row.selected_schema_version,
  lastIndexedVersion: row.last_indexed_version,
  selectedEntityPaths: row.selected_entity_paths,
  selectedSchemaStructure: row.selected_schema_structure,
  indexingStatus: row.indexing_status,
  branchingEngineStatus: row.branching_engine_status,
  deletionLocked: row.deletion_locked,
  deleteOperationId: row.delete_operation_id,
  setupOperationId: row.setup_operation_id,
  replicaIdentityPreflight: row.replica_identity_preflight,
  replication: row.replication,
  createdBy: row.created_by,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

export interface NewConnector {
  readonly id: string
  readonly orgId: string
  readonly projectId: string | null
  readonly name: string
  readonly serviceName: string
  readonly connectorCategory: string
  readonly byoc: Byoc | null
  readonly useEnvironment: boolean
  readonly privateLinkId: string | null
  readonly environmentId: string | null
  readonly sourceProvider: string | null
  readonly createdBy: string | null
}

/** Connectors and their encrypted connection details. SQL failures are defects here. */
export class ConnectorsRepo extends Effect.Service<ConnectorsRepo>()("@scion/connector/ConnectorsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    return {
      // --- Discovery, selection and decisions (services/connector/src/connectors/Discovery.ts) ---

      /** The connector's current discovery operation, the row locked until the transaction ends. */
      lockDiscoveryPointer: (connectorId: string) =>
        sql<{ readonly discovery_operation_id: string | null }>`select discovery_operation_id from connectors where id = ${connectorId} for update`.pipe(
          Effect.map((rows) => rows[0]?.discovery_operation_id ?? null)
        ),

      pointDiscovery: (connectorId: string, operationId: string) =>
        sql`update connectors set discovery_operation_id = ${operationId} where id = ${connectorId}`.pipe(Effect.asVoid),

      /** Replaces the selection; selection_schema_version takes the version it was checked against. */
      replaceSelection: (connectorId: string, selection: { readonly paths: ReadonlyArray<string>; readonly selected: unknown; readonly schemaVersion: number }) =>
        sql`
          update connectors set
            selected_entity_paths = array(select v from jsonb_array_elements_text(${JSON.stringify(selection.paths)}::jsonb) with ordinality as e(v, i) order by i),
            selected_schema_structure = ${JSON.stringify(selection.selected)}::jsonb,
            selected_masking_suggestions = ${JSON.stringify(maskingSuggestionsOf(selection.selected))}::jsonb,
            selection_schema_version = ${selection.schemaVersion},
            selected_schema_version = selected_schema_version + 1,
            updated_at = now()
          where id = ${connectorId}`.pipe(Effect.asVoid),

      /** What replica-identity decisions are checked against: the structure and both versions. */
      decisionsBasis: (connectorId: string) =>
        sql<{ readonly schema_structure: unknown; readonly schema_version: number; readonly replica_identity_decisions_version: number }>`
          select schema_structure, schema_version, replica_identity_decisions_version from connectors where id = ${connectorId}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]))
        ),

      /** Writes the decisions only if neither version moved since `basis` was read; false otherwise. */
      replaceDecisions: (connectorId: string, preflight: unknown, basis: { readonly schemaVersion: number; readonly decisionsVersion: number }) =>
        sql<{ readonly id: string }>`
          update connectors set
            replica_identity_preflight = ${JSON.stringify(preflight)}::jsonb,
            replica_identity_decisions_version = ${basis.decisionsVersion + 1},
            updated_at = now()
          where id = ${connectorId} and replica_identity_decisions_version = ${basis.decisionsVersion} and schema_version = ${basis.schemaVersion}
          returning id`.pipe(Effect.map((rows) => rows.length > 0)),

      /** The recorded result of a discovery operation (a redelivery answers it again). */
      discoveryResult: (operationId: string) =>
        sql<{ readonly result: Record<string, unknown> }>`select result from discovery_runs where operation_id = ${operationId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.result))
        ),

      /** The discovered state of a connector, the row locked until the transaction ends. */
      lockDiscovered: (connectorId: string) =>
        sql<{ readonly schema_version: number; readonly schema_hash: string | null; readonly replica_identity_preflight: unknown; readonly replica_identity_decisions_version: number }>`
          select schema_version, schema_hash, replica_identity_preflight, replica_identity_decisions_version
          from connectors where id = ${connectorId} for update`.pipe(Effect.map((rows) => Option.fromNullable(rows[0]))),

      recordDiscovered: (connectorId: string, discovered: { readonly structure: unknown; readonly hash: string; readonly version: number; readonly preflight: unknown }) =>
        sql`
          update connectors set
            schema_structure = ${JSON.stringify(discovered.structure)}::jsonb,
            schema_hash = ${discovered.hash},
            schema_version = ${discovered.version},
            replica_identity_preflight = ${JSON.stringify(discovered.preflight)}::jsonb,
            last_discovered_at = now(),
            updated_at = now()
          where id = ${connectorId}`.pipe(Effect.asVoid),

      /** A structure refresh's view of the connector, row-locked until its transaction ends. */
      lockStructure: (connectorId: string) =>
        sql<{
          readonly schema_structure: unknown
          readonly schema_hash: string | null
          readonly schema_version: number
          readonly selection_schema_version: number | null
          readonly selected_entity_paths: ReadonlyArray<string>
          readonly replica_identity_preflight: unknown
          readonly replica_identity_decisions_version: number
        }>`select schema_structure, schema_hash, schema_version, selection_schema_version, selected_entity_paths, replica_identity_preflight, replica_identity_decisions_version
           from connectors where id = ${connectorId} for update`.pipe(Effect.map((rows) => Option.fromNullable(rows[0]))),

      /** A refreshed structure; the selection's structure too when it still resolves in it. */
      recordStructure: (
        connectorId: string,
        refreshed: { readonly structure: unknown; readonly hash: string; readonly version: number; readonly preflight: unknown; readonly selected: Option.Option<unknown> }
      ) =>
        sql`
          update connectors set schema_structure = ${JSON.stringify(refreshed.structure)}::jsonb, schema_hash = ${refreshed.hash}, schema_version = ${refreshed.version},
            replica_identity_preflight = ${JSON.stringify(refreshed.preflight)}::jsonb, last_discovered_at = now(), updated_at = now()
            ${Option.isSome(refreshed.selected) ? sql`, selected_schema_structure = ${JSON.stringify(refreshed.selected.value)}::jsonb, selected_masking_suggestions = ${JSON.stringify(maskingSuggestionsOf(refreshed.selected.value))}::jsonb, selection_schema_version = ${refreshed.version}` : sql``}
          where id = ${connectorId}`.pipe(Effect.asVoid),

      recordDiscoveryRun: (run: { readonly operationId: string; readonly connectorId: string; readonly version: number; readonly changed: boolean; readonly result: unknown }) =>
        sql`
          insert into discovery_runs (operation_id, connector_id, schema_version, changed, result)
          values (${run.operationId}, ${run.connectorId}, ${run.version}, ${run.changed}, ${JSON.stringify(run.result)}::jsonb)`.pipe(Effect.asVoid),

      /** How many connectors there are in each branching-engine state (the metrics' scion_connectors). */
      countsByEngineStatus: sql<{ status: string; n: number }>`select branching_engine_status as status, count(*)::int as n from connectors group by 1`.pipe(
        Effect.map((rows) => rows.map((row) => ({ labels: { branching_engine_status: row.status }, count: row.n }))),
        Effect.orDie
      ),

      find: (connectorId: string) =>
        sql<ConnectorRow>`select * from connectors where id = ${connectorId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toConnector)),
          Effect.orDie
        ),

      listByOrg: (orgId: string, filter: { readonly connectorCategory?: string | undefined; readonly serviceName?: string | undefined }) =>
        sql<ConnectorRow>`
          select * from connectors
          where org_id = ${orgId}
            ${filter.connectorCategory !== undefined ? sql`and connector_category = ${filter.connectorCategory}` : sql``}
            ${filter.serviceName !== undefined ? sql`and service_name = ${filter.serviceName}` : sql``}
          order by created_at, id`.pipe(
          Effect.map((rows) => rows.map(toConnector)),
          Effect.orDie
        ),

      /** The connectors of a project (the project-deletion consumer). */
      listByProject: (orgId: string, projectId: string) =>
        sql<ConnectorRow>`select * from connectors where org_id = ${orgId} and project_id = ${projectId} order by created_at, id`.pipe(
          Effect.map((rows) => rows.map(toConnector)),
          Effect.orDie
        ),

      countByOrg: (orgId: string) =>
        sql<{ readonly n: number }>`select count(*)::int as n from connectors where org_id = ${orgId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Effect.orDie
        ),

      /** Serialises creates in one org so two cannot both take the plan's last connector. */
      lockOrg: (orgId: string) => sql`select pg_advisory_xact_lock(hashtextextended(${`connectors:${orgId}`}, 0))`.pipe(Effect.asVoid, Effect.orDie),

      insert: (c: NewConnector) =>
        sql`
          insert into connectors (id, org_id, project_id, name, service_name, connector_category, byoc, use_environment, private_link_id, environment_id, source_provider, created_by)
          values (${c.id}, ${c.orgId}, ${c.projectId}, ${c.name}, ${c.serviceName}, ${c.connectorCategory}, ${c.byoc}, ${c.useEnvironment}, ${c.privateLinkId},
                  ${c.environmentId}, ${c.sourceProvider}, ${c.createdBy})`.pipe(Effect.asVoid, Effect.orDie),

      /** A new name and/or re-tested details: details reset indexing (the interface's rule). */
      update: (connectorId: string, change: { readonly name?: string | undefined; readonly detailsChanged: boolean; readonly sourceProvider?: string | null | undefined }) =>
        sql`
          update connectors set
            name = coalesce(${change.name ?? null}, name),
            indexing_status = case when ${change.detailsChanged} then 'not_indexed' else indexing_status end,
            source_provider = case when ${change.detailsChanged} then ${change.sourceProvider ?? null} else source_provider end,
            updated_at = now()
          where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie),

      /**
       * Stores (or replaces) the encrypted details. fingerprint and last4 stay empty: a digest or
       * the tail of a password would help someone guess it, and the user recognises a connector
       * by host and database, which the row does not need either.
       */
      putDetails: (connectorId: string, envelope: Envelope) =>
        sql`
          insert into secrets (owner_id, name, envelope, key_id, fingerprint, last4)
          values (${connectorId}, ${CONNECTION_DETAILS}, ${JSON.stringify(envelope)}::jsonb, ${envelope.key_id}, '', '')
          on conflict (owner_id, name) do update set envelope = excluded.envelope, key_id = excluded.key_id, rotated_at = clock_timestamp()`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),

      getDetails: (connectorId: string) =>
        sql<{ readonly envelope: Envelope }>`select envelope from secrets where owner_id = ${connectorId} and name = ${CONNECTION_DETAILS}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.envelope)),
          Effect.orDie
        )
    } as const
  })
}) {}
