import type { DescMessage, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf"
import { ConnectError, createClient, type Transport } from "@connectrpc/connect"
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node"
import { Effect, FiberRef, Option } from "effect"
import { fromConnectError, type RpcError } from "./errors.js"
import { OutgoingPrincipal, PRINCIPAL_HEADER } from "./principal.js"

type UnaryCall<M> = M extends DescMethodUnary<infer I extends DescMessage, infer O extends DescMessage>
  ? (request: MessageInitShape<I>) => Effect.Effect<MessageShape<O>, RpcError>
  : never

/**
 * A Connect client whose unary calls are Effects: failures arrive as a typed `RpcError` (code,
 * reason, metadata), interruption aborts the call, and the current principal token rides along.
 */
export type EffectClient<S extends DescService> = { readonly [K in keyof S["method"]]: UnaryCall<S["method"][K]> }

export const makeEffectClient = <S extends DescService>(service: S, transport: Transport): EffectClient<S> => {
  const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => Promise<unknown>>
  const calls: Record<string, (request: unknown) => Effect.Effect<unknown, RpcError>> = {}
  for (const name of Object.keys(service.method)) {
    const method = client[name]!
    calls[name] = (request) =>
      Effect.flatMap(FiberRef.get(OutgoingPrincipal), (principal) =>
        Effect.tryPromise({
          try: (signal) =>
            method(request, {
              signal,
              headers: Option.isSome(principal) ? { [PRINCIPAL_HEADER]: principal.value } : {}
            }),
          catch: fromConnectError
        })
      ).pipe(Effect.withSpan(`rpc.client ${service.typeName}/${name}`, { kind: "client" }))
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

/**
 * An HTTP/2 gRPC transport to another unit for the lifetime of the scope. Pings keep the
 * connection honest and idle connections are closed, so a peer's GOAWAY never surprises us.
 */
export const grpcTransport = (baseUrl: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      installGoawayGuard()
      const sessionManager = new Http2SessionManager(baseUrl, {
        pingIntervalMs: 30_000,
        pingTimeoutMs: 10_000,
        idleConnectionTimeoutMs: 60_000
      })
      return { sessionManager, transport: createGrpcTransport({ baseUrl, sessionManager }) }
    }),
    ({ sessionManager }) => Effect.sync(() => sessionManager.abort())
  ).pipe(Effect.map(({ transport }) => transport))
