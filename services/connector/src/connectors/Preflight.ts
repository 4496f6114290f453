import { PostgresFailure, type PostgresSession } from "@scion/kit"
import { Config, Context, Duration, Effect, Layer } from "effect"
import type { PostgresDetails } from "./ConnectionDetails.js"
import { openSourceSession, sourceReason } from "./SourceConnection.js"

export type CheckStatus = "pass" | "warn" | "fail"

export interface PreflightCheck {
  readonly id: string
  readonly status: CheckStatus
  readonly message: string
  readonly remedy: string | null
}

export interface PreflightReport {
  readonly preflight_pass: boolean
  readonly checks: ReadonlyArray<PreflightCheck>
  readonly provider: string
}

/** What a connected probe learns from the source; the checks are derived from it (pure). */
export interface SourceFacts {
  readonly versionNum: number
  readonly version: string
  readonly walLevel: string
  readonly maxReplicationSlots: number
  readonly usedReplicationSlots: number
  readonly maxWalSenders: number
  readonly usedWalSenders: number
  readonly isSuperuser: boolean
  readonly hasReplicationAttribute: boolean
  /** Provider roles granting replication that the user is a member of (rds_replication, …). */
  readonly replicationRoles: ReadonlyArray<string>
  readonly canCreateInDatabase: boolean
  /** Schemas with tables the user cannot read (no USAGE, or some table without SELECT). */
  readonly unreadableSchemas: ReadonlyArray<string>
  readonly readableSchemas: ReadonlyArray<string>
  /** schema.table of tables that logical replication cannot update or delete on as they are. */
  readonly tablesWithoutReplicaIdentity: ReadonlyArray<string>
  /** Scion's schema-change capture (scion.schema_log and its event triggers) is installed already. */
  readonly captureInstalled: boolean
  readonly markers: ProviderMarkers
}

/** What the server itself reveals about who runs it. */
export interface ProviderMarkers {
  readonly rds: boolean
  readonly aurora: boolean
  readonly cloudsql: boolean
  readonly alloydb: boolean
  readonly azure: boolean
  readonly neon: boolean
  readonly supabase: boolean
  readonly version: string
}

/** The probe's outcome: it never fails; not reaching or not logging in are outcomes too. */
export type ProbeOutcome =
  | { readonly _tag: "Unreachable"; readonly reason: string }
  | { readonly _tag: "AuthenticationFailed"; readonly reason: string }
  | { readonly _tag: "Connected"; readonly facts: SourceFacts }

/** Most specific first: Aurora is also RDS, AlloyDB also shows Cloud SQL settings. */
export const detectProvider = (m: ProviderMarkers): string => {
  if (m.aurora) return "aurora"
  if (m.rds) return "rds"
  if (m.alloydb) return "alloydb"
  if (m.cloudsql) return "cloudsql"
  if (m.azure) return "azure"
  if (m.neon || /neon/i.test(m.version)) return "neon"
  if (m.supabase) return "supabase"
  return "vanilla"
}

const walRemedy: Record<string, string> = {
  rds: "Set rds.logical_replication = 1 in the instance's DB parameter group and reboot the instance.",
  aurora: "Set rds.logical_replication = 1 in the cluster parameter group and reboot the writer.",
  cloudsql: "Set the database flag cloudsql.logical_decoding = on (the instance restarts).",
  alloydb: "Set the database flag alloydb.logical_decoding = on (the instance restarts).",
  azure: "Set the server parameter wal_level = logical (azure.replication_support = logical on older servers) and restart.",
  neon: "Enable logical replication in the Neon project settings (it cannot be turned off again).",
  supabase: "Supabase runs with wal_level = logical; contact support if it is not.",
  vanilla: "Run ALTER SYSTEM SET wal_level = logical; then restart the server (wal_level needs a restart)."
}

const replicationRemedy: Record<string, string> = {
  rds: "GRANT rds_replication TO <user>;",
  aurora: "GRANT rds_replication TO <user>;",
  cloudsql: "ALTER USER <user> WITH REPLICATION; (as a cloudsqlsuperuser)",
  alloydb: "ALTER USER <user> WITH REPLICATION; (as an alloydbsuperuser)",
  azure: "ALTER ROLE <user> WITH REPLICATION; (as the server admin)",
  neon: "Use a role created in the Neon console or API (they have REPLICATION).",
  supabase: "ALTER ROLE <user> WITH REPLICATION; (as postgres)",
  vanilla: "ALTER ROLE <user> WITH REPLICATION; (as a superuser)"
}

const check = (id: string, status: CheckStatus, message: string, remedy: string | null = null): PreflightCheck => ({ id, status, message, remedy })

const listed = (names: ReadonlyArray<string>, max = 20) => (names.length > max ? `${names.slice(0, max).join(", ")} and ${names.length - max} more` : names.join(", "))

/** The report for a probe's outcome: every check with a message and, unless it passed, a remedy. */
export const reportOf = (outcome: ProbeOutcome, details: Pick<PostgresDetails, "host" | "port" | "username" | "database">): PreflightReport => {
  const target = `${details.host}:${details.port}`
  if (outcome._tag === "Unreachable") {
    const checks = [check("reachable", "fail", `Could not reach ${target}: ${outcome.reason}`, "Check host and port, that the server listens on that address, and that firewalls or security groups admit Scion's addresses.")]
    return { preflight_pass: false, checks, provider: "unknown" }
  }
  const reachable = check("reachable", "pass", `Reached ${target}`)
  if (outcome._tag === "AuthenticationFailed") {
    const checks = [
      reachable,
      check("authentication", "fail", `Could not log in as ${details.username} to database ${details.database}: ${outcome.reason}`, "Check username, password and database, and that pg_hba.conf admits this user from Scion's addresses.")
    ]
    return { preflight_pass: false, checks, provider: "unknown" }
  }
  const f = outcome.facts
  const provider = detectProvider(f.markers)
  const freeSlots = f.maxReplicationSlots - f.usedReplicationSlots
  const freeSenders = f.maxWalSenders - f.usedWalSenders
  const replicationVia = f.isSuperuser ? "superuser" : f.hasReplicationAttribute ? "the REPLICATION attribute" : f.replicationRoles[0]
  const checks: Array<PreflightCheck> = [
    reachable,
    check("authentication", "pass", `Logged in as ${details.username}`),
    f.versionNum >= 100000
      ? check("server_version", "pass", `PostgreSQL ${f.version}`)
      : check("server_version", "fail", `PostgreSQL ${f.version} is older than 10, which has no logical replication`, "Upgrade the server to PostgreSQL 10 or later."),
    f.walLevel === "logical"
      ? check("wal_level", "pass", "wal_level is logical")
      : check("wal_level", "fail", `wal_level is ${f.walLevel}; logical replication needs logical`, walRemedy[provider] ?? walRemedy.vanilla!),
    freeSlots >= 1
      ? check("replication_slots", "pass", `${freeSlots} of ${f.maxReplicationSlots} replication slots free`)
      : check("replication_slots", "fail", `No free replication slot (max_replication_slots = ${f.maxReplicationSlots}, ${f.usedReplicationSlots} in use)`, "Drop unused slots (pg_drop_replication_slot) or raise max_replication_slots and restart."),
    freeSenders >= 1
      ? check("wal_senders", "pass", `${freeSenders} of ${f.maxWalSenders} WAL senders free`)
      : check("wal_senders", "fail", `No free WAL sender (max_wal_senders = ${f.maxWalSenders}, ${f.usedWalSenders} in use)`, "Raise max_wal_senders and restart, or stop unused replication connections."),
    replicationVia !== undefined
      ? check("replication_privilege", "pass", `${details.username} may replicate (${replicationVia})`)
      : check("replication_privilege", "fail", `${details.username} has neither REPLICATION nor a provider role that grants it`, replicationRemedy[provider] ?? replicationRemedy.vanilla!),
    f.unreadableSchemas.length === 0
      ? check("schema_select", "pass", f.readableSchemas.length === 0 ? "No tables in user schemas yet" : `SELECT on every table of ${listed(f.readableSchemas)}`)
      : check("schema_select", "fail", `${details.username} cannot read every table of ${listed(f.unreadableSchemas)}`, `GRANT USAGE ON SCHEMA <schema> TO <user>; GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO <user>; for ${listed(f.unreadableSchemas)}`),
    f.isSuperuser || f.canCreateInDatabase
      ? check("publication_rights", "pass", f.isSuperuser ? "Superuser: may create publications" : `CREATE on database ${details.database}: may create publications for tables it owns`)
      : check("publication_rights", "fail", `${details.username} may not create publications in ${details.database}`, `GRANT CREATE ON DATABASE ${details.database} TO <user>; (publishing a table also needs its ownership or a provider role)`),
    f.tablesWithoutReplicaIdentity.length === 0
      ? check("replica_identity", "pass", "Every table has a replica identity")
      : check(
          "replica_identity",
          "warn",
          `${f.tablesWithoutReplicaIdentity.length} table(s) without a primary key or replica identity: ${listed(f.tablesWithoutReplicaIdentity)}`,
          "Decide per table after discovery (PUT …/replica-identity-decisions): exclude, add a primary key, or REPLICA IDENTITY FULL."
        ),
    f.isSuperuser || f.captureInstalled
      ? check(
          "ddl_capture",
          "pass",
          f.captureInstalled
            ? "Schema-change capture is installed: the mirror follows migrations in commit order with the rows"
            : "Superuser: engine setup installs schema-change capture (event triggers), so the mirror follows migrations in commit order with the rows"
        )
      : check(
          "ddl_capture",
          "warn",
          `${details.username} may not create event triggers: schema changes will be followed by reconciliation (additive changes heal within a monitor interval; others are quarantined with a remedy)`,
          "Have a superuser run the schema-change capture section of the grant script (POST /v1/connectors/{connector_id}/grant-script) before engine setup."
        )
  ]
  return { preflight_pass: checks.every((c) => c.status !== "fail"), checks, provider }
}

const FACTS_SQL = `
  select current_setting('server_version_num')::int as version_num,
         current_setting('server_version') as version,
         version() as version_string,
         current_setting('wal_level') as wal_level,
         current_setting('max_replication_slots')::int as max_slots,
         (select count(*)::int from pg_replication_slots) as used_slots,
         current_setting('max_wal_senders')::int as max_senders,
         (select count(*)::int from pg_stat_activity where backend_type = 'walsender') as used_senders,
         r.rolsuper as is_superuser, r.rolreplication as has_replication,
         array(select g.rolname::text from pg_roles g
               where g.rolname in ('rds_replication', 'rds_superuser', 'cloudsqlsuperuser', 'alloydbsuperuser', 'azure_pg_admin', 'neon_superuser')
                 and pg_has_role(current_user, g.oid, 'member')) as replication_roles,
         has_database_privilege(current_database(), 'CREATE') as can_create,
         to_regclass('scion.schema_log') is not null
           and (select count(*) from pg_event_trigger where evtname in ('scion_capture_ddl', 'scion_capture_drop') and evtenabled <> 'D') = 2 as capture_installed,
         exists(select 1 from pg_settings where name like 'rds.%') as m_rds,
         exists(select 1 from pg_proc where proname = 'aurora_version') as m_aurora,
         exists(select 1 from pg_settings where name like 'cloudsql.%') as m_cloudsql,
         exists(select 1 from pg_settings where name like 'alloydb.%') as m_alloydb,
         exists(select 1 from pg_settings where name like 'azure.%') as m_azure,
         exists(select 1 from pg_settings where name like 'neon.%') as m_neon,
         exists(select 1 from pg_roles where rolname in ('supabase_admin', 'supabase_auth_admin')) as m_supabase
  from pg_roles r where r.rolname = current_user`

interface FactsRow extends Record<string, unknown> {
  readonly version_num: number
  readonly version: string
  readonly version_string: string
  readonly wal_level: string
  readonly max_slots: number
  readonly used_slots: number
  readonly max_senders: number
  readonly used_senders: number
  readonly is_superuser: boolean
  readonly has_replication: boolean
  readonly replication_roles: ReadonlyArray<string>
  readonly can_create: boolean
  readonly capture_installed: boolean
  readonly m_rds: boolean
  readonly m_aurora: boolean
  readonly m_cloudsql: boolean
  readonly m_alloydb: boolean
  readonly m_azure: boolean
  readonly m_neon: boolean
  readonly m_supabase: boolean
}

// User tables (ordinary and partitioned) outside the system schemas.
const USER_TABLES = `
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p') and not c.relispartition
    and n.nspname not in ('pg_catalog', 'information_schema', 'scion') and n.nspname not like 'pg\\_%'`

const SCHEMAS_SQL = `
  select n.nspname as schema,
         bool_and(has_schema_privilege(n.oid, 'USAGE') and has_table_privilege(c.oid, 'SELECT')) as readable
  ${USER_TABLES}
  group by n.nspname order by n.nspname`

// Default identity without a primary key, or identity NOTHING: updates and deletes cannot replicate.
const NO_IDENTITY_SQL = `
  select n.nspname || '.' || c.relname as name
  ${USER_TABLES}
    and (c.relreplident = 'n' or (c.relreplident = 'd' and not exists (select 1 from pg_index i where i.indrelid = c.oid and i.indisprimary)))
  order by 1 limit 1000`

/** Errors that mean the server answered but refused this login (or database). */
const AUTH_CODES = new Set(["28P01", "28000", "3D000", "42501"])

/**
 * Probes a PostgreSQL source: one connection with a short connect timeout, acquired and released
 * in a scope; the catalog queries run read-only. The password is used for the login only.
 */
export class SourceProbe extends Context.Tag("@scion/connector/SourceProbe")<
  SourceProbe,
  { readonly probe: (details: PostgresDetails, password: string) => Effect.Effect<ProbeOutcome> }
>() {
  static make(options: { readonly connectTimeout: Duration.DurationInput; readonly queryTimeout: Duration.DurationInput }): Context.Tag.Service<SourceProbe> {
    const connectMillis = Duration.toMillis(options.connectTimeout)
    const queryMillis = Duration.toMillis(options.queryTimeout)

    const classify = (failure: PostgresFailure): ProbeOutcome => {
      const code = failure.sqlstate
      if (code !== undefined && (AUTH_CODES.has(code) || code.startsWith("28"))) return { _tag: "AuthenticationFailed", reason: sourceReason(failure) }
      // TLS refused under require/verify-*: the server is there, the login cannot happen.
      if (/SSL|certificate|self.signed/i.test(failure.message)) return { _tag: "AuthenticationFailed", reason: sourceReason(failure) }
      return { _tag: "Unreachable", reason: sourceReason(failure) }
    }

    const readFacts = (session: PostgresSession, database: string) =>
      Effect.gen(function* (): Effect.fn.Return<SourceFacts, PostgresFailure> {
        const [row] = yield* session.query<FactsRow>(FACTS_SQL)
        if (row === undefined) return yield* new PostgresFailure({ cause: new Error("the connecting role is not in pg_roles") })
        const schemas = yield* session.query<{ schema: string; readable: boolean }>(SCHEMAS_SQL)
        const noIdentity = yield* session.query<{ name: string }>(NO_IDENTITY_SQL)
        return {
          versionNum: row.version_num,
          version: row.version,
          walLevel: row.wal_level,
          maxReplicationSlots: row.max_slots,
          usedReplicationSlots: row.used_slots,
          maxWalSenders: row.max_senders,
          usedWalSenders: row.used_senders,
          isSuperuser: row.is_superuser,
          hasReplicationAttribute: row.has_replication,
          replicationRoles: row.replication_roles,
          canCreateInDatabase: row.can_create,
          readableSchemas: schemas.filter((s) => s.readable).map((s) => s.schema),
          unreadableSchemas: schemas.filter((s) => !s.readable).map((s) => s.schema),
          tablesWithoutReplicaIdentity: noIdentity.map((t) => `${database}.${t.name}`),
          captureInstalled: row.capture_installed,
          markers: {
            rds: row.m_rds,
            aurora: row.m_aurora,
            cloudsql: row.m_cloudsql,
            alloydb: row.m_alloydb,
            azure: row.m_azure,
            neon: row.m_neon,
            supabase: row.m_supabase,
            version: row.version_string
          }
        }
      })

    return SourceProbe.of({
      probe: (details, password) =>
        Effect.scoped(
          Effect.flatMap(
            openSourceSession(details, password, { applicationName: "scion-preflight", connectMillis, queryMillis, readOnly: true }).pipe(
              Effect.catchTag("PostgresFailure", (failure) => Effect.fail({ connectFailed: failure }))
            ),
            (session) =>
              readFacts(session, details.database).pipe(
                Effect.map((facts): ProbeOutcome => ({ _tag: "Connected", facts })),
                // Connected but the catalog could not be read (timeout, a revoked privilege): report it as unreachable with the reason.
                Effect.catchTag("PostgresFailure", (failure) =>
                  Effect.succeed<ProbeOutcome>({ _tag: "Unreachable", reason: `connected, but reading the catalog failed: ${sourceReason(failure)}` })
                )
              )
          )
        ).pipe(
          Effect.catchAll(({ connectFailed }) => Effect.succeed(classify(connectFailed))),
          Effect.withSpan("SourceProbe.probe", { attributes: { host: details.host, port: details.port, database: details.database } })
        )
    })
  }

  /** PREFLIGHT_CONNECT_TIMEOUT (default 5 seconds) and PREFLIGHT_QUERY_TIMEOUT (default 10 seconds). */
  static readonly layerConfig: Layer.Layer<SourceProbe> = Layer.effect(
    SourceProbe,
    Effect.gen(function* () {
      const connectTimeout = yield* Config.duration("PREFLIGHT_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5)))
      const queryTimeout = yield* Config.duration("PREFLIGHT_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))
      return SourceProbe.make({ connectTimeout, queryTimeout })
    }).pipe(Effect.orDie)
  )
}
