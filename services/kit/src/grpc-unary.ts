import * as http2 from "node:http2"
import { create, fromBinary, toBinary, type DescMessage, type DescMethodUnary, type MessageShape } from "@bufbuild/protobuf"
import { Code, ConnectError } from "@connectrpc/connect"
// connect-es marks these helpers private (no semver); the version is pinned, and the trailer
// encoding they share with connect's own gRPC protocol is what keeps our fast path byte-compatible.
import { findTrailerError, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc"
import type { Http2SessionManager } from "@connectrpc/connect-node"
import { Config, Effect } from "effect"
import { PRINCIPAL_HEADER } from "./principal.js"
import { REQUEST_ID_HEADER } from "./request-id.js"
import { TRACEPARENT_HEADER } from "./tracing.js"

/**
 * The unit hop at the cost of a function call.
 *
 * connect-es runs every unary call through web streams, async iterables, linked abort signals and
 * header objects: measured here, ~630 µs of server CPU and ~610 µs of client CPU per gRPC call,
 * 7× what `@grpc/grpc-js` spends on the same exchange. Our units call each other thousands of
 * times a second with one small message each way, so the unary gRPC exchange between them takes
 * a direct path over node:http2 (the framing is five bytes and a trailer), and everything else
 * (the Connect and gRPC-Web protocols, JSON, compression, streams, other clients) still goes
 * through connect-es on the same port. Errors are encoded and decoded by connect's own trailer
 * helpers, so a grpc-js client, `buf curl` and a Connect client see exactly what they saw before.
 */

/** A unary method a unit serves, callable without a protocol: the message in, the message out. */
export interface UnaryEndpoint {
  readonly method: DescMethodUnary
  /** Runs the handler; rejects with a ConnectError (code, reason detail) when it fails. */
  readonly invoke: (request: MessageShape<DescMessage>, principalToken: string | null, signal: AbortSignal, meta?: CallMeta) => Promise<unknown>
}

/** What a call carries besides the principal: the request id and the W3C trace context. */
export interface CallMeta {
  readonly requestId?: string | null
  readonly traceparent?: string | null
}

const headerValue = (value: string | ReadonlyArray<string> | undefined): string | null => (typeof value === "string" ? value : null)

export const methodPath = (method: DescMethodUnary): string => `/${method.parent.typeName}/${method.name}`

/** Endpoints by their HTTP/2 path. */
export type UnaryEndpoints = ReadonlyMap<string, UnaryEndpoint>

/**
 * A direct unary call: what the Effect clients use when a transport offers it (the HTTP/2 path
 * below, or a function call inside one process). `headers` are the request's metadata. The answer
 * comes through `done`, once, with the response or a ConnectError; the function returned cancels
 * the call, after which `done` is not called. A callback rather than a promise and an abort
 * signal: the Effect client resumes from it directly, and a call costs no AbortController, no
 * listener and no promise (each a visible share of a unit's CPU per call in the benches).
 */
export type DirectUnary = (
  method: DescMethodUnary,
  request: unknown,
  headers: Readonly<Record<string, string>>,
  done: (error: ConnectError | undefined, response?: unknown) => void
) => () => void

const GRPC_CONTENT_TYPES = new Set(["application/grpc", "application/grpc+proto"])

/** A gRPC message's frame header: the compressed flag and the length. */
const FRAME_HEADER_BYTES = 5

const frame = (payload: Uint8Array): Buffer => {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.byteLength)
  out[0] = 0
  out.writeUInt32BE(payload.byteLength, 1)
  out.set(payload, FRAME_HEADER_BYTES)
  return out
}

/** The single uncompressed message of a unary gRPC body, or an error to answer with. */
const unframe = (body: Buffer): Uint8Array | ConnectError => {
  if (body.byteLength < FRAME_HEADER_BYTES) return new ConnectError("protocol error: missing message", Code.InvalidArgument)
  if (body[0] !== 0) return new ConnectError("protocol error: compressed message without grpc-encoding", Code.Internal)
  const length = body.readUInt32BE(1)
  if (body.byteLength !== FRAME_HEADER_BYTES + length) return new ConnectError("protocol error: expected exactly one message", Code.InvalidArgument)
  return body.subarray(FRAME_HEADER_BYTES)
}

const trailersOf = (error: ConnectError | undefined): Record<string, string> => Object.fromEntries(setTrailerStatus(new Headers(), error))

/** The trailers of every successful answer, encoded once (grpc-status 0). */
const OK_TRAILERS: Readonly<Record<string, string>> = Object.freeze(trailersOf(undefined))

/**
 * The largest message a unit reads, unless UNIT_RPC_MAX_MESSAGE_BYTES says otherwise: gRPC's
 * servers and clients all bound what they read (grpc-js at 4 MiB); ours are bound above the
 * largest message units exchange (lists of 1,000 rows, schema catalogs), so a peer cannot make a
 * unit buffer without end.
 */
const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

/** UNIT_RPC_MAX_MESSAGE_BYTES: what a unit's servers and clients read at most in one message. */
export const maxMessageBytesConfig = Config.integer("UNIT_RPC_MAX_MESSAGE_BYTES").pipe(
  Config.withDefault(DEFAULT_MAX_MESSAGE_BYTES),
  Config.validate({ message: "UNIT_RPC_MAX_MESSAGE_BYTES must be from 1024 to 2147483647", validation: (n) => n >= 1024 && n <= 2 ** 31 - 1 }),
  Effect.orDie
)

/**
 * A unary body's chunks as they arrive, up to one framed message of `maxMessageBytes`: `add`
 * answers false, keeping nothing, once the body has grown past it.
 */
const boundedBody = (maxMessageBytes: number) => {
  const chunks: Array<Buffer> = []
  let received = 0
  return {
    add: (chunk: Buffer): boolean => {
      received += chunk.byteLength
      if (received > FRAME_HEADER_BYTES + maxMessageBytes) {
        chunks.length = 0
        return false
      }
      chunks.push(chunk)
      return true
    },
    /** The message, or the error to answer with. */
    message: (): Uint8Array | ConnectError => unframe(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
  }
}

/** A message over the limit, refused as gRPC does (RESOURCE_EXHAUSTED). */
const tooLarge = (what: "request" | "response", maxMessageBytes: number) =>
  new ConnectError(`the ${what} is larger than ${maxMessageBytes} bytes`, Code.ResourceExhausted)

/** A message that protobuf could not encode: a bug of the unit that made it. */
const notEncodable = (what: "request" | "response") => new ConnectError(`internal error: the ${what} does not encode`, Code.Internal)

const asConnectError = (cause: unknown): ConnectError => (cause instanceof ConnectError ? cause : new ConnectError("internal error", Code.Internal))

/**
 * The calls in flight on a server, aborted together when its shutdown signal fires: one listener
 * per server instead of an EventTarget listener added and removed on every call (each costs more
 * than the Set's add and delete, ~1% of a unit's CPU at bench load).
 */
const inFlightByShutdown = new WeakMap<AbortSignal, Set<AbortController>>()
const callsInFlight = (shutdown: AbortSignal): Set<AbortController> => {
  let calls = inFlightByShutdown.get(shutdown)
  if (calls === undefined) {
    const created = new Set<AbortController>()
    inFlightByShutdown.set(shutdown, (calls = created))
    shutdown.addEventListener(
      "abort",
      () => {
        for (const call of created) call.abort(new ConnectError("the server is shutting down", Code.Unavailable))
        created.clear()
      },
      { once: true }
    )
  }
  return calls
}

/**
 * Serves a unary gRPC request on the direct path when it is one (gRPC protobuf, no compression,
 * a method in `endpoints`); answers false, touching nothing, for everything connect-es should
 * serve. Works on the HTTP/2 stream itself: the server builds Node's compat request and response
 * only for the streams it hands to connect-es (each pair cost ~20 µs of CPU a call here).
 */
export const serveGrpcUnary = (
  endpoints: UnaryEndpoints,
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  shutdown: AbortSignal,
  maxMessageBytes: number
): boolean => {
  const contentType = headers["content-type"]
  if (contentType === undefined || !GRPC_CONTENT_TYPES.has(contentType)) return false
  const encoding = headers["grpc-encoding"]
  if (encoding !== undefined && encoding !== "identity") return false
  const endpoint = endpoints.get(headers[":path"] ?? "")
  if (endpoint === undefined) return false

  // A stream reset by the client errors; without a listener that would end the process (the
  // compat layer swallows them the same way).
  stream.on("error", ignoreStreamError)
  if (shutdown.aborted) {
    answer(stream, undefined, new ConnectError("the server is shutting down", Code.Unavailable))
    return true
  }
  const abort = new AbortController()
  // In-flight handlers end with the server, as connect-es's do.
  const inFlight = callsInFlight(shutdown)
  inFlight.add(abort)
  let answered = false
  const timeout = parseTimeout(typeof headers["grpc-timeout"] === "string" ? headers["grpc-timeout"] : null, Number.MAX_SAFE_INTEGER)
  if (timeout.error) {
    answer(stream, undefined, timeout.error)
    return true
  }
  // Deadlines past what a timer holds (~24 days) are as good as none.
  const timer =
    timeout.timeoutMs === undefined || timeout.timeoutMs > 2 ** 31 - 1 ? undefined : setTimeout(() => abort.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeout.timeoutMs)
  stream.once("close", () => {
    inFlight.delete(abort)
    if (timer !== undefined) clearTimeout(timer)
    if (!answered) abort.abort(new ConnectError("the client went away", Code.Canceled))
  })
  const received = boundedBody(maxMessageBytes)
  stream.on("data", (chunk: Buffer) => {
    if (answered || received.add(chunk)) return
    // Refused as soon as it is too large, not buffered to its end; the client is asked to stop
    // sending (RST_STREAM NO_ERROR after a complete response, RFC 9113 §8.1).
    answered = true
    answer(stream, undefined, tooLarge("request", maxMessageBytes))
    stream.close(http2.constants.NGHTTP2_NO_ERROR)
  })
  stream.once("end", () => {
    if (answered) return
    const body = received.message()
    if (body instanceof ConnectError) {
      answered = true
      answer(stream, undefined, body)
      return
    }
    let message: MessageShape<DescMessage>
    try {
      message = fromBinary(endpoint.method.input, body)
    } catch {
      answered = true
      answer(stream, undefined, new ConnectError("protocol error: the request does not parse", Code.InvalidArgument))
      return
    }
    const principal = headers[PRINCIPAL_HEADER]
    endpoint.invoke(message, typeof principal === "string" ? principal : null, abort.signal, { requestId: headerValue(headers[REQUEST_ID_HEADER]), traceparent: headerValue(headers[TRACEPARENT_HEADER]) }).then(
      (output) => {
        answered = true
        let encoded: Uint8Array
        try {
          encoded = toBinary(endpoint.method.output, create(endpoint.method.output, output as never))
        } catch {
          // A handler's answer that does not encode is the unit's bug, answered as one (thrown
          // here it would be an unhandled rejection, which ends the process).
          return answer(stream, undefined, notEncodable("response"))
        }
        answer(stream, encoded, undefined)
      },
      (error: unknown) => {
        answered = true
        answer(stream, undefined, asConnectError(error))
      }
    )
  })
  return true
}

const ignoreStreamError = (): void => {}

/** HEADERS, the framed message, then the trailers when the stream asks for them; or trailers only for an error. */
function answer(stream: http2.ServerHttp2Stream, payload: Uint8Array | undefined, error: ConnectError | undefined): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return
  if (payload === undefined) {
    // Trailers-only response: status and error in the one HEADERS frame, which ends the stream.
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto", ...trailersOf(error) }, { endStream: true })
    return
  }
  stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true })
  stream.once("wantTrailers", () => stream.sendTrailers(OK_TRAILERS))
  stream.end(frame(payload))
}

/**
 * A failure below gRPC (refused, reset, GOAWAY, a stream closed without a status): the peer is
 * down or restarting, so the call is retryable.
 */
const transportFailure = (cause: unknown): ConnectError =>
  cause instanceof ConnectError ? cause : new ConnectError(cause instanceof Error ? cause.message : String(cause), Code.Unavailable)

/**
 * Times a refused call is sent again. A stream the server refused (RST_STREAM REFUSED_STREAM,
 * which is also what a stream above a GOAWAY's last stream id gets) was never processed: HTTP/2
 * guarantees it, so even a call that changes something may go again, on a new connection when
 * the old one is going away. A unit that shuts down (a rolling update) refuses the streams that
 * cross its GOAWAY; without this, each became the caller's UNAVAILABLE (a 503 at the gateway).
 */
const REFUSED_STREAM_RETRIES = 1

/** A direct call's end, once: answered through `done`, or cancelled (then never answered). */
const callEnd = (done: Parameters<DirectUnary>[3]) => {
  let ended = false
  return {
    get ended() {
      return ended
    },
    finish: (error: ConnectError | undefined, response?: unknown): void => {
      if (ended) return
      ended = true
      done(error, response)
    },
    /** True when the call was still open. */
    cancel: (): boolean => {
      if (ended) return false
      ended = true
      return true
    }
  }
}

const noCancel = (): void => {}

/** Unary gRPC calls over the session manager's one HTTP/2 connection (pings, GOAWAY, reconnects). */
export const grpcDirectUnary =
  (sessions: Http2SessionManager, maxMessageBytes: number): DirectUnary =>
  (method, request, headers, done) => {
    const call = callEnd(done)
    const finish = call.finish
    let open: http2.ClientHttp2Stream | undefined
    let body: Buffer
    try {
      body = frame(toBinary(method.input, create(method.input, request as never)))
    } catch {
      finish(notEncodable("request"))
      return noCancel
    }
    const send = (retriesLeft: number): void => {
      sessions
        .request("POST", methodPath(method), { ...headers, "content-type": "application/grpc+proto", te: "trailers" }, {})
        .then((stream) => {
          if (call.ended) return stream.close(http2.constants.NGHTTP2_CANCEL)
          open = stream
          const received = boundedBody(maxMessageBytes)
          let status: ConnectError | undefined | null = null
          let responded = false
          let failed: unknown
          stream.once("response", (responseHeaders) => {
            responded = true
            if (responseHeaders[":status"] !== 200) {
              status = new ConnectError(`HTTP ${String(responseHeaders[":status"])}`, responseHeaders[":status"] === 503 ? Code.Unavailable : Code.Unknown)
              return
            }
            // Trailers-only: the status is in the headers.
            if (responseHeaders["grpc-status"] !== undefined) status = statusOf(responseHeaders)
          })
          stream.on("data", (chunk: Buffer) => {
            if (call.ended) return
            sessions.notifyResponseByteRead(stream)
            if (received.add(chunk)) return
            finish(tooLarge("response", maxMessageBytes))
            stream.close(http2.constants.NGHTTP2_CANCEL)
          })
          stream.once("trailers", (trailers) => {
            if (status === null) status = statusOf(trailers)
          })
          stream.once("error", (error) => (failed = error))
          stream.once("close", () => {
            open = undefined
            if (call.ended) return
            if (!responded && stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM && retriesLeft > 0) return send(retriesLeft - 1)
            if (status instanceof ConnectError) return finish(status)
            if (status === null) return finish(transportFailure(failed ?? new ConnectError("the stream closed without a status", Code.Unavailable)))
            const message = received.message()
            if (message instanceof ConnectError) return finish(message)
            let response: unknown
            try {
              response = fromBinary(method.output, message)
            } catch {
              return finish(new ConnectError("protocol error: the response does not parse", Code.Internal))
            }
            finish(undefined, response)
          })
          stream.end(body)
        }, (error: unknown) => finish(transportFailure(error)))
    }
    send(REFUSED_STREAM_RETRIES)
    return () => {
      if (call.cancel()) open?.close(http2.constants.NGHTTP2_CANCEL)
    }
  }

/** The call's status from the headers or trailers that carry it: a plain OK without building a Headers. */
const statusOf = (headers: http2.IncomingHttpHeaders): ConnectError | undefined =>
  headers["grpc-status"] === "0" ? undefined : (findTrailerError(toHeaders(headers)) ?? undefined)

const toHeaders = (headers: http2.IncomingHttpHeaders): Headers => {
  const out = new Headers()
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(":") || value === undefined) continue
    out.set(name, Array.isArray(value) ? value.join(", ") : value)
  }
  return out
}

/**
 * Calls inside one process (the embedded mode): the handler runs as a function call. Messages
 * still cross as bytes, so neither side can see or change the other's objects, as on the wire.
 */
export const inProcessDirectUnary =
  (endpoints: UnaryEndpoints): DirectUnary =>
  (method, request, headers, done) => {
    const endpoint = endpoints.get(methodPath(method))
    if (endpoint === undefined) {
      done(new ConnectError(`${methodPath(method)} is not served here`, Code.Unimplemented))
      return noCancel
    }
    const abort = new AbortController()
    const call = callEnd(done)
    const finish = call.finish
    let input: MessageShape<DescMessage>
    try {
      input = fromBinary(method.input, toBinary(method.input, create(method.input, request as never)))
    } catch {
      finish(notEncodable("request"))
      return noCancel
    }
    endpoint.invoke(input, headers[PRINCIPAL_HEADER] ?? null, abort.signal, { requestId: headers[REQUEST_ID_HEADER] ?? null, traceparent: headers[TRACEPARENT_HEADER] ?? null }).then(
      (response) => {
        let copied: unknown
        try {
          copied = fromBinary(method.output, toBinary(method.output, create(method.output, response as never)))
        } catch {
          return finish(notEncodable("response"))
        }
        finish(undefined, copied)
      },
      (error: unknown) => finish(asConnectError(error))
    )
    return () => {
      if (call.cancel()) abort.abort(new ConnectError("the call was cancelled", Code.Canceled))
    }
  }
