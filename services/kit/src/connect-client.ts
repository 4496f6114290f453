import type { DescMessage, DescMethod, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf"
import { ConnectError, createClient, createRouterTransport, type Transport } from "@connectrpc/connect"
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node"
import { connect as netConnect } from "node:net"
import { Config, Effect, FiberRef, Option } from "effect"
import { type Routes, unaryEndpointsOf } from "./connect-server.js"
import { fromConnectError, type RpcError } from "./errors.js"
import { type DirectUnary, grpcDirectUnary, inProcessDirectUnary, maxMessageBytesConfig } from "./grpc-unary.js"
import { OutgoingPrincipal, PRINCIPAL_HEADER } from "./principal.js"
import { currentTraceparent } from "./bus/Bus.js"
import { CurrentRequestId, REQUEST_ID_HEADER } from "./request-id.js"
import { TRACEPARENT_HEADER } from "./tracing.js"

/**
 * A Connect transport to another unit that may also offer the direct unary path
 * (`grpc-unary.ts`); the Effect clients take it when it is there, other clients never see it.
 */
export interface UnitTransport extends Transport {
  readonly directUnary?: DirectUnary
}

/** A unit's routes served inside this process: Connect's router transport plus direct calls. */
export const inProcessTransport = (routes: ReadonlyArray<Routes>): UnitTransport =>
  Object.assign(createRouterTransport((router) => routes.forEach((register) => register(router))), {
    directUnary: inProcessDirectUnary(unaryEndpointsOf(routes))
  })

type UnaryCall<M> = M extends DescMethodUnary<infer I extends DescMessage, infer O extends DescMessage>
  ? (request: MessageInitShape<I>) => Effect.Effect<MessageShape<O>, RpcError>
  : never

/**
 * A Connect client whose unary calls are Effects: failures arrive as a typed `RpcError` (code,
 * reason, metadata), interruption aborts the call, and the current principal token rides along.
 */
export type EffectClient<S extends DescService> = { readonly [K in keyof S["method"]]: UnaryCall<S["method"][K]> }

export const makeEffectClient = <S extends DescService>(service: S, transport: UnitTransport): EffectClient<S> => {
  const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => Promise<unknown>>
  const calls: Record<string, (request: unknown) => Effect.Effect<unknown, RpcError>> = {}
  const direct = transport.directUnary
  for (const [name, desc] of Object.entries(service.method as Record<string, DescMethod>)) {
    // The direct unary path when the transport offers one (resumed from its callback; interrupting
    // the fiber cancels the call), connect-es's client otherwise.
    const send: (request: unknown, headers: Record<string, string>) => Effect.Effect<unknown, RpcError> =
      direct !== undefined && desc.methodKind === "unary"
        ? (request, headers) =>
            Effect.async<unknown, RpcError>((resume) => {
              const cancel = direct(desc as DescMethodUnary, request, headers, (error, response) =>
                resume(error === undefined ? Effect.succeed(response) : Effect.fail(fromConnectError(error)))
              )
              return Effect.sync(cancel)
            })
        : (request, headers) => Effect.tryPromise({ try: (signal) => client[name]!(request, { signal, headers }), catch: fromConnectError })
    const spanName = `rpc.client ${service.typeName}/${name}`
    // The call's metadata read off the fiber in one step: it runs on every call a unit makes.
    calls[name] = (request) =>
      Effect.withFiberRuntime((fiber) => {
        const headers: Record<string, string> = {}
        const principal = fiber.getFiberRef(OutgoingPrincipal)
        if (Option.isSome(principal)) headers[PRINCIPAL_HEADER] = principal.value
        const requestId = fiber.getFiberRef(CurrentRequestId)
        if (Option.isSome(requestId)) headers[REQUEST_ID_HEADER] = requestId.value
        const call = send(request, headers)
        // Only a recording tracer makes spans with W3C ids: the client span, sent as traceparent.
        if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return call
        return Effect.withSpan(
          Effect.flatMap(currentTraceparent, (traceparent) => {
            if (Option.isSome(traceparent)) headers[TRACEPARENT_HEADER] = traceparent.value
            return call
          }),
          spanName,
          { kind: "client" }
        )
      })
  }
  return calls as unknown as EffectClient<S>
}

let goawayGuardInstalled = false

/**
 * connect-node's session manager can raise "received GOAWAY without any open streams" as an
 * uncaught exception after it has stopped listening to the connection (connectrpc/connect-es
 * #1768, fix pending): a peer restarting would take this unit down with it. That one error is
 * logged and ignored; any other uncaught exception still ends the process as Node would.
 */
const installGoawayGuard = () => {
  if (goawayGuardInstalled) return
  goawayGuardInstalled = true
  process.on("uncaughtException", (error) => {
    if (error instanceof ConnectError && error.rawMessage === "received GOAWAY without any open streams") {
      process.stderr.write(`${JSON.stringify({ message: "ignored a late GOAWAY error from an idle HTTP/2 connection (connect-es#1768)", logLevel: "WARN", timestamp: new Date().toISOString() })}\n`)
      return
    }
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  })
}

/** The wire protocols our units speak to each other (every unit serves all of Connect's). */
export type UnitRpcProtocol = "grpc" | "connect"

/**
 * A transport to another unit over one HTTP/2 connection for the lifetime of the scope, opened
 * as the transport is made (a unit's first call does not pay the connection; a peer that is not
 * up yet is connected on the first call instead). Pings keep the connection honest, idle too:
 * a call after a quiet spell neither waits for a verifying PING (the manager sends one before a
 * call on a connection it has not heard from for a ping interval) nor for a new connection (idle
 * ones closed after 60 s). A connection idle for 15 minutes closes; a peer's GOAWAY never
 * surprises us. `grpc` is the gRPC protocol; `connect` the Connect protocol with binary
 * protobuf, same HTTP/2 session handling.
 */
export const http2Transport = (baseUrl: string, protocol: UnitRpcProtocol) =>
  Effect.acquireRelease(
    Effect.map(maxMessageBytesConfig, (readMaxBytes) => {
      installGoawayGuard()
      const sessionManager = new Http2SessionManager(
        baseUrl,
        { pingIntervalMs: 30_000, pingTimeoutMs: 10_000, pingIdleConnection: true, idleConnectionTimeoutMs: 15 * 60_000 },
        // A request goes out as HEADERS then DATA: without TCP_NODELAY, Nagle holds the DATA
        // for the server's delayed ACK, tens of milliseconds per call.
        { createConnection: (authority: URL) => netConnect({ host: authority.hostname, port: Number(authority.port || 80), noDelay: true }) }
      )
      const transport: UnitTransport =
        protocol === "grpc"
          ? Object.assign(createGrpcTransport({ baseUrl, sessionManager, readMaxBytes }), { directUnary: grpcDirectUnary(sessionManager, readMaxBytes) })
          : createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, sessionManager, readMaxBytes })
      // Never rejects: a refused connection leaves the manager to connect on the first call.
      void sessionManager.connect()
      return { sessionManager, transport }
    }),
    ({ sessionManager }) => Effect.sync(() => sessionManager.abort())
  ).pipe(Effect.map(({ transport }): UnitTransport => transport))

/** An HTTP/2 gRPC transport to another unit (tests and other teams' clients prove gRPC with it). */
export const grpcTransport = (baseUrl: string) => http2Transport(baseUrl, "grpc")

/**
 * The transport units use to call each other: UNIT_RPC_PROTOCOL, `grpc` (default, as the
 * architecture states: unary calls take the direct path of `grpc-unary.ts`) or `connect` (the
 * Connect protocol through connect-es, binary, same HTTP/2 sessions; kept to compare in
 * `bench:gateway`). Servers always serve gRPC, gRPC-Web and Connect, so either works against any
 * unit.
 */
export const unitTransport = (baseUrl: string) =>
  Effect.flatMap(
    Config.literal("connect", "grpc")("UNIT_RPC_PROTOCOL").pipe(Config.withDefault("grpc" as const), Effect.orDie),
    (protocol) => http2Transport(baseUrl, protocol)
  )
