import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import type { SessionGrant } from "@scion/proto/scion/auth/v1/auth_pb"
import * as pb from "@scion/proto/scion/identity/v1/identity_pb"
import * as ops from "@scion/proto/scion/operation/v1/operation_pb"
import type * as S from "../schemas.js"

/**
 * Proto → the interface's JSON. Identity breaking its own contract (a required message or
 * timestamp missing) is a bug, not a client error: it throws, and the edge answers 500.
 */
/**
 * A message field proto3 makes optional but a unit always sets. Missing means the unit broke its
 * contract: a defect (500, logged), never a client error.
 */
export const requiredFrom =
  (unit: string) =>
  <A>(value: A | undefined, what: string): A => {
    if (value === undefined) throw new Error(`${unit} response is missing ${what}`)
    return value
  }

const required = requiredFrom("identity")

const iso = (ts: Timestamp | undefined, what = "a timestamp"): string => timestampDate(required(ts, what)).toISOString()
const isoOrNull = (ts: Timestamp | undefined): string | null => (ts === undefined ? null : timestampDate(ts).toISOString())
const nonEmptyOrNull = (s: string | undefined): string | null => (s === undefined || s === "" ? null : s)

export const user = (u: pb.User | undefined): typeof S.User.Type => {
  const v = required(u, "user")
  return { user_id: v.userId, email: v.email, full_name: v.fullName, created_at: iso(v.createdAt), updated_at: iso(v.updatedAt) }
}

export const sessionGrant = (g: SessionGrant | undefined): typeof S.SessionGrant.Type => {
  const v = required(g, "session")
  return { user: user(v.user), session_token: v.sessionToken, expires_at: iso(v.expiresAt) }
}

export const membership = (m: pb.OrgMembership): typeof S.OrgMembership.Type => ({
  org_id: m.orgId,
  name: m.name,
  role: m.role,
  joined_at: iso(m.joinedAt)
})

export const orgDetails = (o: pb.OrgDetails | undefined): typeof S.OrgDetails.Type => {
  const v = required(o, "org")
  return {
    org_id: v.orgId,
    name: v.name,
    created_at: iso(v.createdAt),
    my_role: v.myRole,
    my_permissions: v.myPermissions,
    member_count: v.memberCount
  }
}

export const member = (m: pb.Member | undefined): typeof S.Member.Type => {
  const v = required(m, "member")
  return { user_id: v.userId, email: v.email, full_name: v.fullName, role: v.role, joined_at: iso(v.joinedAt) }
}

export const role = (r: pb.Role): typeof S.Role.Type => ({
  id: r.id,
  role_key: r.roleKey,
  name: r.name,
  description: r.description,
  permissions: r.permissions
})

export const invite = (i: pb.Invite | undefined): typeof S.Invite.Type => {
  const v = required(i, "invite")
  return {
    invite_id: v.inviteId,
    invite_token: nonEmptyOrNull(v.inviteToken),
    email: v.email,
    role_key: v.roleKey,
    invited_by_user_id: nonEmptyOrNull(v.invitedByUserId),
    org_id: v.orgId,
    org_name: v.orgName,
    created_at: iso(v.createdAt),
    expires_at: iso(v.expiresAt)
  }
}

const modes = {
  [pb.ApiKeyMode.UNSPECIFIED]: undefined,
  [pb.ApiKeyMode.LIVE]: "live",
  [pb.ApiKeyMode.TEST]: "test"
} as const satisfies Record<pb.ApiKeyMode, typeof S.ApiKeyMode.Type | undefined>

export const modeToProto = {
  live: pb.ApiKeyMode.LIVE,
  test: pb.ApiKeyMode.TEST
} as const satisfies Record<typeof S.ApiKeyMode.Type, pb.ApiKeyMode>

const statuses = {
  [pb.ApiKeyStatus.UNSPECIFIED]: undefined,
  [pb.ApiKeyStatus.ACTIVE]: "active",
  [pb.ApiKeyStatus.REVOKED]: "revoked"
} as const satisfies Record<pb.ApiKeyStatus, typeof S.ApiKeyStatus.Type | undefined>

export const apiKey = (k: pb.ApiKey | undefined): typeof S.ApiKey.Type => {
  const v = required(k, "api_key")
  return {
    api_key_id: v.apiKeyId,
    org_id: v.orgId,
    name: v.name,
    mode: required(modes[v.mode], "an api key mode"),
    key_prefix: v.keyPrefix,
    role_id: v.roleId,
    role_key: v.roleKey,
    scopes: v.scopes,
    status: required(statuses[v.status], "an api key status"),
    created_by: nonEmptyOrNull(v.createdBy),
    created_at: iso(v.createdAt),
    expires_at: isoOrNull(v.expiresAt),
    revoked_at: isoOrNull(v.revokedAt),
    last_used_at: isoOrNull(v.lastUsedAt)
  }
}

const operationTypes = {
  [ops.OperationType.UNSPECIFIED]: undefined,
  [ops.OperationType.CONNECTOR_ENGINE_SETUP]: "connector_engine_setup",
  [ops.OperationType.CONNECTOR_RESET]: "connector_reset",
  [ops.OperationType.CONNECTOR_DEEP_RESET]: "connector_deep_reset",
  [ops.OperationType.CONNECTOR_DISCOVERY]: "connector_discovery",
  [ops.OperationType.CONNECTOR_DELETE]: "connector_delete",
  [ops.OperationType.CONNECTOR_SECRET_PURGE]: "connector_secret_purge",
  [ops.OperationType.CONNECTOR_ROLLOUT]: "connector_rollout",
  [ops.OperationType.CONNECTOR_REPLICATION_ROLLBACK]: "connector_replication_rollback",
  [ops.OperationType.CONNECTOR_CDC_CUTOVER]: "connector_cdc_cutover",
  [ops.OperationType.CONNECTOR_CDC_SHADOW_CLEANUP]: "connector_cdc_shadow_cleanup",
  [ops.OperationType.ENVIRONMENT_DEPLOY]: "environment_deploy",
  [ops.OperationType.ENVIRONMENT_DESTROY]: "environment_destroy",
  [ops.OperationType.BRANCH_CREATE]: "branch_create",
  [ops.OperationType.BRANCH_DELETE]: "branch_delete",
  [ops.OperationType.BRANCH_RESET]: "branch_reset",
  [ops.OperationType.SNAPSHOT_CREATE]: "snapshot_create",
  [ops.OperationType.SNAPSHOT_DELETE]: "snapshot_delete"
} as const satisfies Record<ops.OperationType, typeof S.OperationType.Type | undefined>

const operationStatuses = {
  [ops.OperationStatus.UNSPECIFIED]: undefined,
  [ops.OperationStatus.PENDING]: "pending",
  [ops.OperationStatus.RUNNING]: "running",
  [ops.OperationStatus.COMPLETED]: "completed",
  [ops.OperationStatus.FAILED]: "failed"
} as const satisfies Record<ops.OperationStatus, typeof S.OperationStatus.Type | undefined>

/**
 * An accepted operation's status as the interface names it, among those the handle's schema
 * allows; anything else (unset on the wire) is a contract violation.
 */
export const acceptedStatus = <A extends typeof S.OperationStatus.Type>(unit: string, status: ops.OperationStatus, allowed: ReadonlyArray<A>): A => {
  const name = operationStatuses[status]
  return requiredFrom(unit)(allowed.find((s) => s === name), "a known operation status")
}

/** The interface's Operation: setup_status only for connector_engine_setup, absent otherwise. */
export const operation = (o: ops.Operation | undefined): typeof S.Operation.Type => {
  const v = required(o, "operation")
  const type = required(operationTypes[v.type], "an operation type")
  return {
    id: v.id,
    org_id: v.orgId,
    type,
    resource_id: v.resourceId,
    status: required(operationStatuses[v.status], "an operation status"),
    stage: v.stage ?? null,
    stage_label: v.stageLabel ?? null,
    progress: v.progress ?? null,
    result: v.result ?? null,
    error: v.error ?? null,
    ...(type === "connector_engine_setup" ? { setup_status: v.setupStatus ?? {} } : {}),
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt),
    started_at: isoOrNull(v.startedAt),
    completed_at: isoOrNull(v.completedAt)
  }
}
