import { Command, Options, Prompt } from "@effect/cli"
import { ScionApi } from "@scion/sdk"
import { Config, Console, Effect, Option, Redacted } from "effect"
import { PreflightFailed } from "../errors.js"
import { waitWithProgress } from "../operations.js"
import { renderTable } from "../output.js"
import { common, orgOf, orgOption, requireToken, withSession } from "../session.js"

/** A table of the discovered tree, as the structure stores it (services/connector SchemaIntrospection). */
interface DiscoveredTable {
  readonly path: string
  readonly has_replica_identity: boolean
  readonly estimated_rows: number | null
}

const tablesOf = (structure: Readonly<Record<string, unknown>> | null): ReadonlyArray<DiscoveredTable> => {
  const databases = (structure?.databases ?? []) as ReadonlyArray<{ readonly schemas: ReadonlyArray<{ readonly tables: ReadonlyArray<DiscoveredTable> }> }>
  return databases.flatMap((d) => d.schemas.flatMap((s) => s.tables))
}

const asked = <A>(value: Option.Option<A>, prompt: Prompt.Prompt<A>) => Option.match(value, { onSome: Effect.succeed, onNone: () => prompt })

const decisionChoices = [
  { title: "replica_identity_full", value: "replica_identity_full", description: "Replicate it; updates and deletes send the whole old row" },
  { title: "add_pk", value: "add_pk", description: "The grant script adds a primary key column" },
  { title: "exclude", value: "exclude", description: "Leave the table out of the mirror" }
] as const

/**
 * `scion connect`: from connection details to a ready engine, asking for what was not given —
 * the details, the tables to mirror, a decision for each table without a replica identity —
 * and showing the preflight checks with their remedies, the grant script when a check asks for
 * grants, and the setup's progress.
 */
export const connectCommand = Command.make(
  "connect",
  {
    host: Options.text("host").pipe(Options.optional),
    port: Options.integer("port").pipe(Options.optional),
    database: Options.text("database").pipe(Options.optional),
    username: Options.text("username").pipe(Options.optional),
    password: Options.redacted("password").pipe(Options.optional, Options.withDescription("Default: SCION_SOURCE_PASSWORD, else asked (hidden)")),
    sslmode: Options.choice("sslmode", ["disable", "prefer", "require", "verify-ca", "verify-full"]).pipe(Options.optional),
    name: Options.text("name").pipe(Options.optional),
    org: orgOption,
    ...common
  },
  ({ host, port, database, username, password, sslmode, name, org, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const api = yield* ScionApi
      const orgId = Option.getOrNull(yield* orgOf(org))
      const envPassword = yield* Config.option(Config.redacted("SCION_SOURCE_PASSWORD")).pipe(Effect.orDie)
      const details = {
        host: yield* asked(host, Prompt.text({ message: "Source host" })),
        port: yield* asked(port, Prompt.integer({ message: "Port", min: 1, max: 65535 })),
        database: yield* asked(database, Prompt.text({ message: "Database", default: "postgres" })),
        username: yield* asked(username, Prompt.text({ message: "Role Scion logs in as" })),
        password: Redacted.value(yield* asked(Option.orElse(password, () => envPassword), Prompt.password({ message: "Its password" }))),
        sslmode: yield* asked(
          sslmode,
          Prompt.select({ message: "TLS", choices: ["require", "verify-full", "verify-ca", "prefer", "disable"].map((v) => ({ title: v, value: v })) })
        )
      }

      yield* Console.log("\nChecking the source…")
      const report = yield* api.connectors.preflight({ payload: { org_id: orgId, service_name: "postgresql", connection_details: details } })
      yield* Console.log(renderTable(report.checks, [["check", (c) => c.id], ["status", (c) => c.status], ["message", (c) => c.message], ["remedy", (c) => c.remedy ?? ""]]))
      if (!report.preflight_pass) {
        yield* Console.log("\nPreflight did not pass: apply the remedies above and run scion connect again.")
        return yield* new PreflightFailed()
      }
      const needsGrants = report.checks.some((c) => c.status !== "pass" && c.remedy !== null && /grant/i.test(c.remedy))

      const connector = yield* api.connectors.create({
        payload: { org_id: orgId, service_name: "postgresql", name: Option.getOrNull(name), connection_details: details }
      })
      const connectorId = connector.connector_id
      yield* Console.log(`\nConnector ${connectorId} created. Reading the source's tables…`)
      yield* waitWithProgress((yield* api.connectors.discover({ path: { connector_id: connectorId } })).operation_id)
      const tables = tablesOf((yield* api.connectors.get({ path: { connector_id: connectorId } })).schema_structure)
      if (tables.length === 0) yield* Console.log("The source has no tables yet: selecting everything, so new tables join as they appear.")

      const chosen =
        tables.length === 0
          ? ["*"]
          : yield* Prompt.multiSelect({
              message: "Tables to mirror (space toggles, enter confirms)",
              choices: tables.map((t) => ({ title: t.path, value: t.path, description: t.estimated_rows === null ? "" : `~${t.estimated_rows} rows` })),
              maxPerPage: 15
            })
      if (chosen.length === 0) return yield* Console.log("Nothing selected: the connector stays as it is (scion connectors select to choose later).")
      const selected = yield* api.connectors.selection({
        path: { connector_id: connectorId },
        payload: { selected_paths: chosen.length === tables.length ? ["*"] : chosen }
      })

      const missing = (selected.replica_identity_preflight?.tables_without_replica_identity ?? []) as ReadonlyArray<string>
      if (missing.length > 0) {
        const decisions: Record<string, string> = {}
        for (const table of missing) {
          decisions[table] = yield* Prompt.select({ message: `${table} has no primary key or replica identity`, choices: decisionChoices })
        }
        yield* api.connectors.replicaIdentityDecisions({ path: { connector_id: connectorId }, payload: { decisions } })
      }

      if (needsGrants) {
        const script = yield* api.connectors.grantScript({ path: { connector_id: connectorId } })
        yield* Console.log(`\nThe role needs grants. Have an administrator of the source run (psql -f):\n\n${script.sql}\n`)
        const ran = yield* Prompt.confirm({ message: "Has the script been run?", initial: true })
        if (!ran) return yield* Console.log(`Run it, then: scion connectors setup ${connectorId} --wait`)
      }

      yield* Console.log("\nSetting up the branching engine…")
      const answer = yield* api.connectors.engineSetup({ path: { connector_id: connectorId } })
      if ("operation_id" in answer) yield* waitWithProgress(answer.operation_id)
      yield* Console.log(`\nReady. Your first branch:\n  scion branches create ${connectorId} dev --wait --output url`)
    }).pipe(withSession(input))
).pipe(Command.withDescription("From connection details to a ready engine, step by step (asks for what you leave out)"))
