/**
 * `scion`: the command tree, and how a failure becomes a message and an exit code
 * (0 success, 1 the operation or request failed, 2 usage, 3 authentication, 4 not found).
 */
import { Command, ValidationError as CliValidationError } from "@effect/cli"
import { NotFound, Unauthorized, ValidationError } from "@scion/gateway/httpErrors"
import { Console, Effect } from "effect"
import { authCommands } from "./commands/auth.js"
import { branchesCommand, snapshotsCommand } from "./commands/branches.js"
import { connectCommand } from "./commands/connect.js"
import { connectorsCommand } from "./commands/connectors.js"
import { invitesCommand, keysCommand, membersCommand, orgsCommand, projectsCommand } from "./commands/orgs.js"
import { opsCommand } from "./operations.js"

export const VERSION = "0.1.0"

const root = Command.make("scion").pipe(
  Command.withDescription("Scion from a terminal and from CI. Start with: scion signup (or scion login), scion orgs create <name>, scion connectors create …"),
  Command.withSubcommands([...authCommands, connectCommand, orgsCommand, membersCommand, invitesCommand, keysCommand, projectsCommand, connectorsCommand, branchesCommand, snapshotsCommand, opsCommand])
)

/** Runs the CLI on process.argv. */
export const cli = Command.run(root, { name: "scion", version: VERSION })

export const ExitCode = { ok: 0, failed: 1, usage: 2, authentication: 3, notFound: 4 } as const

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string" ? (error as { _tag: string })._tag : undefined

export const exitCodeOf = (error: unknown): number => {
  if (CliValidationError.isValidationError(error)) return ExitCode.usage
  if (error instanceof Unauthorized) return ExitCode.authentication
  if (error instanceof NotFound) return ExitCode.notFound
  switch (tagOf(error)) {
    case "UsageError":
      return ExitCode.usage
    case "NotLoggedIn":
      return ExitCode.authentication
    case "BranchNotFound":
      return ExitCode.notFound
    default:
      return ExitCode.failed
  }
}

const describe = (error: unknown): string => {
  const detail = typeof error === "object" && error !== null && "detail" in error ? (error as { detail: unknown }).detail : undefined
  if (typeof detail === "string") return detail
  if (error instanceof ValidationError) return error.detail.map((issue) => `${issue.loc.join(".")}: ${issue.msg}`).join("\n")
  switch (tagOf(error)) {
    case "RequestError":
      return `could not reach the API (${(error as { description?: string; cause?: unknown }).description ?? String((error as { cause?: unknown }).cause)}); is SCION_API_URL right?`
    case "ResponseError":
      return `the API answered ${(error as { response: { status: number } }).response.status} unexpectedly`
    case "ParseError":
      return `unexpected answer from the API: ${(error as Error).message}`
  }
  return error instanceof Error || (typeof error === "object" && error !== null && "message" in error) ? String((error as { message: unknown }).message) : String(error)
}

/** Prints a failure once; @effect/cli has already printed its own usage errors with the help. */
export const reportError = (error: unknown) => (CliValidationError.isValidationError(error) ? Effect.void : Console.error(`error: ${describe(error)}`))
