import * as http2 from "node:http2"
import { create, toBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "@effect/vitest"
import { GetOperationRequestSchema, OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option } from "effect"
import { effectService, http2Transport, listenHttp2, makeEffectClient, PrincipalVerifier } from "../src/index.js"

/**
 * A unit's server handles HTTP/2 streams itself (the direct unary path) and builds Node's compat
 * request and response only for what it hands to connect-es: what a client does to a stream must
 * not take it down, and everything else must still reach connect-es as before.
 */
const servedUnit = Effect.gen(function* () {
  const unexpected = Object.fromEntries(Object.keys(OperationService.method).map((name) => [name, () => Effect.dieMessage(`${name} is not served here`)]))
  const impl = {
    ...unexpected,
    // op_slow answers after a while, so a client can go away while it runs.
    getOperation: (request: { readonly id: string }) => Effect.as(request.id === "op_slow" ? Effect.sleep("300 millis") : Effect.void, { operation: { id: request.id } })
  }
  const routes = yield* effectService<typeof OperationService, never, never>(OperationService, impl as never, (error: never) => error).pipe(
    Effect.provideService(PrincipalVerifier, PrincipalVerifier.of({ verify: () => Effect.dieMessage("no principal is sent here") }))
  )
  const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
  yield* server.install([routes], Option.none())
  return server.url
})

const framed = (id: string) => {
  const message = toBinary(GetOperationRequestSchema, create(GetOperationRequestSchema, { id }))
  const out = Buffer.alloc(5 + message.byteLength)
  out.writeUInt32BE(message.byteLength, 1)
  out.set(message, 5)
  return out
}

/** An HTTP/2 session of the test's own to the unit, closed with the scope. */
const rawSession = (url: string) =>
  Effect.acquireRelease(
    Effect.async<http2.ClientHttp2Session>((resume) => {
      const session = http2.connect(url)
      session.on("error", () => undefined)
      session.once("connect", () => resume(Effect.succeed(session)))
    }),
    (session) => Effect.sync(() => session.close())
  )

/** The stream's response status (and whether it ended cleanly), read to its end. */
const statusOf = (stream: http2.ClientHttp2Stream) =>
  Effect.async<{ readonly status: number | undefined; readonly headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader }>((resume) => {
    let headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader = {}
    stream.on("error", () => undefined)
    stream.once("response", (h) => (headers = h))
    stream.on("data", () => undefined)
    stream.once("close", () => resume(Effect.succeed({ status: headers[":status"], headers })))
  })

describe("a unit's HTTP/2 streams", () => {
  it.scopedLive("a client that resets its call before and while the handler runs leaves the unit serving", () =>
    Effect.gen(function* () {
      const url = yield* servedUnit
      const session = yield* rawSession(url)
      const path = `/${OperationService.typeName}/GetOperation`
      const headers = { ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers" }
      // Reset before the body arrives, and again while the (slow) handler runs.
      const early = session.request(headers)
      early.on("error", () => undefined)
      early.close(http2.constants.NGHTTP2_CANCEL)
      const late = session.request(headers)
      late.on("error", () => undefined)
      late.end(framed("op_slow"))
      yield* Effect.sleep("50 millis")
      // A reset with an error code is an 'error' on the server's stream (CANCEL is not).
      late.close(http2.constants.NGHTTP2_INTERNAL_ERROR)
      yield* Effect.sleep("400 millis")
      const client = makeEffectClient(OperationService, yield* http2Transport(url, "grpc"))
      expect((yield* client.getOperation({ id: "op_after" })).operation?.id).toBe("op_after")
    })
  )

  it.scopedLive("what the direct path does not take still reaches connect-es: the Connect protocol, CONNECT and expectations", () =>
    Effect.gen(function* () {
      const url = yield* servedUnit
      const session = yield* rawSession(url)
      const path = `/${OperationService.typeName}/GetOperation`
      // A Connect-protocol JSON call is connect-es's to answer.
      const json = session.request({ ":method": "POST", ":path": path, "content-type": "application/json" })
      const body: Array<Buffer> = []
      json.on("data", (chunk: Buffer) => body.push(chunk))
      json.end(JSON.stringify({ id: "op_json" }))
      const answered = yield* statusOf(json)
      expect(answered.status).toBe(200)
      expect(JSON.parse(Buffer.concat(body).toString("utf8"))).toEqual({ operation: { id: "op_json" } })
      // CONNECT is refused as Node's own handler refuses it.
      const tunnel = session.request({ ":method": "CONNECT", ":authority": "example.invalid:443" })
      tunnel.end()
      expect((yield* statusOf(tunnel)).status).toBe(405)
      // An expectation the server cannot meet fails; 100-continue is met and the call answered.
      const expecting = session.request({ ":method": "POST", ":path": path, "content-type": "application/json", expect: "something-else" })
      expecting.end("{}")
      expect((yield* statusOf(expecting)).status).toBe(417)
      const continuing = session.request({ ":method": "POST", ":path": path, "content-type": "application/json", expect: "100-continue" })
      continuing.end(JSON.stringify({ id: "op_continue" }))
      expect((yield* statusOf(continuing)).status).toBe(200)
    })
  )
})
