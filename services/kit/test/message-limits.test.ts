import * as http2 from "node:http2"
import { Code } from "@connectrpc/connect"
import { describe, expect, it } from "@effect/vitest"
import { OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { ConfigProvider, Effect, Option } from "effect"
import { effectService, http2Transport, listenHttp2, makeEffectClient, PrincipalVerifier } from "../src/index.js"

/**
 * What a unit reads in one message is bounded (UNIT_RPC_MAX_MESSAGE_BYTES): a peer that sends, or
 * answers with, more is refused with RESOURCE_EXHAUSTED instead of being buffered without end,
 * and the unit goes on serving.
 */
const LIMIT = 4096
const limited = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.withConfigProvider(effect, ConfigProvider.fromMap(new Map([["UNIT_RPC_MAX_MESSAGE_BYTES", String(LIMIT)]])))

/** A unit serving GetOperation: it echoes the id, and `op_big` answers with a 20 kB error text. */
const servedUnit = Effect.gen(function* () {
  const unexpected = Object.fromEntries(Object.keys(OperationService.method).map((name) => [name, () => Effect.dieMessage(`${name} is not served here`)]))
  const impl = {
    ...unexpected,
    getOperation: (request: { readonly id: string }) => Effect.succeed({ operation: { id: request.id, error: request.id === "op_big" ? "x".repeat(20_000) : "" } })
  }
  const routes = yield* effectService<typeof OperationService, never, never>(OperationService, impl as never, (error: never) => error).pipe(
    Effect.provideService(PrincipalVerifier, PrincipalVerifier.of({ verify: () => Effect.dieMessage("no principal is sent here") }))
  )
  const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
  yield* server.install([routes], Option.none())
  return server.url
})

const codeOf = <A, E extends { readonly code: number }, R>(call: Effect.Effect<A, E, R>) => Effect.map(Effect.flip(call), (error) => error.code)

describe("message size limits between units", () => {
  it.scopedLive("a request over the server's limit is RESOURCE_EXHAUSTED on the gRPC and Connect protocols, and the unit goes on serving", () =>
    Effect.gen(function* () {
      const url = yield* limited(servedUnit)
      const oversized = `op_${"a".repeat(LIMIT)}`
      const grpc = makeEffectClient(OperationService, yield* http2Transport(url, "grpc"))
      expect(yield* codeOf(grpc.getOperation({ id: oversized }))).toBe(Code.ResourceExhausted)
      const connect = makeEffectClient(OperationService, yield* http2Transport(url, "connect"))
      expect(yield* codeOf(connect.getOperation({ id: oversized }))).toBe(Code.ResourceExhausted)
      // Just under the limit still passes, on the same connections.
      const fits = `op_${"a".repeat(LIMIT - 100)}`
      expect((yield* grpc.getOperation({ id: fits })).operation?.id).toBe(fits)
      expect((yield* connect.getOperation({ id: fits })).operation?.id).toBe(fits)
    })
  )

  it.scopedLive("the server refuses an oversized request as it arrives, without waiting for (or keeping) the rest", () =>
    Effect.gen(function* () {
      const url = yield* limited(servedUnit)
      const session = yield* Effect.acquireRelease(
        Effect.async<http2.ClientHttp2Session>((resume) => {
          const opened = http2.connect(url)
          opened.on("error", () => undefined)
          opened.once("connect", () => resume(Effect.succeed(opened)))
        }),
        (opened) => Effect.sync(() => opened.close())
      )
      const stream = session.request({ ":method": "POST", ":path": `/${OperationService.typeName}/GetOperation`, "content-type": "application/grpc+proto", te: "trailers" })
      stream.on("error", () => undefined)
      // A frame that declares 1 MiB; twice the limit of it is sent and the stream is left open.
      const header = Buffer.alloc(5)
      header.writeUInt32BE(1024 * 1024, 1)
      stream.write(Buffer.concat([header, Buffer.alloc(2 * LIMIT)]))
      const answered = yield* Effect.async<http2.IncomingHttpHeaders>((resume) => {
        stream.once("response", (headers) => resume(Effect.succeed(headers)))
      }).pipe(Effect.timeout("5 seconds"))
      expect(answered["grpc-status"]).toBe(String(Code.ResourceExhausted))
      expect(decodeURIComponent(String(answered["grpc-message"]))).toBe(`the request is larger than ${LIMIT} bytes`)
      // The server ended the exchange: the stream closes though the client never ended its side.
      yield* Effect.async<void>((resume) => {
        if (stream.closed) return resume(Effect.void)
        stream.once("close", () => resume(Effect.void))
      }).pipe(Effect.timeout("5 seconds"))
    })
  )

  it.scopedLive("a response over the client's limit is RESOURCE_EXHAUSTED for the caller, on the gRPC and Connect protocols", () =>
    Effect.gen(function* () {
      // The server reads up to the default; only the calling side is limited.
      const url = yield* servedUnit
      const grpc = makeEffectClient(OperationService, yield* limited(http2Transport(url, "grpc")))
      expect(yield* codeOf(grpc.getOperation({ id: "op_big" }))).toBe(Code.ResourceExhausted)
      const connect = makeEffectClient(OperationService, yield* limited(http2Transport(url, "connect")))
      expect(yield* codeOf(connect.getOperation({ id: "op_big" }))).toBe(Code.ResourceExhausted)
      // The next call on the same connection is answered.
      expect((yield* grpc.getOperation({ id: "op_small" })).operation?.id).toBe("op_small")
    })
  )
})
