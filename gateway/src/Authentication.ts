import { OutgoingPrincipal, setForRequestFiber, type RpcError } from "@scion/kit"
import { PrincipalKind } from "@scion/proto/scion/auth/v1/auth_pb"
import { Clock, Config, Context, Effect, Layer, Option } from "effect"
import { fromRpcError, Unauthorized, type HttpError } from "./errors.js"
import { RateLimits } from "./RateLimits.js"
import { EdgeRequest, headerOf } from "./serve/EdgeRequest.js"
import { Upstreams } from "./Upstreams.js"
import { Authenticated, type CallerPrincipal } from "./security.js"

export { Authenticated, Authentication, type CallerPrincipal, SessionAuthentication } from "./security.js"

const kinds = {
  [PrincipalKind.UNSPECIFIED]: undefined,
  [PrincipalKind.USER_SESSION]: "user_session",
  [PrincipalKind.API_KEY]: "api_key",
  // Authenticate never answers with a service principal; a bearer token is never a service.
  [PrincipalKind.SERVICE]: undefined
} as const satisfies Record<PrincipalKind, CallerPrincipal["kind"] | undefined>

const orNull = (s: string): string | null => (s === "" ? null : s)

/** Entries kept at most; past this, expired ones go first, then all (a burst of new tokens). */
const PRINCIPAL_CACHE_CAPACITY = 50_000

/**
 * Identity's answers for bearer tokens, kept briefly (AUTH_CACHE_SECONDS, default 10; 0 turns it
 * off) so the hot path costs one upstream call instead of two. Only successes are kept; a lookup
 * in flight is shared by the requests that arrive meanwhile. Revocation does not wait for this:
 * the units behind the gateway refuse a revoked key, an ended session or a removed member within
 * the revocation bound (their grant caches follow identity's access events), whatever principal
 * the gateway still holds. A plain map: Effect's Cache hashed and compared keys structurally,
 * a visible share of the gateway's CPU per request in the bench profile.
 */
export class PrincipalCache extends Context.Tag("@scion/gateway/PrincipalCache")<
  PrincipalCache,
  { readonly get: (bearerToken: string) => Effect.Effect<Context.Tag.Service<Authenticated>, HttpError> }
>() {
  static readonly layer = Layer.effect(
    PrincipalCache,
    Effect.gen(function* () {
      const upstreams = yield* Upstreams
      const ttl = yield* Config.integer("AUTH_CACHE_SECONDS").pipe(Config.withDefault(10), Effect.orDie)
      const lookup = (bearerToken: string) =>
        upstreams.auth.authenticate({ bearerToken }).pipe(
          Effect.catchAll((e) => Effect.flip(fromRpcError(e))),
          Effect.flatMap((response) => {
            const kind = response.principal ? kinds[response.principal.kind] : undefined
            if (!response.principal || kind === undefined || response.principalToken === "") {
              return Effect.dieMessage("identity authenticated a token without a principal")
            }
            const p = response.principal
            return Effect.succeed(
              Authenticated.of({
                principal: { kind, userId: orNull(p.userId), apiKeyId: orNull(p.apiKeyId), orgId: orNull(p.orgId), roleKey: orNull(p.roleKey), permissions: p.permissions },
                principalToken: response.principalToken
              })
            )
          })
        )
      if (ttl <= 0) return PrincipalCache.of({ get: lookup })
      const ttlMillis = ttl * 1000
      const entries = new Map<string, { readonly expiresAt: number; readonly answer: Effect.Effect<Context.Tag.Service<Authenticated>, HttpError> }>()
      const evict = (now: number) => {
        for (const [token, entry] of entries) if (entry.expiresAt <= now) entries.delete(token)
        if (entries.size >= PRINCIPAL_CACHE_CAPACITY) entries.clear()
      }
      return PrincipalCache.of({
        get: (bearerToken) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const hit = entries.get(bearerToken)
            if (hit !== undefined && hit.expiresAt > now) return hit.answer
            return Effect.flatMap(Effect.cached(lookup(bearerToken)), (answer) => {
              if (entries.size >= PRINCIPAL_CACHE_CAPACITY) evict(now)
              entries.set(bearerToken, { expiresAt: now + ttlMillis, answer })
              // A failure is not kept: the next request asks identity again.
              return Effect.tapErrorCause(answer, () => Effect.sync(() => entries.get(bearerToken)?.answer === answer && entries.delete(bearerToken)))
            })
          })
      })
    })
  )
}

/** Whose rate-limit bucket a caller draws from: its API key, or the user behind a session. */
export const rateLimitKey = (principal: CallerPrincipal) => (principal.apiKeyId !== null ? `key:${principal.apiKeyId}` : `user:${principal.userId ?? "?"}`)

/**
 * Who the request's bearer token is, for the endpoints the API marks with `Authentication` (any
 * valid token) or `SessionAuthentication` (a dashboard session only): a 401 otherwise, a 429 past
 * the caller's rate limit. The edge server asks it before decoding the request, so a request without
 * a valid token learns nothing about what else was wrong with it.
 */
export class Authenticator extends Context.Tag("@scion/gateway/Authenticator")<
  Authenticator,
  { readonly authenticate: (sessionOnly: boolean) => Effect.Effect<Context.Tag.Service<Authenticated>, HttpError, EdgeRequest> }
>() {
  static readonly layer: Layer.Layer<Authenticator, never, Upstreams | RateLimits> = Layer.effect(
    Authenticator,
    Effect.gen(function* () {
      const principals = yield* PrincipalCache
      const limits = yield* RateLimits
      const admitted = (sessionOnly: boolean) => (authenticated: Context.Tag.Service<Authenticated>) =>
        sessionOnly && authenticated.principal.kind !== "user_session"
          ? Effect.fail(new Unauthorized({ detail: "This endpoint needs a dashboard session; API keys are not accepted" }))
          : Effect.as(limits.take("authenticated", rateLimitKey(authenticated.principal)), authenticated)
      const [anyToken, sessionOnly] = [admitted(false), admitted(true)]
      return Authenticator.of({
        authenticate: (onlySessions) =>
          Effect.flatMap(EdgeRequest, (request) => {
            // The scheme and the token's shape are checked here, from the header itself.
            const token = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(headerOf(request, "authorization") ?? "")?.[1]
            if (token === undefined) return Effect.fail(new Unauthorized({ detail: "Not authenticated: send Authorization: Bearer <token>" }))
            return Effect.flatMap(principals.get(token), onlySessions ? sessionOnly : anyToken)
          })
      })
    })
  ).pipe(Layer.provide(PrincipalCache.layer))
}

/**
 * Calls upstreams as the authenticated caller (its principal token rides in x-scion-principal);
 * failures become the HTTP error of the status table.
 */
export const asCaller = <A>(
  call: (upstreams: Context.Tag.Service<Upstreams>) => Effect.Effect<A, RpcError>
): Effect.Effect<A, HttpError, Upstreams | Authenticated> =>
  Effect.flatMap(Authenticated, ({ principalToken }) =>
    Effect.flatMap(Upstreams, (upstreams) =>
      // Set for the rest of the request's fiber (every call of a request acts for its one caller):
      // a scoped `withPrincipalToken` costs an acquire/use/release a call.
      call(upstreams).pipe(setForRequestFiber(OutgoingPrincipal, Option.some(principalToken)))
    )
  ).pipe(Effect.catchTag("RpcError", (e) => Effect.flip(fromRpcError(e))))

/** Calls upstreams without a caller (sign-up, login, email verification). */
export const anonymously = <A>(
  call: (upstreams: Context.Tag.Service<Upstreams>) => Effect.Effect<A, RpcError>
): Effect.Effect<A, HttpError, Upstreams> =>
  Effect.flatMap(Upstreams, call).pipe(setForRequestFiber(OutgoingPrincipal, Option.none()), Effect.catchTag("RpcError", (e) => Effect.flip(fromRpcError(e))))
