import { BillingUnavailable, Code, PlanLimitReached, planLimitWireErrors, wireErrorFrom, type WireTable } from "@scion/kit"
import { Schema } from "effect"

/** No usable credentials: missing, unknown, revoked or expired token or session. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {}) {
  override get message() {
    return "Authentication required: the token is missing, invalid, revoked or expired"
  }
}

/** Wrong email or wrong password: deliberately the same answer for both. */
export class InvalidCredentials extends Schema.TaggedError<InvalidCredentials>()("InvalidCredentials", {}) {
  override get message() {
    return "Invalid email or password"
  }
}

export class SessionRequired extends Schema.TaggedError<SessionRequired>()("SessionRequired", {}) {
  override get message() {
    return "This action needs a dashboard session; API keys are not accepted"
  }
}

export class NotAMember extends Schema.TaggedError<NotAMember>()("NotAMember", { orgId: Schema.String }) {
  override get message() {
    return `You are not a member of org ${this.orgId}`
  }
}

export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  orgId: Schema.String,
  permission: Schema.String
}) {
  override get message() {
    return `Permission ${this.permission} is required in org ${this.orgId}`
  }
}

/** A caller granting more than it holds, or acting on an owner without being one. */
export class RoleEscalation extends Schema.TaggedError<RoleEscalation>()("RoleEscalation", {
  role: Schema.String,
  callerRole: Schema.String
}) {
  override get message() {
    return `Your role ${this.callerRole} cannot grant or change the role ${this.role}`
  }
}

export class InviteEmailMismatch extends Schema.TaggedError<InviteEmailMismatch>()("InviteEmailMismatch", {}) {
  override get message() {
    return "This invite was sent to a different email address"
  }
}

export class EmailNotVerified extends Schema.TaggedError<EmailNotVerified>()("EmailNotVerified", { email: Schema.String }) {
  override get message() {
    return `Verify ${this.email} before accepting invites`
  }
}

export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  field: Schema.String,
  message: Schema.String
}) {}

export class UnknownRole extends Schema.TaggedError<UnknownRole>()("UnknownRole", { role: Schema.String }) {
  override get message() {
    return `Unknown role: ${this.role}`
  }
}

export class NonOrgRole extends Schema.TaggedError<NonOrgRole>()("NonOrgRole", { roleId: Schema.String }) {
  override get message() {
    return `${this.roleId} is not an org role; use role_org_viewer, role_org_member, role_org_admin or role_org_owner`
  }
}

export class ScopeOutsideRole extends Schema.TaggedError<ScopeOutsideRole>()("ScopeOutsideRole", {
  scope: Schema.String,
  roleId: Schema.String
}) {
  override get message() {
    return `Scope ${this.scope} is not a permission of ${this.roleId}`
  }
}

export class InvalidVerificationToken extends Schema.TaggedError<InvalidVerificationToken>()("InvalidVerificationToken", {}) {
  override get message() {
    return "The email verification token is invalid, used or expired"
  }
}

export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", { email: Schema.String }) {
  override get message() {
    return `An account already exists for ${this.email}`
  }
}

export class AlreadyMember extends Schema.TaggedError<AlreadyMember>()("AlreadyMember", { orgId: Schema.String, email: Schema.String }) {
  override get message() {
    return `${this.email} is already a member of org ${this.orgId}`
  }
}

export class MemberNotFound extends Schema.TaggedError<MemberNotFound>()("MemberNotFound", { orgId: Schema.String, userId: Schema.String }) {
  override get message() {
    return `User ${this.userId} is not a member of org ${this.orgId}`
  }
}

export class InviteNotFound extends Schema.TaggedError<InviteNotFound>()("InviteNotFound", {}) {
  override get message() {
    return "Invite not found, or no longer pending"
  }
}

export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()("ApiKeyNotFound", { apiKeyId: Schema.String }) {
  override get message() {
    return `API key ${this.apiKeyId} not found or already revoked`
  }
}

export class LastOwner extends Schema.TaggedError<LastOwner>()("LastOwner", { orgId: Schema.String }) {
  override get message() {
    return `Org ${this.orgId} must keep at least one owner`
  }
}

export class SoleOwner extends Schema.TaggedError<SoleOwner>()("SoleOwner", {
  orgs: Schema.Array(Schema.Struct({ orgId: Schema.String, name: Schema.String }))
}) {
  override get message() {
    const names = this.orgs.map((o) => `${o.name} (${o.orgId})`).join(", ")
    return `You are the sole owner of: ${names}; transfer ownership or delete those orgs first`
  }
}

export class LastOrg extends Schema.TaggedError<LastOrg>()("LastOrg", { orgId: Schema.String }) {
  override get message() {
    return `Org ${this.orgId} is your last org and cannot be deleted`
  }
}

/** IssueServiceToken with a credential that is not the deployment's. */
export class ServiceCredentialInvalid extends Schema.TaggedError<ServiceCredentialInvalid>()("ServiceCredentialInvalid", {}) {
  override get message() {
    return "The service credential is not valid"
  }
}

/** IssueServiceToken while identity has no SERVICE_CREDENTIAL configured. */
export class ServiceCredentialNotConfigured extends Schema.TaggedError<ServiceCredentialNotConfigured>()("ServiceCredentialNotConfigured", {}) {
  override get message() {
    return "Service tokens are disabled: SERVICE_CREDENTIAL is not configured"
  }
}

/** Unknown, or of an org the caller does not belong to: the same answer for both (never 403). */
export class ProjectNotFound extends Schema.TaggedError<ProjectNotFound>()("ProjectNotFound", { projectId: Schema.String }) {
  override get message() {
    return `Project ${this.projectId} not found`
  }
}

/** Project names are unique per org, compared case-insensitively. */
export class ProjectNameTaken extends Schema.TaggedError<ProjectNameTaken>()("ProjectNameTaken", { orgId: Schema.String, name: Schema.String }) {
  override get message() {
    return `A project named ${this.name} already exists in org ${this.orgId}`
  }
}

/** An update that names no field to change. */
export class NoFieldsToUpdate extends Schema.TaggedError<NoFieldsToUpdate>()("NoFieldsToUpdate", {}) {
  override get message() {
    return "No fields to update: provide at least one of name, description"
  }
}

// Plan limits are shared by every creating unit (kit/plan-limits.ts).
export { BillingUnavailable, PlanLimitReached }


export type IdentityError =
  | ServiceCredentialInvalid
  | ServiceCredentialNotConfigured
  | Unauthenticated
  | InvalidCredentials
  | SessionRequired
  | NotAMember
  | PermissionDenied
  | RoleEscalation
  | InviteEmailMismatch
  | EmailNotVerified
  | InvalidArgument
  | UnknownRole
  | NonOrgRole
  | ScopeOutsideRole
  | InvalidVerificationToken
  | EmailTaken
  | AlreadyMember
  | MemberNotFound
  | InviteNotFound
  | ApiKeyNotFound
  | LastOwner
  | SoleOwner
  | LastOrg
  | ProjectNotFound
  | ProjectNameTaken
  | NoFieldsToUpdate
  | PlanLimitReached
  | BillingUnavailable

/** The one table from domain error to wire error: Connect code, reason and metadata. */
export const wireErrors = {
  ServiceCredentialInvalid: { code: Code.Unauthenticated, reason: "SERVICE_CREDENTIAL_INVALID" },
  ServiceCredentialNotConfigured: { code: Code.FailedPrecondition, reason: "SERVICE_CREDENTIAL_NOT_CONFIGURED" },
  Unauthenticated: { code: Code.Unauthenticated, reason: "UNAUTHENTICATED" },
  InvalidCredentials: { code: Code.Unauthenticated, reason: "INVALID_CREDENTIALS" },
  SessionRequired: { code: Code.Unauthenticated, reason: "SESSION_REQUIRED" },
  NotAMember: { code: Code.PermissionDenied, reason: "NOT_A_MEMBER", metadata: (e) => ({ org_id: e.orgId }) },
  PermissionDenied: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", metadata: (e) => ({ permission: e.permission, org_id: e.orgId }) },
  RoleEscalation: { code: Code.PermissionDenied, reason: "ROLE_ESCALATION", metadata: (e) => ({ role: e.role, caller_role: e.callerRole }) },
  InviteEmailMismatch: { code: Code.PermissionDenied, reason: "INVITE_EMAIL_MISMATCH" },
  EmailNotVerified: { code: Code.PermissionDenied, reason: "EMAIL_NOT_VERIFIED", metadata: (e) => ({ email: e.email }) },
  InvalidArgument: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: (e) => ({ field: e.field }) },
  UnknownRole: { code: Code.InvalidArgument, reason: "UNKNOWN_ROLE", metadata: (e) => ({ role: e.role }) },
  NonOrgRole: { code: Code.InvalidArgument, reason: "NON_ORG_ROLE", metadata: (e) => ({ role_id: e.roleId }) },
  ScopeOutsideRole: { code: Code.InvalidArgument, reason: "SCOPE_OUTSIDE_ROLE", metadata: (e) => ({ scope: e.scope, role_id: e.roleId }) },
  InvalidVerificationToken: { code: Code.InvalidArgument, reason: "INVALID_VERIFICATION_TOKEN" },
  EmailTaken: { code: Code.AlreadyExists, reason: "EMAIL_TAKEN", metadata: (e) => ({ email: e.email }) },
  AlreadyMember: { code: Code.AlreadyExists, reason: "ALREADY_MEMBER", metadata: (e) => ({ org_id: e.orgId, email: e.email }) },
  MemberNotFound: { code: Code.NotFound, reason: "MEMBER_NOT_FOUND", metadata: (e) => ({ org_id: e.orgId, user_id: e.userId }) },
  InviteNotFound: { code: Code.NotFound, reason: "INVITE_NOT_FOUND" },
  ApiKeyNotFound: { code: Code.NotFound, reason: "API_KEY_NOT_FOUND", metadata: (e) => ({ api_key_id: e.apiKeyId }) },
  LastOwner: { code: Code.FailedPrecondition, reason: "LAST_OWNER", metadata: (e) => ({ org_id: e.orgId }) },
  SoleOwner: {
    code: Code.FailedPrecondition,
    reason: "SOLE_OWNER",
    metadata: (e) => ({ org_ids: e.orgs.map((o) => o.orgId).join(","), org_names: e.orgs.map((o) => o.name).join(",") })
  },
  LastOrg: { code: Code.FailedPrecondition, reason: "LAST_ORG", metadata: (e) => ({ org_id: e.orgId }) },
  ProjectNotFound: { code: Code.NotFound, reason: "PROJECT_NOT_FOUND", metadata: (e) => ({ project_id: e.projectId }) },
  ProjectNameTaken: { code: Code.AlreadyExists, reason: "PROJECT_NAME_TAKEN", metadata: (e) => ({ org_id: e.orgId, name: e.name }) },
  NoFieldsToUpdate: { code: Code.InvalidArgument, reason: "NO_FIELDS_TO_UPDATE" },
  ...planLimitWireErrors
} satisfies WireTable<IdentityError>

export const toWireError = wireErrorFrom<IdentityError>(wireErrors)
