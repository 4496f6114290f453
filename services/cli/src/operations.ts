import { Args, Command, Options } from "@effect/cli"
import { type Operation, ScionApi, waitForOperation } from "@scion/sdk"
import { Console, Duration, Effect } from "effect"
import { printResource, progressReporter } from "./output.js"
import { CliSession, common, requireToken, withSession } from "./session.js"

/** --wait on every command that starts an operation. */
export const waitOption = Options.boolean("wait").pipe(Options.withDescription("Wait for the operation to end, showing its progress; exit 1 if it fails"))

const OPERATION_FIELDS = ["id", "type", "status", "stage_label", "progress", "resource_id", "error", "created_at", "completed_at"]

/** Waits for an operation with a progress display; the bar is closed before any error prints. */
export const waitWithProgress = (operationId: string, timeout?: Duration.DurationInput) =>
  Effect.gen(function* () {
    const progress = progressReporter()
    return yield* waitForOperation(operationId, { onProgress: progress.report, ...(timeout === undefined ? {} : { timeout }) }).pipe(Effect.onExit(() => progress.finish))
  })

/**
 * What a command that started an operation prints: the handle, or with --wait the ended
 * operation (its result for people, the whole operation with --json).
 */
export const followOperation = (handle: { readonly operation_id: string }, wait: boolean) =>
  Effect.gen(function* () {
    if (!wait) {
      const session = yield* CliSession
      if (session.json) return yield* Console.log(JSON.stringify(handle, null, 2))
      return yield* Console.log(`operation ${handle.operation_id} started; follow it with: scion ops wait ${handle.operation_id}`)
    }
    const operation = yield* waitWithProgress(handle.operation_id)
    yield* printOperation(operation)
  })

export const printOperation = (operation: Operation) =>
  Effect.gen(function* () {
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify(operation, null, 2))
    yield* printResource(operation, OPERATION_FIELDS)
    if (operation.result !== null) yield* Console.log(`result\n${JSON.stringify(operation.result, null, 2)}`)
  })

const operationId = Args.text({ name: "operation_id" })

const get = Command.make("get", { operationId, ...common }, ({ operationId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const api = yield* ScionApi
    yield* printOperation(yield* api.operations.get({ path: { operation_id: operationId }, urlParams: {} }))
  }).pipe(withSession(input))
).pipe(Command.withDescription("Show an operation"))

const wait = Command.make(
  "wait",
  { operationId, timeout: Options.integer("timeout").pipe(Options.withDefault(3600), Options.withDescription("Seconds to wait in all")), ...common },
  ({ operationId, timeout, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      yield* printOperation(yield* waitWithProgress(operationId, Duration.seconds(timeout)))
    }).pipe(withSession(input))
).pipe(Command.withDescription("Wait for an operation to end, showing its progress; exit 1 if it failed"))

export const opsCommand = Command.make("ops").pipe(Command.withDescription("Long-running operations"), Command.withSubcommands([get, wait]))
