import { Context, Effect, FiberRef } from "effect"

/**
 * Values for the rest of a fiber that serves one request and ends with it: an RPC's fiber in the
 * server bridge, an HTTP request's fiber at the gateway.
 *
 * `Effect.locally` and `Effect.provideService` put the previous value back when their effect
 * ends: each is an acquire/use/release (about ten runtime steps) and two copies of the fiber's
 * locals. A request's own fiber never reads the previous value again, so one plain set does the
 * same work. Only for effects that are the whole rest of their fiber; anywhere else (a job step,
 * a part of a request) keep `Effect.locally` / `Effect.provideService`. (A fiber that joins the
 * request's fiber takes on its values, as it would any joined fiber's.)
 */
export const setForRequestFiber =
  <V>(ref: FiberRef.FiberRef<V>, value: V) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.zipRight(FiberRef.set(ref, value), self)

/** `Effect.provideService` for the rest of a request's own fiber (see `setForRequestFiber`). */
export const provideForRequestFiber =
  <I, S>(tag: Context.Tag<I, S>, service: S) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, I>> =>
    Effect.zipRight(FiberRef.update(FiberRef.currentContext, Context.add(tag, service)), self) as Effect.Effect<A, E, Exclude<R, I>>
