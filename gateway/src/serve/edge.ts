import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { CurrentRequestId, isAcceptableRequestId, newId, recordHttpNow, REQUEST_ID_HEADER, setForRequestFiber } from "@scion/kit"
import { Cause, Effect, FiberRef, LogLevel, Option, Schema } from "effect"
import { CurrentQuota, quotaHeaders } from "../RateLimits.js"
import { Api } from "../Api.js"
import { EngineNotReady } from "../branchSchemas.js"
import { DiscoveryPrerequisitesNotMet, EngineSetupPrerequisitesNotMet, GrantScriptNotAvailable, PreflightNotPassed } from "../connectorSchemas.js"
import { errorByStatus, type HttpError, type HttpStatus, ValidationError, type ValidationIssue } from "../errors.js"
import { ResponseHeaders } from "./EdgeRequest.js"

/** Larger bodies are refused: a 422 on the body (`EdgeServer.ts`). */
export const maxBodyBytes = 1024 * 1024

const statuses = Object.entries(errorByStatus).map(([status, error]) => [Number(status) as HttpStatus, error] as const)

/**
 * Error bodies are written here rather than by HttpApi's encoder: it picks the first declared
 * error whose encoded shape fits, and every error but 422 has the same shape {detail}.
 */
export const respond = (error: HttpError | ValidationError): HttpServerResponse.HttpServerResponse =>
  error instanceof ValidationError
    ? HttpServerResponse.unsafeJson({ detail: error.detail }, { status: 422 })
    : HttpServerResponse.unsafeJson({ detail: error.detail }, { status: statuses.find(([, E]) => error instanceof E)?.[0] ?? 500 })

const isHttpError = (u: unknown): u is HttpError | ValidationError =>
  u instanceof ValidationError || statuses.some(([, E]) => u instanceof E)

export const unprocessable = (detail: ReadonlyArray<ValidationIssue>) => respond(new ValidationError({ detail }))

const internal = (cause: Cause.Cause<unknown>) =>
  Effect.as(Effect.logError("request failed", cause), respond(new errorByStatus[500]({ detail: "Internal Server Error" })))

const isRouteNotFound = (u: unknown) => HttpServerError.isServerError(u) && u._tag === "RouteNotFound"

/** The client's own x-request-id when it is a plain token, else a new one. */
export const requestIdFrom = (given: string | ReadonlyArray<string> | undefined): string =>
  typeof given === "string" && isAcceptableRequestId(given) ? given : newId("req")

/**
 * What every response gets as it leaves, on the request's own fiber: its request id, the rate-limit
 * quota it drew from (RateLimits) and any header its handler added; the request's metrics; the
 * access line at Info, built only when written (below LOG_LEVEL its annotations cost the gateway
 * ~40 µs a request for nothing). The route's template, never the URL: a path can carry a secret
 * (an invite token).
 */
export const completeResponse = (
  response: HttpServerResponse.HttpServerResponse,
  request: { readonly method: string; readonly route: string; readonly requestId: string; readonly started: number }
): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.withFiberRuntime((fiber) => {
    const elapsed = performance.now() - request.started
    recordHttpNow(request.method, request.route, response.status, elapsed / 1000)
    const quota = fiber.getFiberRef(CurrentQuota)
    const completed = HttpServerResponse.setHeaders(response, {
      ...fiber.getFiberRef(ResponseHeaders),
      [REQUEST_ID_HEADER]: request.requestId,
      ...(Option.isSome(quota) ? quotaHeaders(quota.value) : {})
    })
    if (!LogLevel.greaterThanEqual(LogLevel.Info, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))) return Effect.succeed(completed)
    return Effect.as(
      Effect.logInfo("Sent HTTP response").pipe(
        Effect.annotateLogs({ "http.method": request.method, "http.route": request.route, "http.status": response.status, "http.duration_ms": Math.round(elapsed) })
      ),
      completed
    )
  })

/**
 * The platform's routes (the OpenAPI description, the docs page, /healthz) and every request no
 * endpoint matches, around the platform's router: 404 {"detail": "Not Found"} for an unknown route,
 * a logged, generic 500 for a defect, and the request id, metrics and access line every response
 * gets. The endpoints themselves are served by the edge server (`EdgeServer.ts`).
 */
export const EdgeLive = HttpApiBuilder.middleware(Api, (app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const requestId = requestIdFrom(request.headers[REQUEST_ID_HEADER])
    const started = performance.now()
    return app.pipe(
      Effect.catchAllCause(failureResponse),
      Effect.flatMap((response) => completeResponse(response, { method: request.method, route: "unmatched", requestId, started })),
      // The platform runs each request on a fiber of its own.
      setForRequestFiber(CurrentRequestId, Option.some(requestId))
    )
  })
)

/**
 * The response for a request that failed: the interface's error bodies, unknown routes as 404,
 * anything else a logged, generic 500. A request whose client went away stays interrupted.
 */
export const failureResponse = (cause: Cause.Cause<unknown>): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  // Interruption only: no failure in it to type.
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return internal(cause)
  const error: unknown = failure.value
  if (isHttpError(error)) return Effect.succeed(respond(error))
  // The preflight gate's 422 carries the report next to the detail.
  if (error instanceof PreflightNotPassed) return Effect.succeed(HttpServerResponse.unsafeJson({ detail: error.detail, preflight: error.preflight }, { status: 422 }))
  // A failed discovery prerequisite's 422 carries the checks next to the detail.
  if (error instanceof DiscoveryPrerequisitesNotMet || error instanceof EngineSetupPrerequisitesNotMet) {
    return Effect.succeed(HttpServerResponse.unsafeJson({ detail: error.detail, prerequisites: error.prerequisites }, { status: 422 }))
  }
  if (error instanceof EngineNotReady) return Effect.succeed(HttpServerResponse.unsafeJson({ detail: error.detail }, { status: 422 }))
  if (error instanceof GrantScriptNotAvailable) return Effect.succeed(HttpServerResponse.unsafeJson({ detail: error.detail }, { status: 422 }))
  if (isRouteNotFound(error)) return Effect.succeed(respond(new errorByStatus[404]({ detail: "Not Found" })))
  // Any other error class of the API answers the status its schema is annotated with.
  const annotated = annotatedErrorResponse(error)
  return Option.isSome(annotated) ? Effect.succeed(annotated.value) : internal(cause)
}

/**
 * An error that is an instance of a schema class of the API (Schema.Class with an
 * HttpApiSchema status annotation): its encoded body at that status.
 */
const annotatedErrorResponse = (error: unknown): Option.Option<HttpServerResponse.HttpServerResponse> => {
  if (typeof error !== "object" || error === null) return Option.none()
  const schema: unknown = error.constructor
  if (!Schema.isSchema(schema)) return Option.none()
  const status = HttpApiSchema.getStatusErrorAST(schema.ast)
  if (status < 400) return Option.none()
  return Option.map(Schema.encodeUnknownOption(schema as Schema.Schema<unknown, unknown>)(error), (body) => HttpServerResponse.unsafeJson(body, { status }))
}
