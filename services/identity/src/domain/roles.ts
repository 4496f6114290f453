/**
 * The org roles and their permission sets (ARCHITECTURE.md, "Identity and authorization").
 * Roles are nested: each holds every permission of the roles ranked below it. The `roles` table
 * seeded by migrations/0001_initial.sql mirrors this table; a test keeps them equal.
 */
const read = ["org.read", "billing.read", "projects.read", "connectors.read", "environments.read", "branches.read", "operations.read"] as const
const apiKeys = ["api_keys.read", "api_keys.create", "api_keys.delete"] as const
const build = ["projects.create", "projects.update", "connectors.create", "connectors.update", "branches.create", "branches.delete"] as const
const manage = ["projects.delete", "connectors.delete", "connectors.admin", "environments.manage"] as const
const access = ["org.update", "orgs.share", "orgs.invite_users", "org.remove_members"] as const
const own = ["org.delete", "billing.manage"] as const

export const PERMISSIONS = [...read, ...apiKeys, ...build, ...manage, ...access, ...own] as const
export type Permission = (typeof PERMISSIONS)[number]

export type RoleKey = "viewer" | "member" | "admin" | "owner"

export interface Role {
  readonly id: string
  readonly key: RoleKey
  readonly name: string
  readonly description: string
  readonly permissions: ReadonlyArray<Permission>
  /** viewer < member < admin < owner */
  readonly rank: number
}

const role = (key: RoleKey, name: string, description: string, permissions: ReadonlyArray<Permission>, rank: number): Role => ({
  id: `role_org_${key}`,
  key,
  name,
  description,
  permissions,
  rank
})

export const ROLES: { readonly [K in RoleKey]: Role } = {
  viewer: role("viewer", "Viewer", "Read-only access to the org and its resources", [...read], 0),
  member: role("member", "Member", "Create and modify resources such as connectors, projects and branches", [...read, ...apiKeys, ...build], 1),
  admin: role(
    "admin",
    "Admin",
    "Administrative access: members, invites and shared resources, except deleting the org",
    [...read, ...apiKeys, ...build, ...manage, ...access],
    2
  ),
  owner: role("owner", "Owner", "Full control of the org, including billing and deleting it", [...PERMISSIONS], 3)
}

/** Every org role, lowest rank first. */
export const ALL_ROLES: ReadonlyArray<Role> = [ROLES.viewer, ROLES.member, ROLES.admin, ROLES.owner]

export const OWNER_ROLE_ID = ROLES.owner.id
export const ORG_ROLE_ID_PREFIX = "role_org_"

export const roleByKey = (key: string): Role | undefined => ALL_ROLES.find((r) => r.key === key)
export const roleById = (id: string): Role | undefined => ALL_ROLES.find((r) => r.id === id)

/** A role id read back from our own tables: always one of ours. */
export const knownRole = (id: string): Role => roleById(id) ?? ROLES.viewer

/** An API key's effective permissions: its scopes when it has any, else its role's. */
export const effectivePermissions = (role: Role, scopes: ReadonlyArray<string>): ReadonlyArray<string> =>
  scopes.length > 0 ? scopes : role.permissions
