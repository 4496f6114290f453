import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { tracingConfigured } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import { Api } from "./Api.js"
import { Authenticator } from "./Authentication.js"
import { DocsLive } from "./Docs.js"
import { EdgeLive } from "./serve/edge.js"
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
import { EdgeServerLive } from "./serve/EdgeServer.js"
import { Upstreams } from "./Upstreams.js"

export { Api } from "./Api.js"
export { Authenticated, Authentication, SessionAuthentication, type CallerPrincipal } from "./Authentication.js"
export { reasonsAnsweredByHandlers, statusByReason, statusOf, type HttpStatus } from "./errors.js"
export { Upstreams, type UpstreamTransports } from "./Upstreams.js"

/** Every endpoint of the Api, implemented against identity and the operation unit, for the edge server. */
const ApiHandlersLive = Layer.mergeAll(
  AuthLive,
  SessionLive,
  OrgsLive,
  MembersLive,
  InvitesLive,
  ApiKeysLive,
  OperationsLive,
  BillingPlansLive,
  EnginesLive,
  BillingLive,
  ProjectsLive,
  EnvironmentsLive,
  ConnectorsLive,
  CodeHostLive,
  BranchesLive
)

/**
 * The API's description for the platform's routes (the OpenAPI document, the docs page): the
 * endpoints themselves are served by the edge server, so no handlers are mounted on its router.
 */
const ApiDescriptionLive = Layer.succeed(HttpApi.Api, { api: Api as never, context: Context.empty() })

/** Paths that carry a secret: never in a log line or a span. */
const SECRET_IN_PATH = /^\/v1\/invites\/[^/]+\/accept/

/** GET /healthz for humans and load balancers; not part of the public description. */
const HealthzLive = HttpApiBuilder.Router.use((router) => router.get("/healthz", Effect.succeed(HttpServerResponse.unsafeJson({ status: "ok" }))))

/**
 * What the edge server hands to the platform: the OpenAPI description (/v1/openapi.json), the docs
 * page (/v1/docs), /healthz, and 404 {"detail": "Not Found"} for any other request, each with its
 * request id, metrics and access line (EdgeLive).
 */
const platformRoutesLayer = Layer.unwrapEffect(
  Effect.map(tracingConfigured, (tracing) =>
    // No platform access log (it writes the URL, and a path can carry an invite token).
    HttpApiBuilder.serve().pipe(
      // Without an exporter the server span of each request would parse its URL, copy and redact
      // its headers and provide a no-op span, for nothing.
      HttpMiddleware.withTracerDisabledWhen((request) => !tracing || SECRET_IN_PATH.test(request.url)),
      Layer.provide([DocsLive, HttpApiBuilder.middlewareOpenApi({ path: "/v1/openapi.json" }), HealthzLive, EdgeLive]),
      Layer.provide(ApiDescriptionLive),
      // The platform's services for its handlers (HttpPlatform, ETags, the file system).
      Layer.provide(NodeHttpServer.layerContext)
    )
  )
)

/** The gateway listening on PORT (default 8080) on all interfaces. Needs only `Upstreams`. */
export const GatewayLive: Layer.Layer<never, never, Upstreams> = Layer.mergeAll(
  platformRoutesLayer,
  Layer.effectDiscard(HttpServer.addressFormattedWith((url) => Effect.logInfo("gateway listening").pipe(Effect.annotateLogs({ url }))))
).pipe(
  Layer.provide(EdgeServerLive),
  Layer.provide(ApiHandlersLive),
  Layer.provide(Authenticator.layer),
  // One set of buckets for the handlers and the authentication.
  Layer.provide(RateLimits.layer),
  Layer.orDie
)
