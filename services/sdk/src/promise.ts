import { FetchHttpClient, type HttpClientResponse, HttpApiSchema } from "@effect/platform"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { type ApiClient, makeApiClient, ScionApi, type ScionOptions } from "./client.js"
import { type CreateBranchOptions, type CreateBranchRequest, type CreatedBranch, createBranch, type Operation, waitForOperation, type WaitOptions } from "./operations.js"

/**
 * What a Promise of the SDK rejects with: the API's status and detail where the API answered
 * (detail is a string, or the 422 list of {loc, msg, type}), else the client-side failure's tag.
 */
export class ScionError extends Error {
  override readonly name = "ScionError"
  constructor(
    message: string,
    /** The failure's kind: the API error class (Unauthorized, NotFound, …), OperationFailed, BranchUrlMissing, RequestError, … */
    readonly kind: string,
    readonly status: number | null,
    readonly detail: unknown,
    override readonly cause?: unknown
  ) {
    super(message)
  }
}

const kindOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { _tag?: unknown })._tag
    if (typeof tag === "string") return tag
    return error.constructor?.name ?? "Error"
  }
  return "Error"
}

const toScionError = (error: unknown): ScionError => {
  const kind = kindOf(error)
  const detail = typeof error === "object" && error !== null && "detail" in error ? (error as { detail: unknown }).detail : undefined
  const response = typeof error === "object" && error !== null && "response" in error ? (error as { response?: { status?: unknown } }).response : undefined
  // The API's error classes carry their status as HttpApi annotates them: one source with the gateway.
  const ctor = typeof error === "object" && error !== null ? (error as { constructor?: unknown }).constructor : undefined
  const annotated = Schema.isSchema(ctor) ? HttpApiSchema.getStatus(ctor.ast, 0) : 0
  const status = annotated > 0 ? annotated : typeof response?.status === "number" ? response.status : null
  const message =
    typeof detail === "string"
      ? detail
      : Array.isArray(detail)
        ? detail.map((issue: { loc?: ReadonlyArray<string>; msg?: string }) => `${(issue.loc ?? []).join(".")}: ${issue.msg ?? ""}`).join("; ")
        : error instanceof Error
          ? error.message
          : String(error)
  return new ScionError(message, kind, status, detail, error)
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    const failure = Cause.failureOption(exit.cause)
    throw Option.isSome(failure) ? toScionError(failure.value) : new ScionError(Cause.pretty(exit.cause), "Defect", null, undefined, Cause.squash(exit.cause))
  })

/**
 * Every endpoint of the API, answering Promises of the decoded body (the Effect face's
 * `withResponse: true` variant, a [body, response] pair, is left to the Effect face).
 */
export type PromiseClient<C> = {
  readonly [G in keyof C]: {
    readonly [E in keyof C[G]]: C[G][E] extends (...args: infer A) => Effect.Effect<infer R, infer _E, infer _R>
      ? (...args: A) => Promise<Exclude<R, readonly [unknown, HttpClientResponse.HttpClientResponse]>>
      : never
  }
}

export interface Scion {
  /** Every endpoint: `await scion.api.orgs.list()`, `await scion.api.branches.get({ path: { branch_id } })`. */
  readonly api: PromiseClient<ApiClient>
  /** Waits for an operation with the API's long poll; rejects with kind OperationFailed when it failed. */
  readonly waitForOperation: (operationId: string, options?: WaitOptions) => Promise<Operation>
  /** Creates a branch (idempotency key made for you) and waits for a working, present branch_url. */
  readonly createBranch: (request: CreateBranchRequest, options?: Omit<CreateBranchOptions, "wait">) => Promise<CreatedBranch>
}

/** The SDK for code that does not use Effect. */
export const createScion = (options: ScionOptions = {}): Scion => {
  const client = Effect.runSync(makeApiClient(options).pipe(Effect.provide(FetchHttpClient.layer)))
  const api = Object.fromEntries(
    Object.entries(client).map(([group, endpoints]) => [
      group,
      Object.fromEntries(
        Object.entries(endpoints as Record<string, (...args: Array<unknown>) => Effect.Effect<unknown, unknown>>).map(([name, call]) => [name, (...args: Array<unknown>) => run(call(...args))])
      )
    ])
  ) as unknown as PromiseClient<ApiClient>
  const provide = <A, E>(effect: Effect.Effect<A, E, ScionApi>) => run(Effect.provideService(effect, ScionApi, client))
  return {
    api,
    waitForOperation: (operationId, waitOptions) => provide(waitForOperation(operationId, waitOptions)),
    createBranch: (request, createOptions) =>
      provide(
        createBranch(request, { ...createOptions, wait: true }).pipe(
          Effect.flatMap(({ branch }) => (Option.isSome(branch) ? Effect.succeed(branch.value) : Effect.dieMessage("a waited create always carries its branch")))
        )
      )
  }
}
