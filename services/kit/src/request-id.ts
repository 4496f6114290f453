import { Effect, FiberRef, Option } from "effect"

/**
 * The request id: made (or taken from the client) at the gateway, answered in `x-request-id`,
 * carried on every call between units and in the jobs a request starts, and written on every log
 * line of the request's path, so one id finds everything a request did.
 */
export const REQUEST_ID_HEADER = "x-request-id"

/** What a client may send as its own id: short, and nothing that could forge a log line. */
const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/

export const isAcceptableRequestId = (value: string | undefined | null): value is string => typeof value === "string" && ACCEPTABLE.test(value)

/** The id of the request being served, sent on outgoing calls (set by the server bridge and the gateway). */
export const CurrentRequestId: FiberRef.FiberRef<Option.Option<string>> = FiberRef.unsafeMake(Option.none<string>())

/**
 * Runs `self` as part of request `id`: its calls send the header, and its log lines carry
 * `request_id` (the kit's logger reads it from CurrentRequestId as it writes a line).
 */
export const withRequestId =
  (id: string | null | undefined) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    isAcceptableRequestId(id) ? Effect.locally(self, CurrentRequestId, Option.some(id)) : self
