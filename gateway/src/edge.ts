import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpMethod from "@effect/platform/HttpMethod"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { CurrentRequestId, isAcceptableRequestId, newId, recordHttpNow, REQUEST_ID_HEADER, setForRequestFiber } from "@scion/kit"
import { Cause, Effect, FiberRef, LogLevel, Option, Predicate, Schema } from "effect"
import { CurrentQuota, quotaHeaders } from "./RateLimits.js"
import { Api } from "./Api.js"
import { EngineNotReady } from "./branchSchemas.js"
import { DiscoveryPrerequisitesNotMet, EngineSetupPrerequisitesNotMet, GrantScriptNotAvailable, PreflightNotPassed } from "./connectorSchemas.js"
import { errorByStatus, type HttpError, type HttpStatus, ValidationError, type ValidationIssue } from "./errors.js"
import { controlCharacterIssues, isJsonContentType, matchRoute, routesOf, validateRequest } from "./validation.js"

const routes = routesOf(Api)

/** Larger bodies are refused (a 422 on the body) before anything reads them. */
const maxBodyBytes = 1024 * 1024

const statuses = Object.entries(errorByStatus).map(([status, error]) => [Number(status) as HttpStatus, error] as const)

/**
 * Error bodies are written here rather than by HttpApi's encoder: it picks the first declared
 * error whose encoded shape fits, and every error but 422 has the same shape {detail}.
 */
const respond = (error: HttpError | ValidationError): HttpServerResponse.HttpServerResponse =>
  error instanceof ValidationError
    ? HttpServerResponse.unsafeJson({ detail: error.detail }, { status: 422 })
    : HttpServerResponse.unsafeJson({ detail: error.detail }, { status: statuses.find(([, E]) => error instanceof E)?.[0] ?? 500 })

const isHttpError = (u: unknown): u is HttpError | ValidationError =>
  u instanceof ValidationError || statuses.some(([, E]) => u instanceof E)

const unprocessable = (detail: ReadonlyArray<ValidationIssue>) => respond(new ValidationError({ detail }))

const internal = (cause: Cause.Cause<unknown>) =>
  Effect.as(Effect.logError("request failed", cause), respond(new errorByStatus[500]({ detail: "Internal Server Error" })))

const isDecodeError = (u: unknown) => Predicate.isTagged(u, "HttpApiDecodeError")
/** HttpApi reads JSON bodies with orDie: a body that does not parse arrives as this defect. */
const isBodyDecodeDefect = (u: unknown) => HttpServerError.isServerError(u) && u._tag === "RequestError" && u.reason === "Decode"
const isRouteNotFound = (u: unknown) => HttpServerError.isServerError(u) && u._tag === "RouteNotFound"

/**
 * API-level middleware around the router (inside HttpApi's own error encoding): writes every
 * error body; turns HttpApi's built-in 400 HttpApiDecodeError and unparseable JSON into the
 * interface's 422, unknown routes into 404 {"detail": "Not Found"}, and defects into a logged,
 * generic 500. Bodies are limited to 1 MiB.
 *
 * Runs once per request on the request's own fiber (the platform forks one per request), so the
 * request id is set for the rest of that fiber rather than scoped (`setForRequestFiber`), and the
 * steps after the app are one: at ~2,500 requests/s each runtime step and fiber-local copy shows.
 */
export const EdgeLive = HttpApiBuilder.middleware(Api, (app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const requestId = requestIdOf(request)
    const started = performance.now()
    const url = new URL(request.url, "http://gateway")
    const matched = matchRoute(routes, request.method, url.pathname)
    const route = matched?.route.template ?? "unmatched"
    return edge(app, request, url, matched).pipe(
      Effect.flatMap((response) =>
        Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse>((fiber) => {
          const elapsed = performance.now() - started
          recordHttpNow(request.method, route, response.status, elapsed / 1000)
          const quota = fiber.getFiberRef(CurrentQuota)
          const answered = HttpServerResponse.setHeaders(response, Option.isSome(quota) ? { [REQUEST_ID_HEADER]: requestId, ...quotaHeaders(quota.value) } : { [REQUEST_ID_HEADER]: requestId })
          // The access line (Info) is built only when written: below LOG_LEVEL its annotations
          // cost the gateway ~40 µs a request (~8% of its CPU in bench:gateway) for nothing.
          // The route's template, never the URL: a path can carry a secret (an invite token).
          return LogLevel.greaterThanEqual(LogLevel.Info, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))
            ? Effect.as(
                Effect.logInfo("Sent HTTP response").pipe(
                  Effect.annotateLogs({ "http.method": request.method, "http.route": route, "http.status": response.status, "http.duration_ms": Math.round(elapsed) })
                ),
                answered
              )
            : Effect.succeed(answered)
        })
      ),
      setForRequestFiber(CurrentRequestId, Option.some(requestId))
    )
  })
)

/** The client's own x-request-id when it is a plain token, else a new one. */
const requestIdOf = (request: HttpServerRequest.HttpServerRequest): string => {
  const given = request.headers[REQUEST_ID_HEADER]
  return isAcceptableRequestId(given) ? given : newId("req")
}

const edge = <E, R>(app: HttpApp.Default<E, R>, request: HttpServerRequest.HttpServerRequest, url: URL, matched: ReturnType<typeof matchRoute>) => {
  const bodyRead = matched !== undefined && Option.isSome(matched.route.schemas.payloadSchema) && HttpMethod.hasBody(request.method)
  if (bodyRead) {
    if (!isJsonContentType(request.headers["content-type"])) {
      return Effect.succeed(unprocessable([{ loc: ["body"], msg: "The body must be JSON (Content-Type: application/json)", type: "json_invalid" }]))
    }
    if (Number(request.headers["content-length"] ?? 0) > maxBodyBytes) {
      return Effect.succeed(unprocessable([{ loc: ["body"], msg: "The body is larger than 1 MiB", type: "too_long", ctx: { max_bytes: maxBodyBytes } }]))
    }
  }
  const invalid = (cause: Cause.Cause<unknown>) =>
    matched === undefined
      ? internal(cause)
      : Effect.flatMap(validateRequest(matched, request), (detail) =>
          // Nothing wrong with the request: the failure was ours (e.g. a response that did not encode).
          detail.length > 0 ? Effect.succeed(unprocessable(detail)) : internal(cause)
        )
  const answered = app.pipe(
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
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
        if (isDecodeError(error)) return invalid(cause)
        if (isRouteNotFound(error)) return Effect.succeed(respond(new errorByStatus[404]({ detail: "Not Found" })))
        // Any other error class of the API answers the status its schema is annotated with.
        const annotated = annotatedErrorResponse(error)
        if (Option.isSome(annotated)) return Effect.succeed(annotated.value)
        return internal(cause)
      }
      const defect = Cause.dieOption(cause)
      return Option.isSome(defect) && isBodyDecodeDefect(defect.value) ? invalid(cause) : internal(cause)
    })
  )
  // The body is read once (the request caches it), here and by HttpApi, under the limit below.
  const checked =
    matched === undefined ? answered : Effect.flatMap(controlCharacterIssues(matched, request, url), (controls) => (controls.length > 0 ? Effect.succeed(unprocessable(controls)) : answered))
  // A body that declared no length is cut off at the limit while it streams in. Only where one is
  // read: the limit is a fiber-local setting, and each one set copies the fiber's settings.
  return bodyRead ? HttpIncomingMessage.withMaxBodySize(checked, Option.some(FileSystem.Size(maxBodyBytes))) : checked
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
