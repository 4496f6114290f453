import { createServer } from "node:http"
import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { tracingConfigured } from "@scion/kit"
import { Config, Effect, Layer } from "effect"
import { Api } from "./Api.js"
import { AuthenticationLive } from "./Authentication.js"
import { DocsLive } from "./Docs.js"
import { EdgeLive } from "./edge.js"
import { ApiKeysLive } from "./http/apiKeys.js"
import { AuthLive } from "./http/auth.js"
import { BillingLive, BillingPlansLive } from "./http/billing.js"
import { EnginesLive } from "./http/engines.js"
import { BranchesLive } from "./http/branches.js"
import { CodeHostLive } from "./http/codeHost.js"
import { ConnectorsLive } from "./http/connectors.js"
import { EnvironmentsLive } from "./http/environments.js"
import { ProjectsLive } from "./http/projects.js"
import { InvitesLive } from "./http/invites.js"
import { MembersLive } from "./http/members.js"
import { OperationsLive } from "./http/operations.js"
import { OrgsLive } from "./http/orgs.js"
import { SessionLive } from "./http/session.js"
import { RateLimits } from "./RateLimits.js"
import { Upstreams } from "./Upstreams.js"

export { Api } from "./Api.js"
export { Authenticated, Authentication, SessionAuthentication, type CallerPrincipal } from "./Authentication.js"
export { reasonsAnsweredByHandlers, statusByReason, statusOf, type HttpStatus } from "./errors.js"
export { Upstreams, type UpstreamTransports } from "./Upstreams.js"

/** Every endpoint of the Api, implemented against identity and the operation unit. */
export const ApiLive: Layer.Layer<HttpApi.Api, never, Upstreams> = HttpApiBuilder.api(Api).pipe(
  Layer.provide([AuthLive, SessionLive, OrgsLive, MembersLive, InvitesLive, ApiKeysLive, OperationsLive, BillingPlansLive, EnginesLive, BillingLive, ProjectsLive, EnvironmentsLive, ConnectorsLive, CodeHostLive, BranchesLive]),
  Layer.provide(AuthenticationLive),
  // One set of buckets for the handlers and the authentication middleware.
  Layer.provide(RateLimits.layer)
)

/** Paths that carry a secret: never in a log line or a span. */
const SECRET_IN_PATH = /^\/v1\/invites\/[^/]+\/accept/

/** GET /healthz for humans and load balancers; not part of the public description. */
const HealthzLive = HttpApiBuilder.Router.use((router) => router.get("/healthz", Effect.succeed(HttpServerResponse.unsafeJson({ status: "ok" }))))

/**
 * The gateway's HTTP app on whatever `HttpServer` is provided: /v1 (with /v1/openapi.json and
 * /v1/docs), /healthz, access logs. Tests serve it on port 0; `GatewayLive` on PORT.
 */
export const gatewayHttpLayer = Layer.unwrapEffect(
  Effect.map(tracingConfigured, (tracing) =>
    // No platform access log (it writes the URL, and a path can carry an invite token): EdgeLive
    // logs each API request with its route template.
    HttpApiBuilder.serve().pipe(
      // Without an exporter the server span of each request would parse its URL, copy and redact
      // its headers and provide a no-op span, for nothing. With one, a URL carrying a secret (an
      // invite token in its path) is not traced: the span would record it.
      HttpMiddleware.withTracerDisabledWhen((request) => !tracing || SECRET_IN_PATH.test(request.url)),
      Layer.provide([DocsLive, HttpApiBuilder.middlewareOpenApi({ path: "/v1/openapi.json" }), HealthzLive, EdgeLive]),
      Layer.provide(ApiLive)
    )
  )
)

/** The gateway listening on PORT (default 8080) on all interfaces. Needs only `Upstreams`. */
export const GatewayLive: Layer.Layer<never, never, Upstreams> = Layer.mergeAll(
  gatewayHttpLayer,
  Layer.effectDiscard(HttpServer.addressFormattedWith((url) => Effect.logInfo("gateway listening").pipe(Effect.annotateLogs({ url }))))
).pipe(
  Layer.provide(
    NodeHttpServer.layerConfig(createServer, {
      port: Config.integer("PORT").pipe(Config.withDefault(8080)),
      host: Config.succeed("0.0.0.0")
    })
  ),
  Layer.orDie
)
