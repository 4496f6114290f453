import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest, OpenApi } from "@effect/platform"
import { withPrincipalToken, type RpcError } from "@scion/kit"
import { PrincipalKind } from "@scion/proto/scion/auth/v1/auth_pb"
import { Context, Effect, Layer, Schema } from "effect"
import { fromRpcError, httpErrors, Unauthorized, type HttpError } from "./errors.js"
import { Upstreams } from "./Upstreams.js"

/** Who is calling, as identity authenticated the bearer token on this very request. */
export interface CallerPrincipal {
  readonly kind: "user_session" | "api_key"
  readonly userId: string | null
  readonly apiKeyId: string | null
  /** API keys only: the key's org, its role and effective permissions. */
  readonly orgId: string | null
  readonly roleKey: string | null
  readonly permissions: ReadonlyArray<string>
}

export class Authenticated extends Context.Tag("@scion/gateway/Authenticated")<
  Authenticated,
  {
    readonly principal: CallerPrincipal
    /** Identity-signed principal, sent to units in the x-scion-principal header. */
    readonly principalToken: string
  }
>() {}

const bearer = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "A dashboard session token or an org API key (sk-scion_live_…, sk-scion_test_…)")
)

const failure = Schema.Union(...httpErrors)

/** Any valid bearer token: a dashboard session or an org API key. */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@scion/gateway/Authentication", {
  provides: Authenticated,
  failure,
  security: { bearer }
}) {}

/** A dashboard session only: an API key gets 401 (orgs list/create, me, my-orgs, bootstrap, invites). */
export class SessionAuthentication extends HttpApiMiddleware.Tag<SessionAuthentication>()("@scion/gateway/SessionAuthentication", {
  provides: Authenticated,
  failure,
  security: { bearer }
}) {}

const kinds = {
  [PrincipalKind.UNSPECIFIED]: undefined,
  [PrincipalKind.USER_SESSION]: "user_session",
  [PrincipalKind.API_KEY]: "api_key"
} as const satisfies Record<PrincipalKind, CallerPrincipal["kind"] | undefined>

const orNull = (s: string): string | null => (s === "" ? null : s)

/**
 * Asks identity about the bearer token on every request. Nothing is cached, so a revoked key, an
 * ended session or a removed member is refused on the very next request.
 */
const authenticate = (sessionOnly: boolean) =>
  Effect.gen(function* () {
    const upstreams = yield* Upstreams
    return (_token: unknown) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const token = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.authorization ?? "")?.[1]
        if (token === undefined) return yield* Effect.fail(new Unauthorized({ detail: "Not authenticated: send Authorization: Bearer <token>" }))
        const response = yield* upstreams.auth.authenticate({ bearerToken: token }).pipe(Effect.catchAll((e) => Effect.flip(fromRpcError(e))))
        const kind = response.principal ? kinds[response.principal.kind] : undefined
        if (!response.principal || kind === undefined || response.principalToken === "") {
          return yield* Effect.dieMessage("identity authenticated a token without a principal")
        }
        if (sessionOnly && kind !== "user_session") {
          return yield* Effect.fail(new Unauthorized({ detail: "This endpoint needs a dashboard session; API keys are not accepted" }))
        }
        const p = response.principal
        return Authenticated.of({
          principal: {
            kind,
            userId: orNull(p.userId),
            apiKeyId: orNull(p.apiKeyId),
            orgId: orNull(p.orgId),
            roleKey: orNull(p.roleKey),
            permissions: p.permissions
          },
          principalToken: response.principalToken
        })
      })
  })

export const AuthenticationLive: Layer.Layer<Authentication | SessionAuthentication, never, Upstreams> = Layer.mergeAll(
  Layer.effect(Authentication, Effect.map(authenticate(false), (bearer) => Authentication.of({ bearer }))),
  Layer.effect(SessionAuthentication, Effect.map(authenticate(true), (bearer) => SessionAuthentication.of({ bearer })))
)

/**
 * Calls upstreams as the authenticated caller (its principal token rides in x-scion-principal);
 * failures become the HTTP error of the status table.
 */
export const asCaller = <A>(
  call: (upstreams: Context.Tag.Service<Upstreams>) => Effect.Effect<A, RpcError>
): Effect.Effect<A, HttpError, Upstreams | Authenticated> =>
  Effect.gen(function* () {
    const { principalToken } = yield* Authenticated
    return yield* call(yield* Upstreams).pipe(withPrincipalToken(principalToken))
  }).pipe(Effect.catchTag("RpcError", (e) => Effect.flip(fromRpcError(e))))

/** Calls upstreams without a caller (sign-up, login, email verification). */
export const anonymously = <A>(
  call: (upstreams: Context.Tag.Service<Upstreams>) => Effect.Effect<A, RpcError>
): Effect.Effect<A, HttpError, Upstreams> =>
  Effect.flatMap(Upstreams, call).pipe(Effect.catchTag("RpcError", (e) => Effect.flip(fromRpcError(e))))
