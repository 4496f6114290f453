import { Clock, Duration, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Operation as OperationSchema } from "@scion/gateway/schemas"
import type { ApiClient } from "./client.js"
import { ScionApi } from "./client.js"

/** An operation as GET /v1/operations/{id} answers it. */
export type Operation = typeof OperationSchema.Type
/** The body of POST /v1/branch/create. */
export type CreateBranchRequest = Parameters<ApiClient["branches"]["create"]>[0]["payload"]

/** The operation ended failed: its message is the API's. */
export class OperationFailed extends Schema.TaggedError<OperationFailed>()("OperationFailed", {
  operationId: Schema.String,
  type: Schema.String,
  message: Schema.String
}) {}

/** The operation had not ended when the caller's time was up (it goes on server-side). */
export class OperationTimedOut extends Schema.TaggedError<OperationTimedOut>()("OperationTimedOut", {
  operationId: Schema.String,
  status: Schema.String,
  waitedMillis: Schema.Number
}) {
  override get message() {
    return `operation ${this.operationId} is still ${this.status} after ${Math.round(this.waitedMillis / 1000)} s`
  }
}

/**
 * A branch_create completed without a usable branch_url. The interface tells clients to fail
 * closed here rather than hand on an empty URL.
 */
export class BranchUrlMissing extends Schema.TaggedError<BranchUrlMissing>()("BranchUrlMissing", {
  operationId: Schema.String,
  branchId: Schema.String
}) {
  override get message() {
    return `branch ${this.branchId} completed without a branch_url (operation ${this.operationId}); refusing to use it`
  }
}

export interface WaitOptions {
  /** Called whenever status, stage_label or progress changes (and once at the start). */
  readonly onProgress?: (operation: Operation) => void
  /** How long to wait in all (default 1 hour). */
  readonly timeout?: Duration.DurationInput
}

const TERMINAL = new Set(["completed", "failed"])

/**
 * Waits for an operation to end with the API's long poll (?wait=: the server answers the moment
 * it ends), reporting progress on the way. Completed: the operation; failed: OperationFailed.
 */
export const waitForOperation = Effect.fn("Scion.waitForOperation")(function* (operationId: string, options: WaitOptions = {}) {
  const api = yield* ScionApi
  const started = yield* Clock.currentTimeMillis
  const deadline = started + Duration.toMillis(options.timeout ?? Duration.hours(1))
  let seen = ""
  for (;;) {
    const now = yield* Clock.currentTimeMillis
    // The long poll answers when the operation ends, not when it moves: a progress display
    // asks every second, a plain wait holds each request up to 10 s.
    const hold = options.onProgress === undefined ? 10 : 1
    const remaining = Math.max(0, Math.min(hold, Math.floor((deadline - now) / 1000)))
    const operation = yield* api.operations.get({ path: { operation_id: operationId }, urlParams: { wait: remaining } })
    const fingerprint = `${operation.status}|${operation.stage_label ?? ""}|${operation.progress ?? ""}`
    if (fingerprint !== seen) {
      seen = fingerprint
      options.onProgress?.(operation)
    }
    if (operation.status === "completed") return operation
    if (operation.status === "failed") {
      return yield* new OperationFailed({ operationId, type: operation.type, message: operation.error ?? "the operation failed" })
    }
    if (TERMINAL.has(operation.status)) return operation
    const after = yield* Clock.currentTimeMillis
    if (after >= deadline) return yield* new OperationTimedOut({ operationId, status: operation.status, waitedMillis: after - started })
  }
})

export interface CreateBranchOptions extends WaitOptions {
  /** Wait for the branch (default true): the result is the branch with its URL. */
  readonly wait?: boolean
  /** Sent as X-Idempotency-Key; a new one is made when absent, so a retried create never doubles. */
  readonly idempotencyKey?: string
}

/** The branch a completed branch_create carries, with a branch_url checked to be present. */
export interface CreatedBranch {
  readonly operationId: string
  readonly branchId: string
  readonly branchUrl: string
  readonly pooledBranchUrl: string | null
  readonly branch: Readonly<Record<string, unknown>>
}

const nonEmptyString = (value: unknown): Option.Option<string> => (typeof value === "string" && value.length > 0 ? Option.some(value) : Option.none())

/** The branch in a completed branch_create's result, or BranchUrlMissing. */
export const branchOf = (operation: Operation) =>
  Option.match(nonEmptyString(operation.result?.branch_url), {
    onNone: () => Effect.fail(new BranchUrlMissing({ operationId: operation.id, branchId: operation.resource_id })),
    onSome: (branchUrl) =>
      Effect.succeed<CreatedBranch>({
        operationId: operation.id,
        branchId: operation.resource_id,
        branchUrl,
        pooledBranchUrl: Option.getOrNull(nonEmptyString(operation.result?.pooled_branch_url)),
        branch: operation.result ?? {}
      })
  })

/**
 * Creates a branch with an idempotency key. With wait (the default) it answers once the branch
 * works, failing closed when the completed operation lacks a branch_url.
 */
export const createBranch = Effect.fn("Scion.createBranch")(function* (request: CreateBranchRequest, options: CreateBranchOptions = {}) {
  const api = yield* ScionApi
  const handle = yield* api.branches.create({ payload: request, headers: { "x-idempotency-key": options.idempotencyKey ?? randomUUID() } })
  if (options.wait === false) return { handle, branch: Option.none<CreatedBranch>() }
  const operation = yield* waitForOperation(handle.operation_id, options)
  return { handle, branch: Option.some(yield* branchOf(operation)) }
})
