import { Clock, Effect, Schema } from "effect"
import type { Scope } from "effect"
import type { BusShape } from "./bus/Bus.js"
import type { Principal } from "./principal.js"

/**
 * Identity announces on this subject, through its outbox, every change that can take access away:
 * a session ended, an API key revoked, a member removed or given another role, an org or a user
 * deleted. Every process of every unit listens (`Bus.listen`) and drops what it cached about it.
 */
export const ACCESS_CHANGED_SUBJECT = "events.access.changed"

/**
 * What changed, as the fields an entry must all match to be dropped: `{session_id}` one session,
 * `{user_id}` everything of a user, `{user_id, org_id}` a user's standing in one org, `{org_id}`
 * a whole org, `{api_key_id}` one key.
 */
export class AccessChange extends Schema.Class<AccessChange>("AccessChange")({
  session_id: Schema.optional(Schema.String),
  api_key_id: Schema.optional(Schema.String),
  user_id: Schema.optional(Schema.String),
  org_id: Schema.optional(Schema.String)
}) {}

const decodeChange = Schema.decodeUnknownOption(AccessChange)

/** Whom a cached answer is about, matched against AccessChange. */
export interface AccessScope {
  readonly sessionId: string | null
  readonly apiKeyId: string | null
  readonly userId: string | null
  readonly orgId: string | null
}

export const scopeOf = (principal: Principal, orgId: string | null): AccessScope => ({
  sessionId: principal.sessionId,
  apiKeyId: principal.apiKeyId,
  userId: principal.userId,
  orgId
})

const touches = (change: AccessChange, scope: AccessScope): boolean =>
  (change.session_id === undefined || change.session_id === scope.sessionId) &&
  (change.api_key_id === undefined || change.api_key_id === scope.apiKeyId) &&
  (change.user_id === undefined || change.user_id === scope.userId) &&
  (change.org_id === undefined || change.org_id === scope.orgId) &&
  // An empty change names nobody: it drops nothing.
  (change.session_id ?? change.api_key_id ?? change.user_id ?? change.org_id) !== undefined

interface Entry<V> {
  readonly value: V
  readonly scope: AccessScope
  readonly expiresAt: number
}

export interface AccessCacheOptions {
  /** Longest an answer is kept (also never past the principal token's expiry). */
  readonly ttlMillis: number
  readonly capacity?: number
}

/**
 * Answers that grant access, kept per caller so a unit does not ask identity on every request.
 * Only grants are kept (a refusal is asked again next time, so a new member is never refused from
 * a stale entry), each until the first of: its time to live, the principal token's expiry, or an
 * AccessChange that touches it. A lookup that raced with a change does not store its answer: the
 * change may have come after identity answered.
 */
export const makeAccessCache = <V>(options: AccessCacheOptions) => {
  const entries = new Map<string, Entry<V>>()
  const capacity = options.capacity ?? 20_000
  // Bumped by every change and clear; an answer fetched across a bump is not kept.
  let epoch = 0

  const evict = (now: number) => {
    for (const [key, entry] of entries) if (entry.expiresAt <= now) entries.delete(key)
    if (entries.size >= capacity) entries.clear()
  }

  /** The cached grant, or `lookup`'s answer (kept when it succeeds). */
  const getOrLookup = <E, R>(
    key: string,
    scope: AccessScope,
    principalExpiresAtMillis: number,
    lookup: Effect.Effect<V, E, R>
  ): Effect.Effect<V, E, R> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const hit = entries.get(key)
      if (hit !== undefined && hit.expiresAt > now) return Effect.succeed(hit.value)
      const startedAt = epoch
      return Effect.tap(lookup, (value) =>
        Effect.sync(() => {
          if (epoch !== startedAt) return
          if (entries.size >= capacity) evict(now)
          entries.set(key, { value, scope, expiresAt: Math.min(now + options.ttlMillis, principalExpiresAtMillis) })
        })
      )
    })

  const apply = (change: AccessChange) =>
    Effect.sync(() => {
      epoch++
      for (const [key, entry] of entries) if (touches(change, entry.scope)) entries.delete(key)
    })

  const clear = Effect.sync(() => {
    epoch++
    entries.clear()
  })

  return { getOrLookup, apply, clear } as const
}

export type AccessCache<V> = ReturnType<typeof makeAccessCache<V>>

/**
 * Keeps caches honest for the life of the scope: every AccessChange on the bus drops what it
 * touches, and a gap in hearing them (start, reconnect) drops everything.
 */
export const followAccessChanges = (
  bus: BusShape,
  caches: ReadonlyArray<{ readonly apply: (change: AccessChange) => Effect.Effect<void>; readonly clear: Effect.Effect<void> }>
): Effect.Effect<void, never, Scope.Scope> =>
  bus.listen(
    ACCESS_CHANGED_SUBJECT,
    (heard) => {
      const change = decodeChange(heard.payload)
      return change._tag === "Some" ? Effect.forEach(caches, (cache) => cache.apply(change.value), { discard: true }) : Effect.void
    },
    Effect.forEach(caches, (cache) => cache.clear, { discard: true })
  )
