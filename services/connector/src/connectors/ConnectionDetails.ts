import { Effect, ParseResult, Schema } from "effect"
import { InvalidConnectionDetails, UnsupportedService } from "../domain/errors.js"

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
const text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max), Schema.filter((s) => !CONTROL.test(s)))
/** Postgres identifiers are at most 63 bytes. */
const pgName = text(63)

export const SslMode = Schema.Literal("disable", "prefer", "require", "verify-ca", "verify-full")
export type SslMode = typeof SslMode.Type

/** ARCHITECTURE.md's postgresql details; defaults filled in, so what is stored is complete. */
export const PostgresDetails = Schema.Struct({
  host: text(255).pipe(Schema.filter((s) => !/\s/.test(s))),
  port: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 65535)), { default: () => 5432 }),
  database: pgName,
  username: pgName,
  // May be empty for trust or certificate authentication.
  password: Schema.String.pipe(Schema.maxLength(1024)),
  sslmode: Schema.optionalWith(SslMode, { default: () => "prefer" as const }),
  databases: Schema.optional(Schema.Array(pgName).pipe(Schema.minItems(1), Schema.maxItems(50)))
})
export type PostgresDetails = typeof PostgresDetails.Type

/**
 * A code host (GitHub). Validated by shape only: no call goes out at create time (the
 * validate-code-host-* helpers of issue 5 are where the code host is asked).
 */
export const GithubDetails = Schema.Struct({
  organization: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/)),
  access_token: text(4096)
})
export type GithubDetails = typeof GithubDetails.Type

/** What each field must be, for messages that never repeat the (possibly secret) value sent. */
const expectations: Record<string, string> = {
  host: "a host name or IP address (1..255 characters, no spaces)",
  port: "an integer 1..65535",
  database: "a database name (1..63 characters)",
  username: "a role name (1..63 characters)",
  password: "a string (at most 1024 characters)",
  sslmode: "one of disable, prefer, require, verify-ca, verify-full",
  databases: "a non-empty array (at most 50) of database names",
  organization: "a GitHub organization login (1..39 letters, digits or hyphens)",
  access_token: "a token string (1..4096 characters)"
}

export type ServiceName = "postgresql" | "github"
export type ConnectorCategory = "database" | "code_host"

export type ValidDetails =
  | { readonly serviceName: "postgresql"; readonly category: "database"; readonly details: PostgresDetails }
  | { readonly serviceName: "github"; readonly category: "code_host"; readonly details: GithubDetails }

export const categoryOf: Record<ServiceName, ConnectorCategory> = { postgresql: "database", github: "code_host" }

const describe = (serviceName: string, error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const problems = issues.map((issue) => {
    const field = issue.path.map(String).join(".")
    const top = String(issue.path[0] ?? "")
    if (issue._tag === "Missing") return `${field} is required`
    if (issue._tag === "Unexpected") return `${field} is not a field of ${serviceName} connection_details`
    return `${field || "connection_details"} must be ${expectations[top] ?? "an object"}`
  })
  return [...new Set(problems)].join("; ")
}

const decode = <A, I>(serviceName: string, schema: Schema.Schema<A, I>, input: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error", errors: "all" })(input).pipe(
    Effect.mapError((error) => new InvalidConnectionDetails({ serviceName, problem: describe(serviceName, error) }))
  )

/** Checks the details against the service's shape (unknown keys are 400) and fills defaults. */
export const validateDetails = (serviceName: string, input: unknown): Effect.Effect<ValidDetails, UnsupportedService | InvalidConnectionDetails> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Effect.fail(new InvalidConnectionDetails({ serviceName, problem: "connection_details must be an object" }))
  }
  switch (serviceName) {
    case "postgresql":
      return Effect.map(decode(serviceName, PostgresDetails, input), (details) => ({
        serviceName,
        category: "database" as const,
        details: { ...details, databases: details.databases ?? [details.database] }
      }))
    case "github":
      return Effect.map(decode(serviceName, GithubDetails, input), (details) => ({ serviceName, category: "code_host" as const, details }))
    default:
      return Effect.fail(new UnsupportedService({ serviceName }))
  }
}

/** The service name if supported (the list filter and the preflight's first check). */
export const isSupportedService = (serviceName: string): serviceName is ServiceName => serviceName === "postgresql" || serviceName === "github"
