import type { RoleKey } from "./roles.js"
import type { ApiKeyMode } from "./secrets.js"

export interface User {
  readonly id: string
  readonly email: string
  readonly fullName: string
  readonly emailVerified: boolean
  readonly createdAt: Date
  readonly updatedAt: Date
}

export interface SessionGrant {
  readonly user: User
  readonly sessionToken: string
  readonly expiresAt: Date
}

export interface OrgMembership {
  readonly orgId: string
  readonly name: string
  readonly roleKey: RoleKey
  readonly joinedAt: Date
}

export interface OrgDetails {
  readonly orgId: string
  readonly name: string
  readonly createdAt: Date
  readonly myRole: RoleKey
  readonly myPermissions: ReadonlyArray<string>
  readonly memberCount: number
}

export interface Member {
  readonly userId: string
  readonly email: string
  readonly fullName: string
  readonly roleKey: RoleKey
  readonly joinedAt: Date
}

export interface Invite {
  readonly id: string
  /** Null when the caller may not manage invites. */
  readonly token: string | null
  readonly email: string
  readonly roleKey: RoleKey
  readonly invitedByUserId: string | null
  readonly orgId: string
  readonly orgName: string
  readonly createdAt: Date
  readonly expiresAt: Date
}

export interface ApiKey {
  readonly id: string
  readonly orgId: string
  readonly name: string
  readonly mode: ApiKeyMode
  readonly keyPrefix: string
  readonly roleId: string
  readonly roleKey: RoleKey
  readonly scopes: ReadonlyArray<string>
  readonly status: "active" | "revoked"
  readonly createdBy: string | null
  readonly createdAt: Date
  readonly expiresAt: Date | null
  readonly revokedAt: Date | null
  readonly lastUsedAt: Date | null
}

export interface Project {
  readonly id: string
  readonly orgId: string
  readonly name: string
  readonly description: string
  readonly createdBy: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}
