import type { MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { OperationStatus as PbStatus, OperationType as PbType, type OperationSchema } from "@scion/proto/scion/operation/v1/operation_pb"
import type { JsonObject as PbJsonObject } from "@bufbuild/protobuf"
import type { JsonObject, Operation, OperationStatus, OperationType } from "../domain/models.js"

/** Domain type ↔ proto enum: one closed table each way. */
export const typeToProto = {
  connector_engine_setup: PbType.CONNECTOR_ENGINE_SETUP,
  connector_reset: PbType.CONNECTOR_RESET,
  connector_deep_reset: PbType.CONNECTOR_DEEP_RESET,
  connector_discovery: PbType.CONNECTOR_DISCOVERY,
  connector_delete: PbType.CONNECTOR_DELETE,
  connector_secret_purge: PbType.CONNECTOR_SECRET_PURGE,
  connector_rollout: PbType.CONNECTOR_ROLLOUT,
  connector_replication_rollback: PbType.CONNECTOR_REPLICATION_ROLLBACK,
  connector_cdc_cutover: PbType.CONNECTOR_CDC_CUTOVER,
  connector_cdc_shadow_cleanup: PbType.CONNECTOR_CDC_SHADOW_CLEANUP,
  environment_deploy: PbType.ENVIRONMENT_DEPLOY,
  environment_destroy: PbType.ENVIRONMENT_DESTROY,
  branch_create: PbType.BRANCH_CREATE,
  branch_delete: PbType.BRANCH_DELETE,
  branch_reset: PbType.BRANCH_RESET,
  snapshot_create: PbType.SNAPSHOT_CREATE,
  snapshot_delete: PbType.SNAPSHOT_DELETE
} as const satisfies Record<OperationType, PbType>

export const typeFromProto = Object.fromEntries(Object.entries(typeToProto).map(([k, v]) => [v, k])) as Partial<Record<PbType, OperationType>>

export const statusToProto = {
  pending: PbStatus.PENDING,
  running: PbStatus.RUNNING,
  completed: PbStatus.COMPLETED,
  failed: PbStatus.FAILED
} as const satisfies Record<OperationStatus, PbStatus>

export const statusFromProto = {
  [PbStatus.UNSPECIFIED]: undefined,
  [PbStatus.PENDING]: "pending",
  [PbStatus.RUNNING]: "running",
  [PbStatus.COMPLETED]: "completed",
  [PbStatus.FAILED]: "failed"
} as const satisfies Record<PbStatus, OperationStatus | undefined>

const json = (value: JsonObject) => value as PbJsonObject

export const operationToProto = (op: Operation): MessageInitShape<typeof OperationSchema> => ({
  id: op.id,
  orgId: op.orgId,
  type: typeToProto[op.type],
  resourceId: op.resourceId,
  status: statusToProto[op.status],
  ...(op.stage !== null ? { stage: op.stage } : {}),
  ...(op.stageLabel !== null ? { stageLabel: op.stageLabel } : {}),
  ...(op.progress !== null ? { progress: op.progress } : {}),
  ...(op.result !== null ? { result: json(op.result) } : {}),
  ...(op.error !== null ? { error: op.error } : {}),
  ...(op.setupStatus !== null ? { setupStatus: json(op.setupStatus) } : {}),
  createdAt: timestampFromDate(op.createdAt),
  updatedAt: timestampFromDate(op.updatedAt),
  ...(op.startedAt !== null ? { startedAt: timestampFromDate(op.startedAt) } : {}),
  ...(op.completedAt !== null ? { completedAt: timestampFromDate(op.completedAt) } : {}),
  heartbeatAt: timestampFromDate(op.heartbeatAt)
})
