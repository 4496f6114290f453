import { BillingUnavailable, Code, PlanLimitReached, planLimitWireErrors, wireErrorFrom, type WireTable } from "@scion/kit"
import { Schema } from "effect"

// The refusals of identity, shared by every unit (kit/org-access.ts).
import { accessWireErrors, type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated } from "@scion/kit"
export { type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated }

export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", { field: Schema.String, message: Schema.String }) {}

/** Unknown, or of an org the caller does not belong to: the same answer for both. */
export class EnvironmentNotFound extends Schema.TaggedError<EnvironmentNotFound>()("EnvironmentNotFound", { environmentId: Schema.String }) {
  override get message() {
    return `Environment ${this.environmentId} not found`
  }
}

export class EnvironmentNameTaken extends Schema.TaggedError<EnvironmentNameTaken>()("EnvironmentNameTaken", { orgId: Schema.String, name: Schema.String }) {
  override get message() {
    return `An environment named ${this.name} already exists in org ${this.orgId}`
  }
}

export class AwsAccountConnectionNotFound extends Schema.TaggedError<AwsAccountConnectionNotFound>()("AwsAccountConnectionNotFound", {
  connectionId: Schema.String
}) {
  override get message() {
    return `AWS account connection ${this.connectionId} not found`
  }
}

export class InvalidRoleArn extends Schema.TaggedError<InvalidRoleArn>()("InvalidRoleArn", { roleArn: Schema.String }) {
  override get message() {
    return `role_arn ${this.roleArn} is not an IAM role ARN of the form arn:aws:iam::<12-digit account id>:role/<path/name>`
  }
}

export class AwsAccountMismatch extends Schema.TaggedError<AwsAccountMismatch>()("AwsAccountMismatch", {
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message() {
    return `role_arn is in AWS account ${this.actual}, but this connection is for account ${this.expected}`
  }
}

/** The external id is not the one the setup link carried (no variable: it is the caller's input). */
export class ExternalIdMismatch extends Schema.TaggedError<ExternalIdMismatch>()("ExternalIdMismatch", {}) {
  override get message() {
    return "external_id does not match the one issued with the setup link for this connection"
  }
}

// Plan limits are shared by every creating unit (kit/plan-limits.ts).
export { BillingUnavailable, PlanLimitReached }


/**
 * Encryption or decryption failed: an unknown key id, a tampered envelope, the wrong associated
 * data. The interface's 500 "secret-store failure"; the detail never names key material.
 */
export class SecretStoreFailure extends Schema.TaggedError<SecretStoreFailure>()("SecretStoreFailure", { reason: Schema.String }) {
  override get message() {
    return `Secret store failure: ${this.reason}`
  }
}

/** Unknown, or of an org the caller may not see: the same answer for both. */
export class ConnectorNotFound extends Schema.TaggedError<ConnectorNotFound>()("ConnectorNotFound", { connectorId: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} not found`
  }
}

export class UnsupportedService extends Schema.TaggedError<UnsupportedService>()("UnsupportedService", { serviceName: Schema.String }) {
  override get message() {
    return `service_name ${JSON.stringify(this.serviceName)} is not supported: use postgresql or github`
  }
}

/** The connection details do not fit the service's shape; the message never repeats a value. */
export class InvalidConnectionDetails extends Schema.TaggedError<InvalidConnectionDetails>()("InvalidConnectionDetails", {
  serviceName: Schema.String,
  problem: Schema.String
}) {
  override get message() {
    return `Invalid connection_details for ${this.serviceName}: ${this.problem}`
  }
}

export class PrivateLinkRequired extends Schema.TaggedError<PrivateLinkRequired>()("PrivateLinkRequired", { environmentId: Schema.String }) {
  override get message() {
    return `Environment ${this.environmentId} has an active private link: private_link_id is required`
  }
}

export const PreflightCheckSchema = Schema.Struct({
  id: Schema.String,
  status: Schema.Literal("pass", "warn", "fail"),
  message: Schema.String,
  remedy: Schema.NullOr(Schema.String)
})
export const PreflightReportSchema = Schema.Struct({
  preflight_pass: Schema.Boolean,
  checks: Schema.Array(PreflightCheckSchema),
  provider: Schema.String
})

/** The create-time (or update-time) gate did not pass; the report travels with the error. */
export class PreflightFailed extends Schema.TaggedError<PreflightFailed>()("PreflightFailed", { report: PreflightReportSchema }) {
  override get message() {
    const failed = this.report.checks.filter((c) => c.status === "fail").map((c) => c.id)
    return `Preflight did not pass (failed: ${failed.join(", ")}); fix the source and retry`
  }
}

/**
 * Discovery cannot start: the connector is not PostgreSQL, its credentials are missing or cannot
 * be decrypted, or the source refuses them. The checks travel with the error; nothing was started.
 */
export class DiscoveryPrerequisitesFailed extends Schema.TaggedError<DiscoveryPrerequisitesFailed>()("DiscoveryPrerequisitesFailed", {
  checks: Schema.Array(PreflightCheckSchema)
}) {
  override get message() {
    const failed = this.checks.filter((c) => c.status === "fail").map((c) => c.id)
    return `Discovery prerequisites failed (${failed.join(", ")}); nothing was started`
  }
}

/** The operation unit could not create or read an operation: the work did not start; safe to retry. */
export class OperationsUnavailable extends Schema.TaggedError<OperationsUnavailable>()("OperationsUnavailable", { cause: Schema.String }) {
  override get message() {
    return "The work could not be started right now; retry shortly"
  }
}

/** Another replica-identity decisions write (or a discovery) landed first: re-read and retry. */
export class DecisionsConflict extends Schema.TaggedError<DecisionsConflict>()("DecisionsConflict", { connectorId: Schema.String }) {
  override get message() {
    return `The replica-identity decisions of connector ${this.connectorId} changed while this write was made; read the connector again and retry`
  }
}

/** The grant script cannot be written yet: not PostgreSQL, nothing discovered or selected, no username. */
export class GrantScriptUnavailable extends Schema.TaggedError<GrantScriptUnavailable>()("GrantScriptUnavailable", { reason: Schema.String }) {
  override get message() {
    return `No grant script: ${this.reason}`
  }
}

/** DELETE of a connector while its deletion lock is on. */
export class DeletionLocked extends Schema.TaggedError<DeletionLocked>()("DeletionLocked", { connectorId: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} is locked against deletion: DELETE /v1/connectors/${this.connectorId}/deletion-lock first`
  }
}

/** A delete of the connector is pending or running: another delete, a lock or an unlock waits for it. */
export class DeleteInProgress extends Schema.TaggedError<DeleteInProgress>()("DeleteInProgress", { connectorId: Schema.String, operationId: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} is being deleted (operation ${this.operationId})`
  }
}

/** The connector is not in a state the action starts from (the interface's 400). */
export class ConnectorStateInvalid extends Schema.TaggedError<ConnectorStateInvalid>()("ConnectorStateInvalid", { connectorId: Schema.String, reason: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} is not in a valid state for this action: ${this.reason}`
  }
}

/**
 * Engine setup cannot start: nothing discovered or selected, unresolved replica-identity
 * decisions, a selection newer than the schema allows. The checks travel with the error.
 */
export class EngineSetupPrerequisitesFailed extends Schema.TaggedError<EngineSetupPrerequisitesFailed>()("EngineSetupPrerequisitesFailed", {
  checks: Schema.Array(PreflightCheckSchema)
}) {
  override get message() {
    const failed = this.checks.filter((c) => c.status === "fail")
    return `Engine setup prerequisites failed: ${failed.map((c) => c.message).join("; ")}`
  }
}

/** An engine setup or rollout is already pending or running for the connector. */
export class EngineSetupInProgress extends Schema.TaggedError<EngineSetupInProgress>()("EngineSetupInProgress", { connectorId: Schema.String, operationId: Schema.String }) {
  override get message() {
    return `Engine setup of connector ${this.connectorId} is in progress (operation ${this.operationId})`
  }
}

/** Unknown quarantine entry, or one of a connector the caller may not see. */
export class QuarantineEntryNotFound extends Schema.TaggedError<QuarantineEntryNotFound>()("QuarantineEntryNotFound", { quarantineId: Schema.String }) {
  override get message() {
    return `Quarantine entry ${this.quarantineId} not found`
  }
}

/** The connector's engine could not be started or reached; safe to retry. */
export class EngineUnavailable extends Schema.TaggedError<EngineUnavailable>()("EngineUnavailable", { connectorId: Schema.String, reason: Schema.String }) {
  override get message() {
    return `The engine of connector ${this.connectorId} is unavailable: ${this.reason}`
  }
}

/** The source could not be asked its current WAL position; safe to retry. */
export class SourcePositionUnavailable extends Schema.TaggedError<SourcePositionUnavailable>()("SourcePositionUnavailable", { connectorId: Schema.String, reason: Schema.String }) {
  override get message() {
    return `The source of connector ${this.connectorId} could not be asked its WAL position: ${this.reason}`
  }
}

/** Work that needs a set-up engine (a reset) on a connector whose engine was never set up. */
export class EngineNotSetUp extends Schema.TaggedError<EngineNotSetUp>()("EngineNotSetUp", { connectorId: Schema.String, status: Schema.String }) {
  override get message() {
    return `The engine of connector ${this.connectorId} was never set up (branching_engine_status ${this.status}); set it up with POST /v1/connectors/${this.connectorId}/engine-setup`
  }
}

/** A rollback with no replaced pipeline within its grace to return to. */
export class RollbackUnavailable extends Schema.TaggedError<RollbackUnavailable>()("RollbackUnavailable", { connectorId: Schema.String }) {
  override get message() {
    return `Connector ${this.connectorId} has no replaced pipeline to roll back to (none was cut over from, or its grace ended and it was cleaned up)`
  }
}

/** The engines have no common certificate authority to hand to clients (self-signed engines). */
export class EngineAuthorityNotConfigured extends Schema.TaggedError<EngineAuthorityNotConfigured>()("EngineAuthorityNotConfigured", {}) {
  override get message() {
    return "The branching engines' certificates have no common authority here: each engine's certificate is its own (use sslmode=require without verification, or configure ENGINE_CERT_ISSUER and ENGINE_CA_CERT_FILE)"
  }
}

/** The engines' certificate authority could not be read. */
export class EngineAuthorityUnavailable extends Schema.TaggedError<EngineAuthorityUnavailable>()("EngineAuthorityUnavailable", { reason: Schema.String }) {
  override get message() {
    return `The branching engines' certificate authority is unavailable: ${this.reason}`
  }
}

export type ConnectorError =
  | Unauthenticated
  | NotAMember
  | PermissionDenied
  | InvalidArgument
  | EnvironmentNotFound
  | EnvironmentNameTaken
  | AwsAccountConnectionNotFound
  | InvalidRoleArn
  | AwsAccountMismatch
  | ExternalIdMismatch
  | PlanLimitReached
  | BillingUnavailable
  | IdentityUnavailable
  | SecretStoreFailure
  | ConnectorNotFound
  | UnsupportedService
  | InvalidConnectionDetails
  | PrivateLinkRequired
  | PreflightFailed
  | DiscoveryPrerequisitesFailed
  | OperationsUnavailable
  | DecisionsConflict
  | GrantScriptUnavailable
  | DeletionLocked
  | DeleteInProgress
  | ConnectorStateInvalid
  | EngineSetupPrerequisitesFailed
  | EngineSetupInProgress
  | QuarantineEntryNotFound
  | EngineUnavailable
  | SourcePositionUnavailable
  | EngineNotSetUp
  | RollbackUnavailable
  | EngineAuthorityNotConfigured
  | EngineAuthorityUnavailable

/** The one table from domain error to wire error. */
export const wireErrors = {
  ...accessWireErrors,
  InvalidArgument: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: (e) => ({ field: e.field }) },
  EnvironmentNotFound: { code: Code.NotFound, reason: "ENVIRONMENT_NOT_FOUND", metadata: (e) => ({ environment_id: e.environmentId }) },
  EnvironmentNameTaken: { code: Code.AlreadyExists, reason: "ENVIRONMENT_NAME_TAKEN", metadata: (e) => ({ org_id: e.orgId, name: e.name }) },
  AwsAccountConnectionNotFound: {
    code: Code.NotFound,
    reason: "AWS_ACCOUNT_CONNECTION_NOT_FOUND",
    metadata: (e) => ({ aws_account_connection_id: e.connectionId })
  },
  InvalidRoleArn: { code: Code.InvalidArgument, reason: "INVALID_ROLE_ARN", metadata: (e) => ({ role_arn: e.roleArn }) },
  AwsAccountMismatch: { code: Code.InvalidArgument, reason: "AWS_ACCOUNT_MISMATCH", metadata: (e) => ({ expected: e.expected, actual: e.actual }) },
  ExternalIdMismatch: { code: Code.InvalidArgument, reason: "EXTERNAL_ID_MISMATCH" },
  ...planLimitWireErrors,
  SecretStoreFailure: { code: Code.Internal, reason: "SECRET_STORE_FAILURE", metadata: (e) => ({ reason: e.reason }) },
  ConnectorNotFound: { code: Code.NotFound, reason: "CONNECTOR_NOT_FOUND", metadata: (e) => ({ connector_id: e.connectorId }) },
  UnsupportedService: { code: Code.InvalidArgument, reason: "UNSUPPORTED_SERVICE", metadata: (e) => ({ service_name: e.serviceName }) },
  InvalidConnectionDetails: { code: Code.InvalidArgument, reason: "INVALID_CONNECTION_DETAILS", metadata: (e) => ({ service_name: e.serviceName }) },
  PrivateLinkRequired: { code: Code.InvalidArgument, reason: "PRIVATE_LINK_REQUIRED", metadata: (e) => ({ environment_id: e.environmentId }) },
  // The report rides as JSON in the ErrorInfo metadata: the gateway answers it as the 422 body.
  PreflightFailed: { code: Code.FailedPrecondition, reason: "PREFLIGHT_FAILED", metadata: (e) => ({ preflight_report: JSON.stringify(e.report) }) },
  // The checks ride as JSON in the ErrorInfo metadata: the gateway answers them in the 422 body.
  DiscoveryPrerequisitesFailed: {
    code: Code.FailedPrecondition,
    reason: "DISCOVERY_PREREQUISITES_FAILED",
    metadata: (e) => ({ prerequisites: JSON.stringify(e.checks) })
  },
  OperationsUnavailable: { code: Code.Unavailable, reason: "OPERATIONS_UNAVAILABLE" },
  DecisionsConflict: { code: Code.Aborted, reason: "REPLICA_IDENTITY_DECISIONS_CONFLICT", metadata: (e) => ({ connector_id: e.connectorId }) },
  GrantScriptUnavailable: { code: Code.FailedPrecondition, reason: "GRANT_SCRIPT_PREREQUISITES_FAILED" },
  DeletionLocked: { code: Code.FailedPrecondition, reason: "CONNECTOR_DELETION_LOCKED", metadata: (e) => ({ connector_id: e.connectorId }) },
  DeleteInProgress: {
    code: Code.FailedPrecondition,
    reason: "CONNECTOR_DELETE_IN_PROGRESS",
    metadata: (e) => ({ connector_id: e.connectorId, operation_id: e.operationId })
  },
  ConnectorStateInvalid: { code: Code.InvalidArgument, reason: "CONNECTOR_STATE_INVALID", metadata: (e) => ({ connector_id: e.connectorId }) },
  // The checks ride as JSON in the ErrorInfo metadata: the gateway answers them in the 422 body.
  EngineSetupPrerequisitesFailed: {
    code: Code.FailedPrecondition,
    reason: "ENGINE_SETUP_PREREQUISITES_FAILED",
    metadata: (e) => ({ prerequisites: JSON.stringify(e.checks) })
  },
  EngineSetupInProgress: {
    code: Code.Aborted,
    reason: "ENGINE_SETUP_IN_PROGRESS",
    metadata: (e) => ({ connector_id: e.connectorId, operation_id: e.operationId })
  },
  QuarantineEntryNotFound: { code: Code.NotFound, reason: "QUARANTINE_ENTRY_NOT_FOUND", metadata: (e) => ({ quarantine_id: e.quarantineId }) },
  EngineUnavailable: { code: Code.Unavailable, reason: "ENGINE_UNAVAILABLE", metadata: (e) => ({ connector_id: e.connectorId }) },
  SourcePositionUnavailable: { code: Code.Unavailable, reason: "SOURCE_UNAVAILABLE", metadata: (e) => ({ connector_id: e.connectorId }) },
  EngineNotSetUp: { code: Code.FailedPrecondition, reason: "ENGINE_NOT_SET_UP", metadata: (e) => ({ connector_id: e.connectorId, status: e.status }) },
  RollbackUnavailable: { code: Code.FailedPrecondition, reason: "ROLLBACK_UNAVAILABLE", metadata: (e) => ({ connector_id: e.connectorId }) },
  EngineAuthorityNotConfigured: { code: Code.NotFound, reason: "ENGINE_CA_NOT_CONFIGURED" },
  EngineAuthorityUnavailable: { code: Code.Unavailable, reason: "ENGINE_CA_UNAVAILABLE" }
} satisfies WireTable<ConnectorError>

export const toWireError = wireErrorFrom<ConnectorError>(wireErrors)
