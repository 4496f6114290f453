import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { CurrentRequestId, provideForRequestFiber, REQUEST_ID_HEADER, setForRequestFiber, TRACEPARENT_HEADER, tracingConfigured, withRemoteParent } from "@scion/kit"
import { Cause, Config, Context, Effect, Either, Exit, FiberId, Layer, Option, Runtime } from "effect"
import type { Scope } from "effect"
import { Api } from "../Api.js"
import { Authenticated } from "../security.js"
import { Authenticator } from "../Authentication.js"
import { completeResponse, failureResponse, maxBodyBytes, requestIdFrom, respond, unprocessable } from "./edge.js"
import { errorByStatus } from "../errors.js"
import { controlIssues, isJsonContentType, type JsonBody, jsonBodyOf, matchRoute, queryOf, readsBody, requestIssues, unreadableBody } from "../validation.js"
import { EdgeRequest, headerOf } from "./EdgeRequest.js"
import { compileEndpoints, type CompiledEndpoint } from "./endpoints.js"
import { groupHandlersTag, type HandlerItem } from "./handlers.js"

/** Paths that carry a secret: never in a span. */
const SECRET_IN_PATH = /^\/v1\/invites\/[^/]+\/accept/

interface Served {
  readonly endpoint: CompiledEndpoint
  readonly item: HandlerItem
}

/**
 * The request's body as text, at most `maxBodyBytes`: a body that declared no length is cut off
 * at the limit while it streams in, and answers as unreadable (HttpApi's behaviour before).
 */
const readBody = (request: IncomingMessage): Effect.Effect<JsonBody> =>
  Effect.async<JsonBody>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength
      if (size > maxBodyBytes) {
        done(unreadableBody)
        request.resume()
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => done(jsonBodyOf(Buffer.concat(chunks).toString("utf8")))
    const onError = () => done(unreadableBody)
    const done = (body: JsonBody) => {
      request.off("data", onData).off("end", onEnd).off("error", onError)
      resume(Effect.succeed(body))
    }
    request.on("data", onData).on("end", onEnd).on("error", onError)
    return Effect.sync(() => request.off("data", onData).off("end", onEnd).off("error", onError))
  })

/**
 * Writes a platform response (the shapes our endpoints and error bodies produce) to Node's. Node
 * refuses a header value it cannot send by throwing; such a response ends the connection instead.
 */
const write = (response: ServerResponse, answer: HttpServerResponse.HttpServerResponse, head: boolean) => {
  if (response.writableEnded || response.destroyed) return
  try {
    writeBody(response, answer, head)
  } catch {
    response.destroy()
  }
}

const writeBody = (response: ServerResponse, answer: HttpServerResponse.HttpServerResponse, head: boolean) => {
  const body = answer.body
  switch (body._tag) {
    case "Uint8Array":
      response.writeHead(answer.status, { ...answer.headers, "content-type": body.contentType, "content-length": body.body.byteLength })
      response.end(head ? undefined : body.body)
      return
    case "Raw":
      response.writeHead(answer.status, { ...answer.headers, ...(body.contentType !== undefined ? { "content-type": body.contentType } : {}) })
      response.end(head || body.body === undefined ? undefined : (body.body as string | Uint8Array))
      return
    default:
      response.writeHead(answer.status, answer.headers)
      response.end()
  }
}

/**
 * The gateway's HTTP server. Every endpoint of the API is served here directly: its route matched
 * once, the edge's checks (body type and size, control characters), the caller authenticated where
 * the API says so, the request decoded and the value encoded with the endpoint's own schemas, the
 * handler run on the request's own fiber (no router, no per-request merge of contexts, no platform
 * middleware chain: each cost more CPU a request than the request's own work in bench:gateway).
 * Everything else (the OpenAPI description, the docs page, /healthz, 404s) goes to the platform's
 * app this server is given as its `HttpServer`.
 */
export const EdgeServerLive = Layer.scoped(
  HttpServer.HttpServer,
  Effect.gen(function* () {
    const port = yield* Config.integer("PORT").pipe(Config.withDefault(8080), Effect.orDie)
    const tracing = yield* tracingConfigured
    const authenticator = yield* Authenticator
    const context = yield* Effect.context<never>()
    const endpoints = yield* Effect.sync(() => compileEndpoints(Api))
    // Requests run with the services the groups' handlers were built with, merged once here (and
    // only those: each request copies this context once or twice).
    const groups = new Map([...new Set(endpoints.map((endpoint) => endpoint.group))].map((group) => [group, Context.unsafeGet(context, groupHandlersTag(group))]))
    const base = [...groups.values()].reduce((merged, handlers) => Context.merge(merged, handlers.context), Context.empty() as Context.Context<never>)
    const served = new Map<unknown, Served>()
    for (const endpoint of endpoints) {
      const item = groups.get(endpoint.group)!.items.find((candidate) => candidate.endpoint.name === endpoint.name)
      if (item === undefined) return yield* Effect.dieMessage(`no handler for ${endpoint.group}.${endpoint.name}`)
      served.set(endpoint.route, { endpoint, item })
    }
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(Runtime.make({ context: base, fiberRefs: runtime.fiberRefs, runtimeFlags: runtime.runtimeFlags }))
    const routes = endpoints.map((endpoint) => endpoint.route)

    const answer = ({ endpoint, item }: Served, request: IncomingMessage, url: URL, params: Record<string, string>): Effect.Effect<HttpServerResponse.HttpServerResponse, never, EdgeRequest> => {
      const matched = { route: endpoint.route, params }
      const bodyRead = readsBody(endpoint.route)
      if (bodyRead) {
        if (!isJsonContentType(request.headers["content-type"])) {
          return Effect.succeed(unprocessable([{ loc: ["body"], msg: "The body must be JSON (Content-Type: application/json)", type: "json_invalid" }]))
        }
        if (Number(request.headers["content-length"] ?? 0) > maxBodyBytes) {
          return Effect.succeed(unprocessable([{ loc: ["body"], msg: "The body is larger than 1 MiB", type: "too_long", ctx: { max_bytes: maxBodyBytes } }]))
        }
      }
      const query = url.search === "" ? {} : queryOf(url)
      const serve = (body: JsonBody | undefined): Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, EdgeRequest> => {
        const controls = controlIssues(matched, url, body)
        if (controls.length > 0) return Effect.succeed(unprocessable(controls))
        const invalid = () => {
          const detail = requestIssues(matched, { headers: request.headers, url, body })
          return detail.length > 0 ? Effect.succeed(unprocessable(detail)) : Effect.dieMessage(`${endpoint.group}.${endpoint.name}: the request decoded here but not there`)
        }
        const run = (): Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, EdgeRequest | Authenticated> => {
          if (body?._tag === "Issue") return invalid()
          const decoded = endpoint.decode({ params, query, body: body?.value, headers: request.headers })
          if (Either.isLeft(decoded)) return invalid()
          const handled = item.handler(decoded.right as never) as Effect.Effect<unknown, unknown, EdgeRequest | Authenticated>
          return Effect.flatMap(item.uninterruptible ? Effect.uninterruptible(handled) : handled, (value) => {
            if (HttpServerResponse.isServerResponse(value)) return Effect.succeed(value)
            const encoded = endpoint.encode(value)
            return Option.isSome(encoded) ? Effect.succeed(encoded.value) : Effect.dieMessage(`${endpoint.group}.${endpoint.name}: the handler's value does not encode`)
          })
        }
        if (endpoint.security === "none") return run() as Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, EdgeRequest>
        return Effect.flatMap(authenticator.authenticate(endpoint.security === "session"), (authenticated) => run().pipe(provideForRequestFiber(Authenticated, authenticated)))
      }
      // Decoding and the handler run inside the effect: whatever they throw is a defect (a 500), never the listener's.
      const answered = bodyRead ? Effect.flatMap(readBody(request), serve) : Effect.suspend(() => serve(undefined))
      return Effect.catchAllCause(answered, failureResponse)
    }

    const program = (target: Served, request: IncomingMessage, response: ServerResponse, url: URL, params: Record<string, string>) => {
      const requestId = requestIdFrom(request.headers[REQUEST_ID_HEADER])
      const started = performance.now()
      const method = target.endpoint.route.method
      const route = target.endpoint.route.template
      const edgeRequest = EdgeRequest.of({ method, url: request.url ?? "/", headers: request.headers, remoteAddress: request.socket.remoteAddress })
      const served = Effect.suspend(() => answer(target, request, url, params)).pipe(
        Effect.flatMap((answered) => completeResponse(answered, { method, route, requestId, started })),
        Effect.map((completed) => write(response, completed, request.method === "HEAD"))
      )
      const traced =
        tracing && !SECRET_IN_PATH.test(url.pathname)
          ? withRemoteParent(`http.server ${method}`, headerOf(edgeRequest, TRACEPARENT_HEADER), { kind: "server", attributes: { "http.request.method": method, "http.route": route } })(served)
          : served
      return traced.pipe(provideForRequestFiber(EdgeRequest, edgeRequest), setForRequestFiber(CurrentRequestId, Option.some(requestId)))
    }

    // Requests no endpoint matches: the platform's app (docs, OpenAPI, /healthz, 404s), once served.
    let fallback: ((request: IncomingMessage, response: ServerResponse) => void) | undefined
    const notReady = (_request: IncomingMessage, response: ServerResponse) => write(response, respond(new errorByStatus[503]({ detail: "The gateway is starting" })), false)

    const onRequest = (request: IncomingMessage, response: ServerResponse) => {
      // A request-target that is no URL (`//[`) is not an endpoint: the platform's app answers it.
      const url = urlOf(request.url ?? "/")
      // HEAD is GET without the body (RFC 9110).
      const matched = url === null ? undefined : matchRoute(routes, request.method === "HEAD" ? "GET" : (request.method ?? "GET"), url.pathname)
      const target = matched === undefined ? undefined : served.get(matched.route)
      if (url === null || matched === undefined || target === undefined) return (fallback ?? notReady)(request, response)
      const fiber = runFork(program(target, request, response, url, matched.params))
      fiber.addObserver((exit) => {
        // Only a client that went away interrupts a request; anything else is a bug to see.
        if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
          runFork(Effect.logError("request failed", exit.cause))
          write(response, respond(new errorByStatus[500]({ detail: "Internal Server Error" })), false)
        }
      })
      response.on("close", () => {
        if (!response.writableEnded) fiber.unsafeInterruptAsFork(FiberId.none)
      })
    }

    const server: Server = yield* Effect.acquireRelease(
      Effect.async<Server>((resume) => {
        const created = createServer(onRequest)
        const onError = (cause: Error) => resume(Effect.dieMessage(`the gateway could not listen on ${port}: ${cause.message}`))
        created.once("error", onError)
        created.listen(port, "0.0.0.0", () => {
          created.off("error", onError)
          resume(Effect.succeed(created))
        })
      }),
      (listening) => Effect.async<void>((resume) => void listening.close(() => resume(Effect.void)))
    )
    const address = server.address()
    return HttpServer.make({
      address: typeof address === "object" && address !== null ? { _tag: "TcpAddress", hostname: address.address === "::" ? "0.0.0.0" : address.address, port: address.port } : { _tag: "UnixAddress", path: String(address) },
      serve: (app: HttpApp.Default<unknown>, middleware?: HttpMiddleware.HttpMiddleware) =>
        Effect.map(NodeHttpServer.makeHandler(app as HttpApp.Default<never, never>, middleware as never) as Effect.Effect<(request: IncomingMessage, response: ServerResponse) => void>, (handler) => {
          fallback = handler
        }) as Effect.Effect<void, never, Scope.Scope>
    })
  })
)

/** The request's URL; null for a request-target that is none (`//[`), where `new URL` throws. */
const urlOf = (target: string): URL | null => {
  try {
    return new URL(target, "http://gateway")
  } catch {
    return null
  }
}
