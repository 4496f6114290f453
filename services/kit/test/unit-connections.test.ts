import * as http2 from "node:http2"
import type { AddressInfo } from "node:net"
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { grpcTransport } from "../src/index.js"
import { waitUntil } from "./bus.contract.js"

/** An HTTP/2 peer that counts the connections made to it. */
const countingPeer = Effect.acquireRelease(
  Effect.async<{ server: http2.Http2Server; url: string; sessions: () => number }>((resume) => {
    let sessions = 0
    const server = http2.createServer()
    server.on("session", () => void sessions++)
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sessions: () => sessions })))
  }),
  ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
)

describe("a unit's connection to another unit", () => {
  it.live("is made with the transport, before the first call: the first call pays no connection", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const peer = yield* countingPeer
        yield* grpcTransport(peer.url)
        yield* waitUntil("the connection", () => peer.sessions() === 1, "2 seconds")
      })
    )
  )
})
