import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Field rules (edge validation → 422). Domain rules (unknown role, scope outside role, …) are
// identity's and answer 400.
// ---------------------------------------------------------------------------------------------

/** A string trimmed of surrounding whitespace, then held to min..max characters. */
const TrimmedString = (min: number, max: number, description: string) => {
  const text = `${description} (${min}..${max} characters after trimming surrounding whitespace)`
  return Schema.compose(Schema.Trim, Schema.String.pipe(Schema.minLength(min), Schema.maxLength(max))).annotations({
    description: text,
    jsonSchema: { type: "string", minLength: min, maxLength: max, description: text }
  })
}

const BoundedString = (min: number, max: number, description: string) =>
  Schema.String.pipe(Schema.minLength(min), Schema.maxLength(max)).annotations({ description })

export const Email = Schema.String.pipe(
  Schema.minLength(3),
  Schema.maxLength(254),
  Schema.filter((s) => /^[^\s@]+@[^\s@]+$/.test(s), {
    message: () => "value is not a valid email address: it must contain exactly one @",
    jsonSchema: { format: "email" }
  })
).annotations({ description: "An email address (3..254 characters, exactly one @)" })

export const Password = BoundedString(8, 128, "A password of 8..128 characters")
export const FullName = TrimmedString(1, 100, "The user's full name")
export const OrgName = TrimmedString(1, 100, "The org's name")
export const ApiKeyName = BoundedString(1, 100, "A name for the key (1..100 characters)")
export const RoleKey = BoundedString(1, 64, "An org role key: owner, admin, member or viewer")
export const RoleId = BoundedString(1, 64, "A role id: role_org_viewer, role_org_member, role_org_admin or role_org_owner")
export const Permission = BoundedString(1, 64, "A permission name such as org.read")
export const Token = BoundedString(1, 200, "An opaque token")
export const Id = BoundedString(1, 200, "An opaque id")

const isoDateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i
export const DateTimeInput = Schema.String.pipe(
  Schema.filter((s) => isoDateTime.test(s) && !Number.isNaN(Date.parse(s)), {
    message: () => "value is not a valid ISO 8601 date-time, e.g. 2030-01-31T00:00:00Z",
    jsonSchema: { format: "date-time" }
  })
).annotations({ description: "An ISO 8601 date-time with a time zone" })

/** ISO 8601 UTC with a Z, as every timestamp the API emits. */
const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })
const NullableTimestamp = Schema.NullOr(Timestamp)

// ---------------------------------------------------------------------------------------------
// Path parameters and headers
// ---------------------------------------------------------------------------------------------

export const OrgPath = Schema.Struct({ org_id: Id })
export const MemberPath = Schema.Struct({ org_id: Id, target_user_id: Id })
export const InvitePath = Schema.Struct({ org_id: Id, invite_id: Id })
export const InviteTokenPath = Schema.Struct({ invite_token: Token })
export const ApiKeyPath = Schema.Struct({ org_id: Id, api_key_id: Id })
export const OrgHeader = Schema.Struct({ "x-org-id": Id.annotations({ description: "The org the dashboard acts in" }) })

// ---------------------------------------------------------------------------------------------
// Request bodies (unknown keys are ignored)
// ---------------------------------------------------------------------------------------------

export const SignUpRequest = Schema.Struct({ email: Email, password: Password, full_name: FullName }).annotations({ identifier: "SignUpRequest" })
export const LogInRequest = Schema.Struct({ email: Email, password: Password }).annotations({ identifier: "LogInRequest" })
export const VerifyEmailRequest = Schema.Struct({ token: Token }).annotations({ identifier: "VerifyEmailRequest" })
export const UpdateMeRequest = Schema.Struct({ full_name: FullName }).annotations({ identifier: "UpdateMeRequest" })
export const CreateOrgRequest = Schema.Struct({ name: OrgName }).annotations({ identifier: "CreateOrgRequest" })
export const UpdateOrgRequest = Schema.Struct({ name: OrgName }).annotations({ identifier: "UpdateOrgRequest" })
export const UpdateMemberRoleRequest = Schema.Struct({ role_key: RoleKey }).annotations({ identifier: "UpdateMemberRoleRequest" })
export const CreateInviteRequest = Schema.Struct({ email: Email, role_key: RoleKey }).annotations({ identifier: "CreateInviteRequest" })

export const ApiKeyMode = Schema.Literal("live", "test").annotations({ identifier: "ApiKeyMode", description: "live keys start sk-scion_live_, test keys sk-scion_test_" })
export const ApiKeyStatus = Schema.Literal("active", "revoked").annotations({ identifier: "ApiKeyStatus" })

export const CreateApiKeyRequest = Schema.Struct({
  name: ApiKeyName,
  role_id: RoleId,
  scopes: Schema.optionalWith(Schema.Array(Permission).pipe(Schema.maxItems(64)), { default: () => [] }).annotations({
    description: "Permissions the key is limited to, each inside the role's; empty or absent means every permission of the role"
  }),
  expiration: Schema.optionalWith(Schema.NullOr(DateTimeInput), { default: () => null }).annotations({
    description: "When the key stops working; null or absent means it never expires"
  }),
  mode: Schema.optionalWith(ApiKeyMode, { default: () => "live" as const })
}).annotations({ identifier: "CreateApiKeyRequest" })

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

export const User = Schema.Struct({
  user_id: Schema.String,
  email: Schema.String,
  full_name: Schema.String,
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "User" })

export const SessionGrant = Schema.Struct({
  user: User,
  session_token: Schema.String.annotations({ description: "Send as Authorization: Bearer <session_token>" }),
  expires_at: Timestamp
}).annotations({ identifier: "SessionGrant" })

export const OrgMembership = Schema.Struct({
  org_id: Schema.String,
  name: Schema.String,
  role: Schema.String.annotations({ description: "The caller's role_key" }),
  joined_at: Timestamp
}).annotations({ identifier: "OrgMembership", description: "Org membership summary" })

export const OrgDetails = Schema.Struct({
  org_id: Schema.String,
  name: Schema.String,
  created_at: Timestamp,
  my_role: Schema.String,
  my_permissions: Schema.Array(Schema.String),
  member_count: Schema.Int
}).annotations({ identifier: "OrgDetails", description: "Active org details" })

export const Me = Schema.Struct({
  user: User,
  has_orgs: Schema.Boolean,
  default_org_id: Schema.NullOr(Schema.String).annotations({ description: "The first org, or null" })
}).annotations({ identifier: "Me" })

export const Bootstrap = Schema.Struct({
  user: User,
  orgs: Schema.Array(OrgMembership),
  active_org: OrgDetails
}).annotations({ identifier: "Bootstrap" })

export const MyOrgs = Schema.Struct({ orgs: Schema.Array(OrgMembership) }).annotations({ identifier: "MyOrgs" })

export const Member = Schema.Struct({
  user_id: Schema.String,
  email: Schema.String,
  full_name: Schema.String,
  role: Schema.String,
  joined_at: Timestamp
}).annotations({ identifier: "Member" })

export const MemberRoleUpdated = Schema.Struct({
  message: Schema.String,
  user_id: Schema.String,
  role_key: Schema.String,
  member: Member
}).annotations({ identifier: "MemberRoleUpdated" })

export const Role = Schema.Struct({
  id: Schema.String,
  role_key: Schema.String,
  name: Schema.String,
  description: Schema.String,
  permissions: Schema.Array(Schema.String)
}).annotations({ identifier: "Role" })

export const Invite = Schema.Struct({
  invite_id: Schema.String,
  invite_token: Schema.NullOr(Schema.String).annotations({ description: "null when the caller may not manage invites" }),
  email: Schema.String,
  role_key: Schema.String,
  invited_by_user_id: Schema.NullOr(Schema.String).annotations({ description: "null once the inviting user is deleted" }),
  org_id: Schema.String,
  org_name: Schema.String,
  created_at: Timestamp,
  expires_at: Timestamp
}).annotations({ identifier: "Invite" })

export const PendingInvites = Schema.Struct({ invites: Schema.Array(Invite) }).annotations({ identifier: "PendingInvites" })

export const InviteAccepted = Schema.Struct({ message: Schema.String, org: OrgDetails }).annotations({ identifier: "InviteAccepted" })

const apiKeyFields = {
  api_key_id: Schema.String,
  org_id: Schema.String,
  name: Schema.String,
  mode: ApiKeyMode,
  key_prefix: Schema.String.annotations({ description: "The first characters of the secret, enough to recognise it" }),
  role_id: Schema.String,
  role_key: Schema.String,
  scopes: Schema.Array(Schema.String),
  status: ApiKeyStatus,
  created_by: Schema.NullOr(Schema.String).annotations({ description: "null once the creating user is deleted" }),
  created_at: Timestamp,
  expires_at: NullableTimestamp,
  revoked_at: NullableTimestamp,
  last_used_at: NullableTimestamp
}

export const ApiKey = Schema.Struct(apiKeyFields).annotations({ identifier: "ApiKey", description: "An org API key; never carries the secret" })

export const CreatedApiKey = Schema.Struct({
  ...apiKeyFields,
  secret: Schema.String.annotations({ description: "The key itself, shown once: send as Authorization: Bearer <secret>" })
}).annotations({ identifier: "CreatedApiKey" })

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

export const OperationPath = Schema.Struct({ operation_id: Id })

/** `wait`: an integer number of seconds from 0 to 10, as a query string. */
export const WaitSeconds = Schema.NumberFromString.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 0 && n <= 10, {
    message: () => "Input should be an integer from 0 to 10",
    jsonSchema: { type: "integer", minimum: 0, maximum: 10 }
  })
).annotations({
  description: "Seconds to hold the request until the operation is completed or failed (0..10). Omitted or 0: answer at once.",
  jsonSchema: { type: "integer", minimum: 0, maximum: 10 }
})

export const OperationQuery = Schema.Struct({ wait: Schema.optional(WaitSeconds) })

export const OperationType = Schema.Literal(
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
  "branch_reset",
  "snapshot_create",
  "snapshot_delete"
).annotations({
  identifier: "OperationType",
  description: "The interface's operation types, plus our extensions branch_reset (POST /v1/branches/{branch_id}/reset), snapshot_create and snapshot_delete (connector snapshots)"
})

export const OperationStatus = Schema.Literal("pending", "running", "completed", "failed").annotations({
  identifier: "OperationStatus",
  description: "pending → running → completed | failed; completed and failed are terminal"
})

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const Operation = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  type: OperationType,
  resource_id: Schema.String.annotations({ description: "Resource acted on (for branch_create, the branch id)" }),
  status: OperationStatus,
  stage: Schema.NullOr(Schema.String).annotations({ description: "Raw machine token kept for older clients; prefer stage_label" }),
  stage_label: Schema.NullOr(Schema.String).annotations({ description: "Human-readable stage; null means not started" }),
  progress: Schema.NullOr(Schema.Int).annotations({ description: "Best-effort percentage 0..100, never decreasing; null when no estimate" }),
  result: Schema.NullOr(JsonObject).annotations({ description: "Outcome on completion" }),
  error: Schema.NullOr(Schema.String).annotations({ description: "Message when failed" }),
  setup_status: Schema.optional(JsonObject).annotations({ description: "Setup progress detail; present only for connector_engine_setup" }),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: NullableTimestamp.annotations({ description: "null until work starts" }),
  completed_at: NullableTimestamp.annotations({ description: "null until finished" })
}).annotations({ identifier: "Operation" })
