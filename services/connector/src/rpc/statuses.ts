import {
  BranchingEngineStatus as WireEngineStatus,
  IndexingStatus as WireIndexingStatus,
  QuarantineEntryStatus as WireQuarantineStatus,
  ReadinessCheckStatus as WireReadinessStatus,
  ReplicationStatus as WireReplicationStatus,
  SchemaChangeStatus as WireSchemaChangeStatus
} from "@scion/proto/scion/connector/v1/connector_pb"
import type { BranchingEngineStatus, IndexingStatus, ReplicationStatus } from "../domain/models.js"

/**
 * Our statuses as connector.proto's enums. Each table is closed over our names: a status added to
 * the domain and not to the wire (or the reverse) fails to compile.
 */

const indexing = {
  not_indexed: WireIndexingStatus.NOT_INDEXED,
  indexing: WireIndexingStatus.INDEXING,
  indexed: WireIndexingStatus.INDEXED,
  failed: WireIndexingStatus.FAILED
} as const satisfies Record<IndexingStatus, WireIndexingStatus>

const engine = {
  not_set_up: WireEngineStatus.NOT_SET_UP,
  setting_up: WireEngineStatus.SETTING_UP,
  ready: WireEngineStatus.READY,
  degraded: WireEngineStatus.DEGRADED,
  failed_validation: WireEngineStatus.FAILED_VALIDATION,
  failed: WireEngineStatus.FAILED
} as const satisfies Record<BranchingEngineStatus, WireEngineStatus>

const replication = {
  streaming: WireReplicationStatus.STREAMING,
  catching_up: WireReplicationStatus.CATCHING_UP,
  applying_schema_change: WireReplicationStatus.APPLYING_SCHEMA_CHANGE,
  quarantined: WireReplicationStatus.QUARANTINED,
  stopped: WireReplicationStatus.STOPPED
} as const satisfies Record<ReplicationStatus, WireReplicationStatus>

const readiness = { pass: WireReadinessStatus.PASS, fail: WireReadinessStatus.FAIL } as const satisfies Record<"pass" | "fail", WireReadinessStatus>

const quarantine = { quarantined: WireQuarantineStatus.QUARANTINED, released: WireQuarantineStatus.RELEASED } as const satisfies Record<"quarantined" | "released", WireQuarantineStatus>

const schemaChange = {
  applied: WireSchemaChangeStatus.APPLIED,
  skipped: WireSchemaChangeStatus.SKIPPED,
  reconciled: WireSchemaChangeStatus.RECONCILED,
  failed: WireSchemaChangeStatus.FAILED
} as const satisfies Record<"applied" | "skipped" | "reconciled" | "failed", WireSchemaChangeStatus>

export const indexingStatusToProto = (status: IndexingStatus) => indexing[status]
export const engineStatusToProto = (status: BranchingEngineStatus) => engine[status]
export const replicationStatusToProto = (status: ReplicationStatus) => replication[status]
export const readinessStatusToProto = (status: keyof typeof readiness) => readiness[status]
export const quarantineStatusToProto = (status: keyof typeof quarantine) => quarantine[status]
export const schemaChangeStatusToProto = (status: keyof typeof schemaChange) => schemaChange[status]
