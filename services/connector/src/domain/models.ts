export type Cloud = "aws"
export type PrivateLinkStatus = "pending" | "active"
export type AwsAccountConnectionStatus = "pending" | "connected"

export interface AwsAccountConnection {
  readonly id: string
  readonly environmentId: string
  readonly orgId: string
  readonly awsAccountId: string
  /** Not a secret (AWS: the external id guards against the confused deputy, not disclosure). */
  readonly externalId: string
  readonly roleArn: string | null
  readonly status: AwsAccountConnectionStatus
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly connectedAt: Date | null
}

/** What is known of a stored key; the key itself never leaves the secret store. */
export interface ApiKeyInfo {
  readonly fingerprint: string
  readonly last4: string
  readonly rotatedAt: Date
}

export interface Environment {
  readonly id: string
  readonly orgId: string
  readonly name: string
  readonly cloud: Cloud
  readonly region: string
  readonly privateLinkId: string | null
  readonly privateLinkStatus: PrivateLinkStatus | null
  readonly awsAccountConnection: AwsAccountConnection | null
  readonly dbProviderApiKey: ApiKeyInfo | null
  readonly createdBy: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

export type Byoc = "environment" | "self_managed"

/**
 * branching_engine_status values (the interface names failed_validation; the rest are ours):
 * degraded is set up, but with its replication quarantined.
 */
export type BranchingEngineStatus = "not_set_up" | "setting_up" | "ready" | "degraded" | "failed_validation" | "failed"

/** Whether the selection is applied to the mirror (reset when the connection details change). */
export type IndexingStatus = "not_indexed" | "indexing" | "indexed" | "failed"

/** A connector row as stored; connection details are never part of it (they are in `secrets`). */
export interface Connector {
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
  readonly schemaStructure: Record<string, unknown> | null
  readonly schemaVersion: number
  readonly selectionSchemaVersion: number | null
  readonly selectedSchemaVersion: number
  readonly lastIndexedVersion: number
  readonly selectedEntityPaths: ReadonlyArray<string>
  readonly selectedSchemaStructure: Record<string, unknown> | null
  readonly indexingStatus: IndexingStatus
  readonly branchingEngineStatus: BranchingEngineStatus
  /** While true, deleting the connector answers 409. */
  readonly deletionLocked: boolean
  /** The connector_delete operation last started (null before any delete). */
  readonly deleteOperationId: string | null
  /** The connector_engine_setup or connector_rollout operation last started (null before any). */
  readonly setupOperationId: string | null
  readonly replicaIdentityPreflight: Record<string, unknown> | null
  /** The mirror's replication as the monitor last measured it; null until an engine is set up. */
  readonly replication: ReplicationState | null
  readonly createdBy: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** What the caller may do with a connector (the interface's can_update and can_delete). */
export interface ConnectorAccess {
  readonly canUpdate: boolean
  readonly canDelete: boolean
}

/** How the mirror is replicating (the connector's `replication` block). */
export type ReplicationStatus = "streaming" | "catching_up" | "applying_schema_change" | "quarantined" | "stopped"

export interface ReplicationState {
  readonly status: ReplicationStatus
  /** Source WAL the mirror has not confirmed, in bytes; null when the source could not be asked. */
  readonly lag_bytes: number | null
  /** ISO time: the source commit time of the newest heartbeat the mirror applied. */
  readonly last_applied_at: string | null
  readonly active_pipeline_id: string
  readonly schema_follow: "capture" | "reconcile"
  /** ISO time of the measurement. */
  readonly measured_at: string
}
