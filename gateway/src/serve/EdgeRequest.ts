import { Context, Effect, FiberRef } from "effect"

/**
 * The HTTP request an API handler is serving, as much of it as handlers and the authentication
 * read: its method, path and query, headers (lower-case names) and the peer's address. The edge
 * server provides it for each request (`EdgeServer.ts`).
 */
export class EdgeRequest extends Context.Tag("@scion/gateway/EdgeRequest")<
  EdgeRequest,
  {
    readonly method: string
    /** The path and query as the client sent them. */
    readonly url: string
    readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
    /** The TCP peer; undefined once the socket is gone. */
    readonly remoteAddress: string | undefined
  }
>() {}

/** A header's value, the first when the client sent several. */
export const headerOf = (request: Context.Tag.Service<EdgeRequest>, name: string): string | undefined => {
  const value = request.headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/**
 * Headers a handler adds to its own response, written by the edge server beside the status and
 * body the endpoint's schema gives (`X-Idempotency-Replay` on a replayed branch create).
 */
export const ResponseHeaders: FiberRef.FiberRef<Readonly<Record<string, string>>> = FiberRef.unsafeMake<Readonly<Record<string, string>>>({})

/** Adds a header to the response of the request being served. */
export const addResponseHeader = (name: string, value: string): Effect.Effect<void> => FiberRef.update(ResponseHeaders, (headers) => ({ ...headers, [name]: value }))
