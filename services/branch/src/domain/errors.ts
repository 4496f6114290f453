import { BillingUnavailable, Code, PlanLimitReached, planLimitWireErrors, wireErrorFrom, type WireTable } from "@scion/kit"
import { Schema } from "effect"

// The refusals of identity, shared by every unit (kit/org-access.ts).
import { accessWireErrors, type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated } from "@scion/kit"
export { type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated }

/** A missing or invalid field: the interface's 400 with a string detail. */
export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", { field: Schema.String, message: Schema.String }) {}

/** Unknown, or of an org the caller may not see: the same answer for both. */
export class ConnectorNotFound extends Schema.TaggedError<ConnectorNotFound>()("ConnectorNotFound", { connectorId: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} not found`
  }
}

/** Unknown, deleted, or of an org the caller may not see. */
export class BranchNotFound extends Schema.TaggedError<BranchNotFound>()("BranchNotFound", { branchId: Schema.String }) {
  override get message() {
    return `Branch ${this.branchId} not found`
  }
}

/** Unknown, deleted, of another connector, or of an org the caller may not see. */
export class SnapshotNotFound extends Schema.TaggedError<SnapshotNotFound>()("SnapshotNotFound", { snapshotId: Schema.String }) {
  override get message() {
    return `Snapshot ${this.snapshotId} not found`
  }
}

export class SnapshotNameTaken extends Schema.TaggedError<SnapshotNameTaken>()("SnapshotNameTaken", { connectorId: Schema.String, name: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} already has a snapshot named ${this.name}`
  }
}

/** Still being made (or failed, or being deleted): branches come from ready snapshots only. */
export class SnapshotNotReady extends Schema.TaggedError<SnapshotNotReady>()("SnapshotNotReady", { snapshotId: Schema.String, status: Schema.String }) {
  override get message() {
    return `Snapshot ${this.snapshotId} is ${this.status}, not ready`
  }
}

/** A branch is being cut from it: delete it once that create ends. */
export class SnapshotInUse extends Schema.TaggedError<SnapshotInUse>()("SnapshotInUse", { snapshotId: Schema.String }) {
  override get message() {
    return `A branch is being created from snapshot ${this.snapshotId}; delete it once that create has ended`
  }
}

/** The connector's engine cannot be branched (yet): the interface's 422. */
export class EngineNotReady extends Schema.TaggedError<EngineNotReady>()("EngineNotReady", {
  connectorId: Schema.String,
  status: Schema.String,
  /** The quarantine that makes the engine degraded, when it is. */
  quarantine: Schema.optional(Schema.Struct({ id: Schema.String, reason: Schema.String, detail: Schema.String }))
}) {
  override get message() {
    if (this.quarantine !== undefined) {
      return `The branching engine of connector ${this.connectorId} is degraded: its replication is quarantined (${this.quarantine.id}, ${this.quarantine.reason}: ${this.quarantine.detail}), so the mirror may be stale. Fix the cause and release the quarantine (POST /v1/connectors/${this.connectorId}/quarantine/${this.quarantine.id}/release), or create the branch with "allow_stale": true to branch from the stale mirror`
    }
    return `The branching engine of connector ${this.connectorId} is not ready to branch (branching_engine_status ${this.status}); run engine setup and wait for it to complete`
  }
}

/** A strict masking policy refuses branches while suggested columns are neither masked nor marked safe. */
export class MaskingIncomplete extends Schema.TaggedError<MaskingIncomplete>()("MaskingIncomplete", {
  connectorId: Schema.String,
  columns: Schema.Array(Schema.String)
}) {
  override get message() {
    return `The masking policy of connector ${this.connectorId} is strict and these columns look personal or secret but have no masking rule and are not marked safe: ${this.columns.join(", ")}. Add rules for them or list them in safe_columns (PUT /v1/connectors/${this.connectorId}/masking-rules)`
  }
}

export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", { key: Schema.String }) {
  override get message() {
    return `The idempotency key ${this.key} was already used for a different request (connector, service type or name differ); use a new key`
  }
}

/** The same create (connector and name) is still pending or running. */
export class CreateInProgress extends Schema.TaggedError<CreateInProgress>()("CreateInProgress", {
  connectorId: Schema.String,
  name: Schema.String,
  operationId: Schema.String
}) {
  override get message() {
    return `A branch named ${this.name} is already being created on connector ${this.connectorId} (operation ${this.operationId}); poll it, or resend with the same idempotency key`
  }
}

export class BranchNameTaken extends Schema.TaggedError<BranchNameTaken>()("BranchNameTaken", { connectorId: Schema.String, name: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} already has a branch named ${this.name}`
  }
}

export class DeleteInProgress extends Schema.TaggedError<DeleteInProgress>()("DeleteInProgress", { branchId: Schema.String, operationId: Schema.String }) {
  override get message() {
    return `Branch ${this.branchId} is being deleted (operation ${this.operationId})`
  }
}

/** The operation could not be created: nothing started, safe to retry (503). */
/** Delete while the branch is protected (PATCH protected: false first). */
export class BranchProtected extends Schema.TaggedError<BranchProtected>()("BranchProtected", { branchId: Schema.String }) {
  override get message() {
    return `Branch ${this.branchId} is protected: unset protection (PATCH /v1/branches/${this.branchId} {"protected": false}) before deleting it`
  }
}

/** A reset while another reset of the branch runs, or a delete while one does. */
export class ResetInProgress extends Schema.TaggedError<ResetInProgress>()("ResetInProgress", { branchId: Schema.String, operationId: Schema.String }) {
  override get message() {
    return `Branch ${this.branchId} is being reset (operation ${this.operationId}); wait for it to end`
  }
}

/** A reset of a branch that is not active (failed, or still being created or deleted). */
export class BranchNotActive extends Schema.TaggedError<BranchNotActive>()("BranchNotActive", { branchId: Schema.String, status: Schema.String }) {
  override get message() {
    return `Branch ${this.branchId} is ${this.status}: only an active branch can be reset`
  }
}

export class OperationsUnavailable extends Schema.TaggedError<OperationsUnavailable>()("OperationsUnavailable", { cause: Schema.String }) {
  override get message() {
    return "The work could not start; retry shortly"
  }
}

/** The connector unit could not say where the engine is: safe to retry (503). */
export class EngineAccessUnavailable extends Schema.TaggedError<EngineAccessUnavailable>()("EngineAccessUnavailable", { cause: Schema.String }) {
  override get message() {
    return "The connector's engine could not be looked up; retry shortly"
  }
}

export class SecretStoreFailure extends Schema.TaggedError<SecretStoreFailure>()("SecretStoreFailure", { reason: Schema.String }) {
  override get message() {
    return `Secret store failure: ${this.reason}`
  }
}

// Plan limits are shared by every creating unit (kit/plan-limits.ts).
export { BillingUnavailable, PlanLimitReached }


export type BranchError =
  | AccessError
  | InvalidArgument
  | ConnectorNotFound
  | BranchNotFound
  | EngineNotReady
  | MaskingIncomplete
  | BranchProtected
  | ResetInProgress
  | BranchNotActive
  | IdempotencyKeyReused
  | CreateInProgress
  | BranchNameTaken
  | DeleteInProgress
  | OperationsUnavailable
  | EngineAccessUnavailable
  | SecretStoreFailure
  | PlanLimitReached
  | BillingUnavailable
  | SnapshotNotFound
  | SnapshotNameTaken
  | SnapshotNotReady
  | SnapshotInUse

/** The one table from domain error to wire error. */
export const wireErrors: WireTable<BranchError> = {
  ...accessWireErrors,
  InvalidArgument: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: (e) => ({ field: e.field }) },
  ConnectorNotFound: { code: Code.NotFound, reason: "CONNECTOR_NOT_FOUND", metadata: (e) => ({ connector_id: e.connectorId }) },
  BranchNotFound: { code: Code.NotFound, reason: "BRANCH_NOT_FOUND", metadata: (e) => ({ branch_id: e.branchId }) },
  EngineNotReady: { code: Code.FailedPrecondition, reason: "ENGINE_NOT_READY", metadata: (e) => ({ connector_id: e.connectorId, status: e.status }) },
  MaskingIncomplete: { code: Code.FailedPrecondition, reason: "MASKING_INCOMPLETE", metadata: (e) => ({ connector_id: e.connectorId, columns: e.columns.join(",") }) },
  IdempotencyKeyReused: { code: Code.AlreadyExists, reason: "IDEMPOTENCY_KEY_REUSED", metadata: (e) => ({ key: e.key }) },
  CreateInProgress: {
    code: Code.Aborted,
    reason: "BRANCH_CREATE_IN_PROGRESS",
    metadata: (e) => ({ connector_id: e.connectorId, name: e.name, operation_id: e.operationId })
  },
  BranchNameTaken: { code: Code.AlreadyExists, reason: "BRANCH_NAME_TAKEN", metadata: (e) => ({ connector_id: e.connectorId, name: e.name }) },
  DeleteInProgress: { code: Code.Aborted, reason: "BRANCH_DELETE_IN_PROGRESS", metadata: (e) => ({ branch_id: e.branchId, operation_id: e.operationId }) },
  BranchProtected: { code: Code.FailedPrecondition, reason: "BRANCH_PROTECTED", metadata: (e) => ({ branch_id: e.branchId }) },
  ResetInProgress: { code: Code.Aborted, reason: "BRANCH_RESET_IN_PROGRESS", metadata: (e) => ({ branch_id: e.branchId, operation_id: e.operationId }) },
  BranchNotActive: { code: Code.FailedPrecondition, reason: "BRANCH_NOT_ACTIVE", metadata: (e) => ({ branch_id: e.branchId, status: e.status }) },
  OperationsUnavailable: { code: Code.Unavailable, reason: "OPERATIONS_UNAVAILABLE" },
  EngineAccessUnavailable: { code: Code.Unavailable, reason: "ENGINE_ACCESS_UNAVAILABLE" },
  SecretStoreFailure: { code: Code.Internal, reason: "SECRET_STORE_FAILURE" },
  SnapshotNotFound: { code: Code.NotFound, reason: "SNAPSHOT_NOT_FOUND", metadata: (e) => ({ snapshot_id: e.snapshotId }) },
  SnapshotNameTaken: { code: Code.AlreadyExists, reason: "SNAPSHOT_NAME_TAKEN", metadata: (e) => ({ connector_id: e.connectorId, name: e.name }) },
  SnapshotNotReady: { code: Code.FailedPrecondition, reason: "SNAPSHOT_NOT_READY", metadata: (e) => ({ snapshot_id: e.snapshotId, status: e.status }) },
  SnapshotInUse: { code: Code.FailedPrecondition, reason: "SNAPSHOT_IN_USE", metadata: (e) => ({ snapshot_id: e.snapshotId }) },
  ...planLimitWireErrors
}

export const toWireError = wireErrorFrom(wireErrors)
