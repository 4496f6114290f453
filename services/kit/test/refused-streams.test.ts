import * as http2 from "node:http2"
import type { AddressInfo } from "node:net"
import { create, toBinary } from "@bufbuild/protobuf"
import { Code } from "@connectrpc/connect"
import { describe, expect, it } from "@effect/vitest"
import { GetOperationResponseSchema, OperationService, OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect } from "effect"
import { grpcTransport, makeEffectClient } from "../src/index.js"

/**
 * An HTTP/2 peer that refuses the first `refusals` streams it gets (RST_STREAM REFUSED_STREAM,
 * what a unit that is shutting down answers to the streams that crossed its GOAWAY) and answers
 * the others as a unit would, with one operation in gRPC's framing.
 */
const refusingPeer = (refusals: number) =>
  Effect.acquireRelease(
    Effect.async<{ server: http2.Http2Server; url: string; streams: () => number }>((resume) => {
      let streams = 0
      const server = http2.createServer()
      server.on("stream", (stream) => {
        streams++
        // Closing with an error code destroys the stream with that error: nothing to report here.
        stream.on("error", () => undefined)
        if (streams <= refusals) return stream.close(http2.constants.NGHTTP2_REFUSED_STREAM)
        stream.on("data", () => undefined)
        stream.on("end", () => {
          const message = toBinary(GetOperationResponseSchema, create(GetOperationResponseSchema, { operation: { id: "op_refused", status: OperationStatus.COMPLETED } }))
          const framed = Buffer.alloc(5 + message.byteLength)
          framed.writeUInt32BE(message.byteLength, 1)
          framed.set(message, 5)
          stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true })
          stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }))
          stream.end(framed)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, streams: () => streams })))
    }),
    ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

describe("calls to a unit that refuses a stream (a draining replica)", () => {
  it.scoped("are sent again once, and answer what the second attempt got", () =>
    Effect.gen(function* () {
      const peer = yield* refusingPeer(1)
      const client = makeEffectClient(OperationService, yield* grpcTransport(peer.url))
      const response = yield* client.getOperation({ id: "op_refused" })
      expect(response.operation?.status).toBe(OperationStatus.COMPLETED)
      expect(peer.streams()).toBe(2)
    })
  )

  it.scoped("fail UNAVAILABLE, retryable, when the second attempt is refused too", () =>
    Effect.gen(function* () {
      const peer = yield* refusingPeer(Number.MAX_SAFE_INTEGER)
      const client = makeEffectClient(OperationService, yield* grpcTransport(peer.url))
      const error = yield* Effect.flip(client.getOperation({ id: "op_refused" }))
      expect(error.code).toBe(Code.Unavailable)
      expect(peer.streams()).toBe(2)
    })
  )
})
