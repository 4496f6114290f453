import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Deferred, Effect, Exit, FiberId } from "effect"
import { Api } from "../Api.js"
import { asCaller, Authenticated } from "../Authentication.js"
import type { HttpError } from "../httpErrors.js"
import * as present from "./present.js"

type OperationJson = ReturnType<typeof present.operation>

export const OperationsLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.sync(() => {
    /**
     * Long polls of one caller on one operation with one wait share a single upstream wait: the
     * clients of a pull request check or a CLI and its dashboard watching the same operation cost
     * one GetOperation at the operation unit and one decoding here, and all wake with the same
     * change. Keyed by the caller's signed principal, so nobody reads through another's
     * credentials. The shared call runs detached from the request that started it (bounded by the
     * wait), so a client that disconnects does not end it for the others.
     */
    const waits = new Map<string, Deferred.Deferred<OperationJson, HttpError>>()
    const shared = <R>(key: string, call: Effect.Effect<OperationJson, HttpError, R>): Effect.Effect<OperationJson, HttpError, R> =>
      Effect.suspend(() => {
        const joined = waits.get(key)
        if (joined !== undefined) return Deferred.await(joined)
        // Registered synchronously, before the call can finish: no second caller misses it, and
        // the entry never outlives the call.
        const done = Deferred.unsafeMake<OperationJson, HttpError>(FiberId.none)
        waits.set(key, done)
        const settle = (exit: Exit.Exit<OperationJson, HttpError>) =>
          Effect.sync(() => {
            waits.delete(key)
            Deferred.unsafeDone(done, exit)
          })
        return Effect.zipRight(Effect.forkDaemon(Effect.flatMap(Effect.exit(call), settle)), Deferred.await(done))
      })

    return handlers.handle("get", ({ path, urlParams }) =>
      Effect.gen(function* () {
        const waitSeconds = urlParams.wait ?? 0
        const get = asCaller((u) => u.operation.getOperation({ id: path.operation_id, waitSeconds })).pipe(Effect.map((r) => present.operation(r.operation)))
        if (waitSeconds === 0) return yield* get
        const { principalToken } = yield* Authenticated
        return yield* shared(`${principalToken}\n${path.operation_id}\n${waitSeconds}`, get)
      })
    )
  })
)
