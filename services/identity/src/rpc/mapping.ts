import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { PrincipalKind, type PrincipalSchema } from "@scion/proto/scion/auth/v1/auth_pb"
import {
  ApiKeyMode,
  ApiKeyStatus,
  type ApiKeySchema,
  type InviteSchema,
  type MemberSchema,
  type OrgDetailsSchema,
  type OrgMembershipSchema,
  type RoleSchema,
  type UserSchema
} from "@scion/proto/scion/identity/v1/identity_pb"
import type { Principal } from "@scion/kit"
import type * as Domain from "../domain/models.js"
import type { Role } from "../domain/roles.js"
import type { ApiKeyMode as DomainMode } from "../domain/secrets.js"

type Init<S extends DescMessage> = MessageInitShape<S>

const ts = timestampFromDate

export const userToProto = (user: Domain.User): Init<typeof UserSchema> => ({
  userId: user.id,
  email: user.email,
  fullName: user.fullName,
  emailVerified: user.emailVerified,
  createdAt: ts(user.createdAt),
  updatedAt: ts(user.updatedAt)
})

export const membershipToProto = (m: Domain.OrgMembership): Init<typeof OrgMembershipSchema> => ({
  orgId: m.orgId,
  name: m.name,
  role: m.roleKey,
  joinedAt: ts(m.joinedAt)
})

export const orgDetailsToProto = (org: Domain.OrgDetails): Init<typeof OrgDetailsSchema> => ({
  orgId: org.orgId,
  name: org.name,
  createdAt: ts(org.createdAt),
  myRole: org.myRole,
  myPermissions: [...org.myPermissions],
  memberCount: org.memberCount
})

export const memberToProto = (m: Domain.Member): Init<typeof MemberSchema> => ({
  userId: m.userId,
  email: m.email,
  fullName: m.fullName,
  role: m.roleKey,
  joinedAt: ts(m.joinedAt)
})

export const roleToProto = (role: Role): Init<typeof RoleSchema> => ({
  id: role.id,
  roleKey: role.key,
  name: role.name,
  description: role.description,
  permissions: [...role.permissions]
})

export const inviteToProto = (invite: Domain.Invite): Init<typeof InviteSchema> => ({
  inviteId: invite.id,
  inviteToken: invite.token ?? "",
  email: invite.email,
  roleKey: invite.roleKey,
  ...(invite.invitedByUserId !== null ? { invitedByUserId: invite.invitedByUserId } : {}),
  orgId: invite.orgId,
  orgName: invite.orgName,
  createdAt: ts(invite.createdAt),
  expiresAt: ts(invite.expiresAt)
})

export const modeFromProto = (mode: ApiKeyMode): DomainMode => (mode === ApiKeyMode.TEST ? "test" : "live")

export const apiKeyToProto = (key: Domain.ApiKey): Init<typeof ApiKeySchema> => ({
  apiKeyId: key.id,
  orgId: key.orgId,
  name: key.name,
  mode: key.mode === "test" ? ApiKeyMode.TEST : ApiKeyMode.LIVE,
  keyPrefix: key.keyPrefix,
  roleId: key.roleId,
  roleKey: key.roleKey,
  scopes: [...key.scopes],
  status: key.status === "active" ? ApiKeyStatus.ACTIVE : ApiKeyStatus.REVOKED,
  ...(key.createdBy !== null ? { createdBy: key.createdBy } : {}),
  createdAt: ts(key.createdAt),
  ...(key.expiresAt !== null ? { expiresAt: ts(key.expiresAt) } : {}),
  ...(key.revokedAt !== null ? { revokedAt: ts(key.revokedAt) } : {}),
  ...(key.lastUsedAt !== null ? { lastUsedAt: ts(key.lastUsedAt) } : {})
})

export const principalToProto = (p: Principal): Init<typeof PrincipalSchema> => ({
  kind: p.kind === "api_key" ? PrincipalKind.API_KEY : p.kind === "service" ? PrincipalKind.SERVICE : PrincipalKind.USER_SESSION,
  userId: p.userId ?? "",
  sessionId: p.sessionId ?? "",
  apiKeyId: p.apiKeyId ?? "",
  orgId: p.orgId ?? "",
  roleKey: p.roleKey ?? "",
  permissions: [...p.permissions]
})
