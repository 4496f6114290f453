import { Args, Command, Options } from "@effect/cli"
import { ScionApi } from "@scion/sdk"
import { Config, Console, Effect, HashMap, Option, Redacted } from "effect"
import { PreflightFailed, UsageError } from "../errors.js"
import { followOperation, waitOption } from "../operations.js"
import { printList, printMessage, printResource } from "../output.js"
import { CliSession, common, orgOf, orgOption, requireOrg, requireToken, withSession } from "../session.js"

const CONNECTOR_FIELDS = ["connector_id", "name", "service_name", "indexing_status", "branching_engine_status", "needs_reindex", "source_provider", "replication", "created_at"]

/** Connection details of a PostgreSQL source, as flags (the password also from SCION_SOURCE_PASSWORD). */
const source = {
  host: Options.text("host").pipe(Options.withDescription("The source's host name or address")),
  port: Options.integer("port").pipe(Options.withDefault(5432)),
  database: Options.text("database").pipe(Options.withDefault("postgres")),
  username: Options.text("username").pipe(Options.withDescription("The role Scion logs in as")),
  password: Options.redacted("password").pipe(Options.optional, Options.withDescription("Its password (default: SCION_SOURCE_PASSWORD)")),
  sslmode: Options.choice("sslmode", ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]).pipe(Options.withDefault("require" as const))
}

interface SourceInput {
  readonly host: string
  readonly port: number
  readonly database: string
  readonly username: string
  readonly password: Option.Option<Redacted.Redacted<string>>
  readonly sslmode: string
}

const connectionDetails = (input: SourceInput) =>
  Effect.gen(function* () {
    const fromEnv = yield* Config.option(Config.redacted("SCION_SOURCE_PASSWORD")).pipe(Effect.orDie)
    const password = Option.orElse(input.password, () => fromEnv)
    if (Option.isNone(password)) return yield* new UsageError({ message: "the source's password: pass --password or set SCION_SOURCE_PASSWORD" })
    return { host: input.host, port: input.port, database: input.database, username: input.username, password: Redacted.value(password.value), sslmode: input.sslmode }
  })

const printPreflight = (report: { readonly preflight_pass: boolean; readonly provider: string; readonly checks: ReadonlyArray<{ readonly id: string; readonly status: string; readonly message: string; readonly remedy: string | null }> }) =>
  Effect.gen(function* () {
    yield* printList(report, report.checks, [["check", (c) => c.id], ["status", (c) => c.status], ["message", (c) => c.message], ["remedy", (c) => c.remedy ?? ""]], "No checks ran")
    const session = yield* CliSession
    if (!session.json) yield* Console.log(report.preflight_pass ? `\nPreflight passed (provider: ${report.provider}).` : "\nPreflight did not pass: fix the failed checks (see remedy) and run it again.")
  })

const preflight = Command.make("preflight", { ...source, org: orgOption, ...common }, ({ host, port, database, username, password, sslmode, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const orgId = yield* orgOf(org)
    const report = yield* (yield* ScionApi).connectors.preflight({
      payload: { org_id: Option.getOrNull(orgId), service_name: "postgresql", connection_details: yield* connectionDetails({ host, port, database, username, password, sslmode }) }
    })
    yield* printPreflight(report)
    if (!report.preflight_pass) return yield* new PreflightFailed()
  }).pipe(withSession(input))
).pipe(Command.withDescription("Check a source before connecting it: every check with its remedy; exit 1 when one fails"))


const create = Command.make(
  "create",
  { ...source, name: Options.text("name").pipe(Options.optional), project: Options.text("project").pipe(Options.optional), org: orgOption, ...common },
  ({ host, port, database, username, password, sslmode, name, project, org, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const orgId = yield* orgOf(org)
      const connector = yield* (yield* ScionApi).connectors.create({
        payload: {
          org_id: Option.getOrNull(orgId),
          service_name: "postgresql",
          name: Option.getOrNull(name),
          project_id: Option.getOrNull(project),
          connection_details: yield* connectionDetails({ host, port, database, username, password, sslmode })
        }
      })
      yield* printResource(connector, CONNECTOR_FIELDS.filter((f) => f !== "replication"))
      const session = yield* CliSession
      if (!session.json) yield* Console.log(`\nNext: scion connectors discover ${connector.connector_id} --wait`)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Connect a PostgreSQL source (the preflight gate runs first; a failed check is 422 with the report)"))

const list = Command.make("list", { org: orgOption, ...common }, ({ org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).connectors.list({ urlParams: { org_id: yield* requireOrg(org) } })
    yield* printList(
      result,
      result.connectors,
      [["connector_id", (c) => c.connector_id], ["name", (c) => c.name], ["service", (c) => c.service_name], ["engine", (c) => c.branching_engine_status], ["replication", (c) => c.replication?.status ?? null]],
      "No connectors: scion connectors create --host … --username …"
    )
  }).pipe(withSession(input))
).pipe(Command.withDescription("The org's connectors"))

const connectorId = Args.text({ name: "connector_id" })

const get = Command.make("get", { connectorId, ...common }, ({ connectorId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* printResource(yield* (yield* ScionApi).connectors.get({ path: { connector_id: connectorId } }), CONNECTOR_FIELDS)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Show a connector"))

const discover = Command.make("discover", { connectorId, wait: waitOption, ...common }, ({ connectorId, wait, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* followOperation(yield* (yield* ScionApi).connectors.discover({ path: { connector_id: connectorId } }), wait)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Read the source's databases, schemas and tables"))

const select = Command.make(
  "select",
  { connectorId, paths: Args.text({ name: "path" }).pipe(Args.atLeast(1), Args.withDescription("* | database.* | database.schema.* | database.schema.table")), ...common },
  ({ connectorId, paths, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const connector = yield* (yield* ScionApi).connectors.selection({ path: { connector_id: connectorId }, payload: { selected_paths: paths } })
      const missing = (connector.replica_identity_preflight?.tables_without_replica_identity ?? []) as ReadonlyArray<string>
      const session = yield* CliSession
      if (session.json) return yield* Console.log(JSON.stringify(connector, null, 2))
      yield* Console.log(`Selected ${paths.join(", ")}.`)
      yield* Console.log(
        missing.length === 0
          ? `Next: scion connectors setup ${connectorId} --wait`
          : `These tables have no replica identity; decide for each (exclude, add_pk or replica_identity_full):\n  ${missing.join("\n  ")}\nthen: scion connectors decisions ${connectorId} --all replica_identity_full (or --decide table=choice …)`
      )
    }).pipe(withSession(input))
).pipe(Command.withDescription("Choose what the mirror holds"))

const decision = ["exclude", "add_pk", "replica_identity_full"] as const

const decisions = Command.make(
  "decisions",
  {
    connectorId,
    all: Options.choice("all", decision).pipe(Options.optional, Options.withDescription("One decision for every table without a replica identity")),
    decide: Options.keyValueMap("decide").pipe(Options.optional, Options.withDescription("database.schema.table=exclude|add_pk|replica_identity_full, repeatable")),
    ...common
  },
  ({ connectorId, all, decide, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const api = yield* ScionApi
      const chosen: Record<string, string> = {}
      if (Option.isSome(all)) {
        const connector = yield* api.connectors.get({ path: { connector_id: connectorId } })
        for (const table of (connector.replica_identity_preflight?.tables_without_replica_identity ?? []) as ReadonlyArray<string>) chosen[table] = all.value
      }
      if (Option.isSome(decide)) for (const [table, value] of HashMap.toEntries(decide.value)) chosen[table] = value
      if (Option.isNone(all) && Option.isNone(decide)) return yield* new UsageError({ message: "pass --all <decision> or --decide table=decision" })
      const connector = yield* api.connectors.replicaIdentityDecisions({ path: { connector_id: connectorId }, payload: { decisions: chosen } })
      yield* printMessage(`Recorded ${Object.keys(chosen).length} decision(s). Next: scion connectors setup ${connectorId} --wait`, connector)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Decide what to do with tables that have no replica identity"))

const grantScript = Command.make("grant-script", { connectorId, ...common }, ({ connectorId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const script = yield* (yield* ScionApi).connectors.grantScript({ path: { connector_id: connectorId } })
    const session = yield* CliSession
    yield* Console.log(session.json ? JSON.stringify(script, null, 2) : script.sql)
  }).pipe(withSession(input))
).pipe(Command.withDescription("The SQL an administrator of the source runs to grant what replication needs (psql -f)"))

const setup = Command.make("setup", { connectorId, wait: waitOption, ...common }, ({ connectorId, wait, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const answer = yield* (yield* ScionApi).connectors.engineSetup({ path: { connector_id: connectorId } })
    if ("operation_id" in answer) return yield* followOperation(answer, wait)
    yield* printMessage(answer.message, answer)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Set up the branching engine: the mirror, its initial copy and replication"))

const remove = Command.make(
  "delete",
  { connectorId, force: Options.boolean("force").pipe(Options.withDescription("Abandon a source that cannot be cleaned up")), wait: waitOption, ...common },
  ({ connectorId, force, wait, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      yield* followOperation(yield* (yield* ScionApi).connectors.delete({ path: { connector_id: connectorId }, urlParams: force ? { force: "true" } : {} }), wait)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Delete a connector, its branches, its engine and what it made on the source"))

const quarantine = Command.make("quarantine", { connectorId, ...common }, ({ connectorId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).connectors.quarantine({ path: { connector_id: connectorId } })
    yield* printList(result, result.entries, [["quarantine_id", (e) => e.quarantine_id], ["reason", (e) => e.reason], ["detail", (e) => e.detail], ["since", (e) => e.quarantined_at]], "Replication is not quarantined")
  }).pipe(withSession(input))
).pipe(Command.withDescription("Why replication is quarantined, if it is"))

const readiness = Command.make("readiness", { connectorId, onlyFailed: Options.boolean("only-failed"), ...common }, ({ connectorId, onlyFailed, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).connectors.readinessChecks({ path: { connector_id: connectorId }, urlParams: onlyFailed ? { only_failed: "true" } : {} })
    yield* printList(result, result.checks, [["check", (c) => c.check_name], ["status", (c) => c.status], ["table", (c) => c.table_path], ["message", (c) => c.message]], onlyFailed ? "No failed readiness checks" : "No readiness checks yet")
  }).pipe(withSession(input))
).pipe(Command.withDescription("The engine's readiness checks, newest attempt first"))

export const connectorsCommand = Command.make("connectors").pipe(
  Command.withDescription("Connectors: your sources and their branching engines"),
  Command.withSubcommands([preflight, create, list, get, discover, select, decisions, grantScript, setup, remove, quarantine, readiness])
)

