/**
 * The API's security, as declarations only: who a caller is and the two bearer middlewares. The
 * API definition and its clients import these; Authentication.ts implements them.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Schema } from "effect"
import { httpErrors } from "./httpErrors.js"

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
