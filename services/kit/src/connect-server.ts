import { setMaxListeners } from "node:events"
import * as http2 from "node:http2"
import type { AddressInfo, Socket } from "node:net"
import type { DescMessage, DescMethod, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf"
import { Code, ConnectError, type ConnectRouter, type HandlerContext, type ServiceImpl } from "@connectrpc/connect"
import { connectNodeAdapter } from "@connectrpc/connect-node"
import { HealthCheckResponse_ServingStatus, Health } from "@scion/proto/grpc/health/v1/health_pb"
import { Cause, Chunk, Config, Context, Deferred, Effect, ExecutionStrategy, Exit, Layer, Option, Runtime, Scope } from "effect"
import { isDependencyUnavailable } from "./unavailable.js"
import { toConnectError, type WireError } from "./errors.js"
import { type CallMeta, maxMessageBytesConfig, methodPath, serveGrpcUnary, type UnaryEndpoint, type UnaryEndpoints } from "./grpc-unary.js"
import { type CallerInfo, CurrentCaller, OutgoingPrincipal, PRINCIPAL_HEADER, PrincipalVerifier } from "./principal.js"
import { recordRpc } from "./metrics.js"
import { CurrentRequestId, isAcceptableRequestId, REQUEST_ID_HEADER, withRequestId } from "./request-id.js"
import { setForRequestFiber } from "./request-fiber.js"
import { TRACEPARENT_HEADER, withRemoteParent } from "./tracing.js"

type UnaryMethodOf<M> = M extends DescMethodUnary<infer I, infer O> ? { readonly input: I; readonly output: O } : never

/** A unary RPC implemented as an Effect: the request in, the response (or a typed failure) out. */
export type EffectHandler<I extends DescMessage, O extends DescMessage, E, R> = (
  request: MessageShape<I>
) => Effect.Effect<MessageInitShape<O>, E, R>

export type EffectServiceImpl<S extends DescService, E, R> = {
  readonly [K in keyof S["method"]]: UnaryMethodOf<S["method"][K]> extends { input: infer I extends DescMessage; output: infer O extends DescMessage }
    ? EffectHandler<I, O, E, R>
    : never
}

/**
 * A unit's routes: one function that registers its services, as connect-es recommends, plus the
 * unary methods that can also be called directly (`grpc-unary.ts`: the HTTP/2 fast path and
 * in-process calls).
 */
export interface Routes {
  (router: ConnectRouter): void
  readonly unary?: ReadonlyArray<UnaryEndpoint>
}

/** Every directly callable unary method of some routes, by HTTP/2 path. */
export const unaryEndpointsOf = (routes: ReadonlyArray<Routes>): UnaryEndpoints =>
  new Map(routes.flatMap((r) => r.unary ?? []).map((endpoint) => [methodPath(endpoint.method), endpoint]))

const interruptionCode = (signal: AbortSignal): Code =>
  ConnectError.from(signal.reason).code === Code.DeadlineExceeded ? Code.DeadlineExceeded : Code.Canceled

/**
 * Turns Effect handlers into a Connect service implementation. Each request runs on the captured
 * runtime with the abort signal wired to fiber interruption; the caller's signed principal (if
 * any) is verified and set as the fiber's caller (`Caller` reads it); a typed failure becomes a
 * Connect code plus reason through `toWire`, a defect becomes Internal and is logged with its
 * whole cause.
 */
export const effectService = <S extends DescService, E, R>(
  service: S,
  impl: EffectServiceImpl<S, E, R>,
  toWire: (error: E) => WireError
) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<R | PrincipalVerifier>()
    const verifier = yield* PrincipalVerifier
    const run = <A>(effect: Effect.Effect<A, E, R>, token: string | null, methodName: string, signal: AbortSignal, meta: CallMeta): Promise<A> => {
      const requestId = meta.requestId ?? null
      const started = performance.now()
      const handled = Effect.mapError(effect, (error) => toConnectError(toWire(error)))
      // Each call runs on a fiber of its own: its caller and request id are set, not scoped.
      const asCaller = (caller: CallerInfo) =>
        handled.pipe(setForRequestFiber(CurrentCaller, caller), setForRequestFiber(OutgoingPrincipal, Option.map(caller, (c) => c.token)))
      const program = (
        token === null
          ? asCaller(Option.none())
          : Effect.flatMap(
              verifier.verify(token).pipe(
                Effect.mapError((invalid) =>
                  toConnectError({ code: Code.Unauthenticated, reason: "INVALID_PRINCIPAL", message: `principal token rejected: ${invalid.reason}`, metadata: { cause: invalid.reason } })
                )
              ),
              (principal) => asCaller(Option.some({ principal, token }))
            )
      ).pipe(
        withRemoteParent(`rpc ${service.typeName}/${methodName}`, meta.traceparent, { kind: "server" }),
        setForRequestFiber(CurrentRequestId, isAcceptableRequestId(requestId) ? Option.some(requestId) : Option.none()),
        Effect.onExit((exit) => recordRpc(service.typeName, methodName, exitCode(exit), (performance.now() - started) / 1000))
      ) as Effect.Effect<A, ConnectError, never>
      return Runtime.runPromiseExit(runtime, program, { signal }).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) throw failure.value
        if (Cause.isInterruptedOnly(exit.cause)) throw new ConnectError("request was cancelled", interruptionCode(signal))
        // A database that is down or restarting is not a bug: the caller may retry (503 at the edge).
        if (Cause.defects(exit.cause).pipe(Chunk.some(isDependencyUnavailable))) {
          Runtime.runFork(runtime)(Effect.logWarning("rpc handler: a dependency is unavailable", exit.cause).pipe(Effect.annotateLogs("rpc", methodName), withRequestId(requestId)))
          throw new ConnectError("a dependency of the service is unavailable; retry", Code.Unavailable)
        }
        Runtime.runFork(runtime)(Effect.logError("rpc handler defect", exit.cause).pipe(Effect.annotateLogs("rpc", methodName), withRequestId(requestId)))
        throw new ConnectError("internal error", Code.Internal)
      })
    }
    const handlers = impl as Record<string, (request: unknown) => Effect.Effect<unknown, E, R>>
    const connectImpl: Record<string, (request: unknown, context: HandlerContext) => Promise<unknown>> = {}
    const unary: Array<UnaryEndpoint> = []
    for (const [name, handler] of Object.entries(handlers)) {
      connectImpl[name] = (request, context) =>
        run(handler(request), context.requestHeader.get(PRINCIPAL_HEADER), context.method.name, context.signal, {
          requestId: context.requestHeader.get(REQUEST_ID_HEADER),
          traceparent: context.requestHeader.get(TRACEPARENT_HEADER)
        })
      const desc = (service.method as Record<string, DescMethod>)[name]
      if (desc?.methodKind !== "unary") continue
      const method = desc as DescMethodUnary
      unary.push({ method, invoke: (request, token, signal, meta) => run(handler(request), token, method.name, signal, meta ?? {}) })
    }
    const routes = (router: ConnectRouter) => {
      router.service(service, connectImpl as unknown as ServiceImpl<S>)
    }
    return Object.assign(routes, { unary }) as Routes
  })

/** The gRPC code an RPC ended with, as its name (OK, NOT_FOUND, …), for the metrics. */
const exitCode = (exit: Exit.Exit<unknown, ConnectError>): string => {
  if (Exit.isSuccess(exit)) return "OK"
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return Code[failure.value.code]?.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase() ?? "UNKNOWN"
  return Cause.isInterruptedOnly(exit.cause) ? "CANCELED" : "INTERNAL"
}

/** Serving state reported by grpc.health.v1; flips to NOT_SERVING when shutdown begins. */
export class HealthStatus extends Context.Tag("@scion/kit/HealthStatus")<HealthStatus, { serving: boolean }>() {}

export const healthRoutes = (status: { serving: boolean }): Routes => (router) => {
  const current = () => ({ status: status.serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING })
  router.service(Health, {
    check: () => current(),
    async *watch(_request, context) {
      let last: HealthCheckResponse_ServingStatus | undefined
      while (!context.signal.aborted) {
        const next = current()
        if (next.status !== last) {
          last = next.status
          yield next
        }
        await new Promise((resolve) => setTimeout(resolve, 1000))
      }
    }
  })
}

/**
 * Shutdown announced before in-flight requests are aborted: long polls answer what they have
 * instead of failing. A unit that holds requests open provides it (the operation unit's waits);
 * the server then waits `graceMillis` between announcing and aborting.
 */
export class Draining extends Context.Tag("@scion/kit/Draining")<
  Draining,
  {
    /** Completes when the server begins to shut down. */
    readonly started: Effect.Effect<void>
    readonly begin: Effect.Effect<void>
    readonly graceMillis: number
  }
>() {
  static layer(graceMillis = 500): Layer.Layer<Draining> {
    return Layer.effect(
      Draining,
      Effect.map(Deferred.make<void>(), (deferred) =>
        Draining.of({ started: Deferred.await(deferred), begin: Deferred.succeed(deferred, undefined).pipe(Effect.asVoid), graceMillis })
      )
    )
  }
}

export interface ServedAddress {
  readonly port: number
  readonly url: string
}

/** A server started before its routes: health answers NOT_SERVING until `install`. */
export interface PendingServer extends ServedAddress {
  /** Serves these routes from now on and turns health SERVING; `draining` as serveHttp2 takes it. */
  readonly install: (routes: ReadonlyArray<Routes>, draining: Option.Option<Context.Tag.Service<Draining>>) => Effect.Effect<void>
}

/**
 * Serves routes over HTTP/2 cleartext (gRPC, gRPC-Web and Connect protocols) with gRPC health,
 * for the lifetime of the scope. On release: health goes NOT_SERVING; with `draining`, shutdown is
 * announced and the grace period waited out; then Connect's shutdown signal aborts in-flight
 * handlers, open sessions are closed gracefully and the server stops.
 */
export const serveHttp2 = (options: {
  readonly port: number
  readonly host?: string
  readonly routes: ReadonlyArray<Routes>
  readonly draining?: Context.Tag.Service<Draining>
}): Effect.Effect<ServedAddress, Error, Scope.Scope> =>
  Effect.flatMap(listenHttp2({ port: options.port, ...(options.host === undefined ? {} : { host: options.host }) }), (server) =>
    Effect.as(server.install(options.routes, Option.fromNullable(options.draining)), { port: server.port, url: server.url })
  )

/**
 * Listens on the port at once with gRPC health only (NOT_SERVING), so a unit waiting for its
 * dependencies answers probes as not ready instead of refusing connections; `install` brings the
 * unit's routes in. The release is serveHttp2's.
 */
export const listenHttp2 = (options: { readonly port: number; readonly host?: string }): Effect.Effect<PendingServer, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.flatMap(maxMessageBytesConfig, (readMaxBytes) => Effect.async<{ server: http2.Http2Server; sessions: Set<http2.ServerHttp2Session>; shutdown: AbortController; state: ServerState }, Error>((resume) => {
      const shutdown = new AbortController()
      // Connect adds one abort listener per in-flight request: no limit, or load prints warnings.
      setMaxListeners(0, shutdown.signal)
      const status = { serving: false }
      const handlersOf = (routes: ReadonlyArray<Routes>) => {
        const all = [...routes, healthRoutes(status)]
        return {
          connect: connectNodeAdapter({
            routes: (router) => all.forEach((r) => r(router)),
            readMaxBytes,
            shutdownSignal: shutdown.signal,
            // Until the unit's routes are installed its methods are not unknown, only not ready yet.
            ...(routes.length === 0 ? { fallback: answerStarting } : {})
          }),
          // Unary gRPC to our own methods takes the direct path; the rest is connect-es's.
          endpoints: unaryEndpointsOf(all)
        }
      }
      const state: ServerState = { status, handlers: handlersOf([]), handlersOf, draining: Option.none() }
      // No request listener: Node would then build a compat request and response for every
      // stream. The direct path works on the stream; the rest get the pair here, as Node's own
      // stream handler makes it, and go to connect-es.
      const server = http2.createServer({})
      server.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: Array<string>) => {
        const { connect, endpoints } = state.handlers
        if (!serveGrpcUnary(endpoints, stream, headers, shutdown.signal, readMaxBytes)) serveCompat(connect, stream, headers, rawHeaders)
      })
      const sessions = new Set<http2.ServerHttp2Session>()
      // Responses go out as several small writes (headers, message, trailers): without
      // TCP_NODELAY, Nagle holds the later ones for the peer's delayed ACK (tens of ms).
      server.on("connection", (socket: Socket) => socket.setNoDelay(true))
      server.on("session", (session) => {
        sessions.add(session)
        session.on("close", () => sessions.delete(session))
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(options.port, options.host ?? "0.0.0.0", () => resume(Effect.succeed({ server, sessions, shutdown, state })))
    })),
    ({ server, sessions, shutdown, state }) =>
      Effect.gen(function* () {
        state.status.serving = false
        if (Option.isSome(state.draining)) {
          yield* state.draining.value.begin
          yield* Effect.sleep(state.draining.value.graceMillis)
        }
        yield* Effect.async<void>((resume) => {
          shutdown.abort()
          for (const session of sessions) session.close()
          server.close(() => resume(Effect.void))
          // Sessions whose peers never finish are destroyed so shutdown stays bounded.
          setTimeout(() => sessions.forEach((s) => s.destroy()), 5000).unref()
        })
      })
  ).pipe(
    Effect.map(({ server, state }): PendingServer => {
      const port = (server.address() as AddressInfo).port
      return {
        port,
        url: `http://127.0.0.1:${port}`,
        install: (routes, draining) =>
          Effect.sync(() => {
            state.handlers = state.handlersOf(routes)
            state.draining = draining
            state.status.serving = true
          })
      }
    })
  )

/** Node's compat classes, constructed as its own stream handler constructs them (not part of their typings). */
const CompatRequest = http2.Http2ServerRequest as unknown as new (
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  options: undefined,
  rawHeaders: ReadonlyArray<string>
) => http2.Http2ServerRequest
const CompatResponse = http2.Http2ServerResponse as unknown as new (stream: http2.ServerHttp2Stream) => http2.Http2ServerResponse

/**
 * A stream handed to connect-es through Node's compat request and response, made as Node's own
 * stream handler makes them when a server has a request listener (lib/internal/http2/compat.js
 * `onServerStream`, Node 20): CONNECT is refused (405), `Expect: 100-continue` gets its interim
 * response, any other expectation fails (417).
 */
const serveCompat = (
  connect: ReturnType<typeof connectNodeAdapter>,
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  rawHeaders: ReadonlyArray<string>
): void => {
  const request = new CompatRequest(stream, headers, undefined, rawHeaders)
  const response = new CompatResponse(stream)
  if (headers[":method"] === "CONNECT") {
    response.statusCode = 405
    response.end()
    return
  }
  if (headers.expect !== undefined) {
    if (headers.expect !== "100-continue") {
      response.statusCode = 417
      response.end()
      return
    }
    response.writeContinue()
  }
  connect(request, response)
}

/**
 * What a call to a unit's method gets while the unit is starting: UNAVAILABLE, which callers retry
 * (and the gateway answers 503), in the protocol the call used, rather than the router's 404 for
 * an unknown path, which callers take for a bug (the gateway answered 500 in CI while a unit that
 * had just been restarted was still waiting for identity's keys).
 */
type ConnectFallback = NonNullable<Parameters<typeof connectNodeAdapter>[0]["fallback"]>

const answerStarting: ConnectFallback = (request, response) => {
  const message = "the unit is starting"
  const contentType = request.headers["content-type"] ?? ""
  if (contentType.startsWith("application/grpc")) {
    // A trailers-only response: the status in the headers, no body.
    response.writeHead(200, { "content-type": contentType.startsWith("application/grpc-web") ? contentType : "application/grpc", "grpc-status": String(Code.Unavailable), "grpc-message": message })
    response.end()
    return
  }
  // The Connect protocol: unary errors are an HTTP status and a JSON body.
  response.writeHead(503, { "content-type": "application/json" })
  response.end(JSON.stringify({ code: "unavailable", message }))
}

interface ServerState {
  readonly status: { serving: boolean }
  handlers: { readonly connect: ReturnType<typeof connectNodeAdapter>; readonly endpoints: ReturnType<typeof unaryEndpointsOf> }
  readonly handlersOf: (routes: ReadonlyArray<Routes>) => ServerState["handlers"]
  draining: Option.Option<Context.Tag.Service<Draining>>
}

/** PORT for a unit's gRPC server, with the unit's conventional default. */
export const portConfig = (fallback: number) => Config.integer("PORT").pipe(Config.withDefault(fallback))

/**
 * A unit process: PORT answers gRPC health at once (NOT_SERVING) while the unit's layer is built
 * — waiting for identity's keys, its database, NATS — then serves the routes and turns SERVING.
 * On shutdown the server goes first (NOT_SERVING, drain), then the unit's resources close.
 */
export const serveUnitLayer = <R, E, RIn>(
  fallbackPort: number,
  routes: Effect.Effect<ReadonlyArray<Routes>, never, R>,
  unit: Layer.Layer<R, E, RIn>
): Layer.Layer<never, never, RIn> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const port = yield* portConfig(fallbackPort)
      // Forked before the server is started, so it closes after the server's release.
      const unitScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      const server = yield* listenHttp2({ port })
      yield* Effect.logInfo("health answering NOT_SERVING until the unit is ready").pipe(Effect.annotateLogs({ port: server.port }))
      const context = yield* Layer.buildWithScope(unit, unitScope)
      yield* server.install(yield* Effect.provide(routes, context), Context.getOption(context, Draining))
      yield* Effect.logInfo("serving gRPC").pipe(Effect.annotateLogs({ port: server.port }))
    }).pipe(Effect.orDie)
  )
