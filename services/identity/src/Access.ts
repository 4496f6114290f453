import { type AccessCache, type AccessChange, accessCacheTtl, makeAccessCache, scopeOf, type Principal, tracedFn } from "@scion/kit"
import { randomUUID } from "node:crypto"
import { Duration, Effect, Option } from "effect"
import { ApiKeysRepo } from "./ApiKeysRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { NotAMember, PermissionDenied, RoleEscalation, SessionRequired, Unauthenticated } from "./domain/errors.js"
import { effectivePermissions, knownRole, ROLES, type Role } from "./domain/roles.js"
import { SessionsRepo } from "./SessionsRepo.js"

/** A caller's standing in one org. */
export interface OrgAccess {
  readonly orgId: string
  readonly role: Role
  readonly permissions: ReadonlyArray<string>
  /** The session's user, or the API key's creator (null once that user is deleted). */
  readonly userId: string | null
  readonly sessionId: string | null
  readonly apiKeyId: string | null
}

/**
 * The authorization policy every identity RPC goes through. The principal's signature proves who
 * called; the session or key is read once and the standing kept (ACCESS_CACHE_SECONDS, never past
 * the principal's expiry) until a change touches it: `forget` right after identity commits one,
 * and the AccessChange events (`followAccessChanges`) for the changes other replicas commit.
 */
export class Access extends Effect.Service<Access>()("@scion/identity/Access", {
  effect: Effect.gen(function* () {
    const sessions = yield* SessionsRepo
    const apiKeys = yield* ApiKeysRepo
    const outbox = yield* OutboxRepo
    const ttlMillis = Duration.toMillis(yield* Effect.orDie(accessCacheTtl))
    const standings = makeAccessCache<OrgAccess>({ ttlMillis })
    const liveSessions = makeAccessCache<{ userId: string; sessionId: string }>({ ttlMillis })
    // Never past the principal's expiry, which identity caps at an expiring key's expires_at.
    const cached = <V, E>(cache: AccessCache<V>, key: string, principal: Principal, orgId: string | null, read: Effect.Effect<V, E>) =>
      ttlMillis === 0 ? read : cache.getOrLookup(key, scopeOf(principal, orgId), principal.exp * 1000, read)

    /** A live dashboard session; API keys get SESSION_REQUIRED. */
    const session = tracedFn("Access.session")(function* (principal: Principal) {
      if (principal.kind !== "user_session") return yield* new SessionRequired()
      const sessionId = principal.sessionId
      if (sessionId === null) return yield* new Unauthenticated()
      return yield* cached(
        liveSessions,
        sessionId,
        principal,
        null,
        sessions.liveUser(sessionId).pipe(
          Effect.flatMap(Option.match({ onNone: () => new Unauthenticated(), onSome: (userId) => Effect.succeed({ userId, sessionId }) }))
        )
      )
    })

    /** The caller's role and permissions in an org: NOT_A_MEMBER when it has none there. */
    const inOrg = (principal: Principal, orgId: string): Effect.Effect<OrgAccess, Unauthenticated | NotAMember> =>
      // Services act for the platform and hold no role in any org.
      principal.kind === "service"
        ? Effect.fail(new NotAMember({ orgId }))
        : cached(standings, `${principal.apiKeyId ?? principal.sessionId}\u0000${orgId}`, principal, orgId, readInOrg(principal, orgId))

    const readInOrg = tracedFn("Access.readInOrg")(function* (principal: Principal, orgId: string): Effect.fn.Return<OrgAccess, Unauthenticated | NotAMember> {
      if (principal.kind === "api_key") {
        const key = yield* apiKeys.findActive(principal.apiKeyId ?? "")
        if (Option.isNone(key)) return yield* new Unauthenticated()
        if (key.value.orgId !== orgId) return yield* new NotAMember({ orgId })
        const role = knownRole(key.value.roleId)
        return {
          orgId,
          role,
          permissions: effectivePermissions(role, key.value.scopes),
          userId: key.value.createdBy,
          sessionId: null,
          apiKeyId: key.value.id
        }
      }
      if (principal.sessionId === null) return yield* new Unauthenticated()
      const found = yield* sessions.liveUserInOrg(principal.sessionId, orgId)
      if (Option.isNone(found)) return yield* new Unauthenticated()
      if (found.value.roleId === null) return yield* new NotAMember({ orgId })
      const role = knownRole(found.value.roleId)
      return {
        orgId,
        role,
        permissions: role.permissions,
        userId: found.value.userId,
        sessionId: principal.sessionId,
        apiKeyId: null
      }
    })

    /** inOrg plus a named permission: PERMISSION_DENIED (with the permission) when missing. */
    const require = (principal: Principal, orgId: string, permission: string) =>
      Effect.flatMap(inOrg(principal, orgId), (access) =>
        access.permissions.includes(permission) ? Effect.succeed(access) : Effect.fail(new PermissionDenied({ orgId, permission }))
      )

    /** Drops what a committed change touches, in this process (other replicas hear the event). */
    const forget = (change: AccessChange) => Effect.zipRight(standings.apply(change), liveSessions.apply(change))

    /**
     * In the transaction of a change that can take access away: the event every unit's caches
     * follow. Call `forget` with the same change once the transaction committed.
     */
    const announce = (change: AccessChange) =>
      Effect.flatMap(
        Effect.sync(() => randomUUID()),
        (id) => outbox.write(`access.changed.${id}`, { subject: "events.access.changed", payload: { ...change } })
      )

    return { session, inOrg, require, announce, forget, caches: [standings, liveSessions] as const } as const
  })
}) {}

/** A caller never grants a role ranked above its own (for an API key: the key's role). */
export const noEscalation = (access: OrgAccess, target: Role): Effect.Effect<void, RoleEscalation> =>
  target.rank > access.role.rank ? Effect.fail(new RoleEscalation({ role: target.key, callerRole: access.role.key })) : Effect.void

/** Only an owner may change an owner's role or remove an owner. */
export const ownerOnlyOnOwners = (access: OrgAccess, targetRole: Role): Effect.Effect<void, RoleEscalation> =>
  targetRole.key === "owner" && access.role.key !== "owner"
    ? Effect.fail(new RoleEscalation({ role: ROLES.owner.key, callerRole: access.role.key }))
    : Effect.void
