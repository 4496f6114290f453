/** Every operation type of the service interface, as the interface spells it. */
export const OPERATION_TYPES = [
  "connector_engine_setup",
  "connector_reset",
  "connector_deep_reset",
  "connector_discovery",
  "connector_delete",
  "connector_secret_purge",
  "connector_rollout",
  "connector_replication_rollback",
  "connector_cdc_cutover",
  "connector_cdc_shadow_cleanup",
  "environment_deploy",
  "environment_destroy",
  "branch_create",
  "branch_delete",
  // Our extension of the interface's types.
  "branch_reset",
  "snapshot_create",
  "snapshot_delete"
] as const
export type OperationType = (typeof OPERATION_TYPES)[number]

export const OPERATION_STATUSES = ["pending", "running", "completed", "failed"] as const
export type OperationStatus = (typeof OPERATION_STATUSES)[number]

export const isTerminal = (status: OperationStatus): status is "completed" | "failed" => status === "completed" || status === "failed"

/** The only type that carries setup_status. */
export const SETUP_STATUS_TYPE: OperationType = "connector_engine_setup"

export type JsonObject = { readonly [key: string]: unknown }

export interface Operation {
  readonly id: string
  readonly orgId: string
  readonly type: OperationType
  readonly resourceId: string
  readonly status: OperationStatus
  readonly stage: string | null
  readonly stageLabel: string | null
  readonly progress: number | null
  readonly result: JsonObject | null
  readonly error: string | null
  /** Non-null exactly for connector_engine_setup. */
  readonly setupStatus: JsonObject | null
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly startedAt: Date | null
  readonly completedAt: Date | null
  readonly heartbeatAt: Date
  /** Bumped by every write; reports write only over the version they read (not in the interface). */
  readonly version: number
}

export interface NewOperation {
  readonly id: string
  readonly orgId: string
  readonly type: OperationType
  readonly resourceId: string
}

/**
 * What a worker reports. Absent fields keep their recorded value; a report with nothing but the
 * id is a heartbeat.
 */
export interface Report {
  readonly id: string
  readonly status?: OperationStatus
  readonly stage?: string
  readonly stageLabel?: string
  readonly progress?: number
  readonly result?: JsonObject
  readonly error?: string
  readonly setupStatus?: JsonObject
}
