import { group } from "../serve/handlers.js"
import { CurrentRequestId } from "@scion/kit"
import { Deferred, Effect, Exit, FiberId, FiberRef, Option } from "effect"
import { Api } from "../Api.js"
import { asCaller, Authenticated } from "../Authentication.js"
import { type HttpError, NotFound } from "../httpErrors.js"
import * as present from "./present.js"

type OperationJson = ReturnType<typeof present.operation>

/** Operation types whose result is a Branch. */
const BRANCH_RESULTS = new Set<string>(["branch_create", "branch_reset"])

/**
 * A completed branch operation's result carries the branch's connection URLs, which hold its
 * role's password. The operation unit stores the result without them (every role may read
 * operations, and results are kept and announced as they are); they are added here from the
 * branch unit, asked as the caller, so they appear exactly where GET /v1/branches/{id} would show
 * them: to callers who may connect (branches.create), never to a viewer. A branch deleted since
 * leaves them null, which the interface allows (clients fail closed); the branch unit unavailable
 * is the request's 503, so a client retries rather than reads no URL.
 */
const withBranchUrls = (operation: OperationJson) => {
  const branchId = operation.result?.branch_id
  if (operation.status !== "completed" || !BRANCH_RESULTS.has(operation.type) || typeof branchId !== "string") return Effect.succeed(operation)
  return asCaller((u) => u.branches.getBranch({ branchId })).pipe(
    Effect.map(({ branch }) => branch),
    Effect.catchIf((error): error is NotFound => error instanceof NotFound, () => Effect.succeed(undefined)),
    Effect.map((branch) => ({
      ...operation,
      result: { ...operation.result, branch_url: branch?.branchUrl ?? null, pooled_branch_url: branch?.pooledBranchUrl ?? null, pooled_branch_prisma_url: branch?.pooledBranchPrismaUrl ?? null }
    }))
  )
}

export const OperationsLive = group(Api, "operations", (handlers) =>
  Effect.sync(() => {
    /**
     * Long polls of one caller on one operation with one wait share a single upstream wait: the
     * clients of a pull request check or a CLI and its dashboard watching the same operation cost
     * one GetOperation at the operation unit and one decoding here, and all wake with the same
     * change. Keyed by the caller's signed principal, so nobody reads through another's
     * credentials. The shared call runs detached from the request that started it (bounded by the
     * wait), so a client that disconnects does not end it for the others. The upstream call
     * carries the request id of the request that started it; a request that joins logs that id,
     * so its own id still leads to everything done for it.
     */
    interface SharedWait {
      readonly done: Deferred.Deferred<OperationJson, HttpError>
      readonly requestId: Option.Option<string>
    }
    const waits = new Map<string, SharedWait>()
    const shared = <R>(key: string, operationId: string, call: Effect.Effect<OperationJson, HttpError, R>): Effect.Effect<OperationJson, HttpError, R> =>
      Effect.flatMap(FiberRef.get(CurrentRequestId), (requestId) => {
        const joined = waits.get(key)
        if (joined !== undefined) {
          return Effect.logInfo("long poll joined a wait already upstream").pipe(
            Effect.annotateLogs({ operation_id: operationId, upstream_request_id: Option.getOrElse(joined.requestId, () => "none") }),
            Effect.zipRight(Deferred.await(joined.done))
          )
        }
        // Registered synchronously, before the call can finish: no second caller misses it, and
        // the entry never outlives the call.
        const done = Deferred.unsafeMake<OperationJson, HttpError>(FiberId.none)
        waits.set(key, { done, requestId })
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
        const get = asCaller((u) => u.operation.getOperation({ id: path.operation_id, waitSeconds })).pipe(
          Effect.map((r) => present.operation(r.operation)),
          Effect.flatMap(withBranchUrls)
        )
        if (waitSeconds === 0) return yield* get
        const { principalToken } = yield* Authenticated
        return yield* shared(`${principalToken}\n${path.operation_id}\n${waitSeconds}`, path.operation_id, get)
      })
    )
  })
)
