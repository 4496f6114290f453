import type { JsonObject } from "@bufbuild/protobuf"
import { SqlClient, type SqlError } from "@effect/sql"
import {
  enqueueJob,
  JobFailed,
  type JobHandler,
  makeUnitOperations,
  newOperationId,
  OperationClient,
  type OperationEnded,
  type OperationState,
  type OperationTypeName,
  type Principal,
  type RpcError,
  ServiceIdentity,
  tracedFn,
  transactional,
  type UnitOperations
} from "@scion/kit"
import { Context, Effect, Either, Layer, Option, Schema } from "effect"
import {
  ConnectorNotFound,
  ConnectorStateInvalid,
  DecisionsConflict,
  DiscoveryPrerequisitesFailed,
  GrantScriptUnavailable,
  InvalidArgument,
  OperationsUnavailable,
  SecretStoreFailure
} from "../domain/errors.js"
import type { Connector } from "../domain/models.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { PostgresDetails } from "./ConnectionDetails.js"
import { Connectors } from "./Connectors.js"
import { ConnectorsRepo } from "./ConnectorsRepo.js"
import { storedPostgresDetails } from "./StoredDetails.js"
import type { PreflightCheck } from "./Preflight.js"
import { SourceProbe } from "./Preflight.js"
import {
  type DiscoveredDatabase,
  type DiscoveredSchema,
  isStructure,
  SourceIntrospector,
  type SourceUnavailable,
  structureHash,
  structureOf,
  tablesOf
} from "./SchemaIntrospection.js"
import { grantScript } from "./GrantScript.js"
import { applyDecisions, preflightAfterDiscovery, type ReplicaIdentityPreflight } from "./ReplicaIdentity.js"
import { resolveSelection } from "./Selection.js"

/** The job's unit and type: subject `jobs.connector.discovery`, durable `connector-discovery`. */
export const DISCOVERY_JOB = { unit: "connector", type: "discovery" } as const

export type StartedStatus = OperationState

/** The operations this unit starts. */
export type ConnectorOperationType = Extract<
  OperationTypeName,
  | "connector_discovery"
  | "connector_delete"
  | "connector_engine_setup"
  | "connector_rollout"
  | "connector_reset"
  | "connector_deep_reset"
  | "connector_cdc_cutover"
  | "connector_replication_rollback"
  | "connector_cdc_shadow_cleanup"
  | "connector_secret_purge"
>

/**
 * The operation unit as this unit uses it, with its service principal: a worker reports long
 * after the user's request, and the user's permission was checked when the work started.
 */
export class ConnectorOperations extends Context.Tag("@scion/connector/ConnectorOperations")<
  ConnectorOperations,
  UnitOperations<ConnectorOperationType, OperationsUnavailable>
>() {
  static readonly live: Layer.Layer<ConnectorOperations, never, OperationClient | ServiceIdentity> = Layer.effect(
    ConnectorOperations,
    makeUnitOperations<ConnectorOperationType, OperationsUnavailable>((cause) => new OperationsUnavailable({ cause }))
  )
}

/** The operation while it is still pending or running at the operation unit; none once it ended, or when there is none. */
export const activeOperation = (operations: Context.Tag.Service<ConnectorOperations>, operationId: string | null) =>
  Effect.gen(function* () {
    if (operationId === null) return Option.none<string>()
    const status = yield* operations.status(operationId)
    return Option.isSome(status) && (status.value === "pending" || status.value === "running") ? Option.some(operationId) : Option.none<string>()
  })

/** The 202's body: the operation (joined or new) and the prerequisite checks that let it start. */
export interface DiscoveryStarted {
  readonly operationId: string
  readonly connectorId: string
  readonly status: StartedStatus
  /** True when a discovery already pending or running for this connector was joined. */
  readonly joined: boolean
  readonly prerequisites: ReadonlyArray<PreflightCheck>
  /** The databases the job introspects. */
  readonly databases: ReadonlyArray<string>
}

const pass = (id: string, message: string): PreflightCheck => ({ id, status: "pass", message, remedy: null })
const fail = (id: string, message: string, remedy: string): PreflightCheck => ({ id, status: "fail", message, remedy })



/**
 * Discovery (start and join) and selection. Discovery's prerequisites are checked before anything
 * starts: a failing one is DiscoveryPrerequisitesFailed (422) and no operation exists.
 */
export class Discovery extends Effect.Service<Discovery>()("@scion/connector/Discovery", {
  effect: Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const connectors = yield* Connectors
    const secrets = yield* SecretStore
    const probe = yield* SourceProbe
    const operations = yield* ConnectorOperations
    const sql = yield* SqlClient.SqlClient

    const transaction = transactional(sql)
    const stored = (connectorId: string) =>
      storedPostgresDetails(connectorId).pipe(Effect.provideService(ConnectorsRepo, repo), Effect.provideService(SecretStore, secrets))

    // The connector if the caller holds the permission in its org; other orgs' are not found.
    const visible = connectors.visible

    /** The checks that gate discovery, in order; stops at the first failure (later ones cannot run). */
    const prerequisites = (connector: Connector) =>
      Effect.gen(function* () {
        const checks: Array<PreflightCheck> = []
        if (connector.serviceName !== "postgresql") {
          checks.push(fail("service", `Discovery reads PostgreSQL catalogs; this connector is ${connector.serviceName}`, "Discover a postgresql connector."))
          return { checks, details: Option.none<PostgresDetails>() }
        }
        checks.push(pass("service", "The connector is PostgreSQL"))
        const details = yield* Effect.either(stored(connector.id))
        if (Either.isLeft(details)) {
          checks.push(fail("credentials", `The connector's credentials cannot be used: ${details.left.reason}`, "Send the connection details again with PUT /v1/connectors/{connector_id}."))
          return { checks, details: Option.none<PostgresDetails>() }
        }
        checks.push(pass("credentials", "Stored credentials decrypted"))
        const outcome = yield* probe.probe(details.right, details.right.password)
        if (outcome._tag !== "Connected") {
          checks.push(
            fail(
              "reachable",
              `The source refused or did not answer with the stored credentials: ${outcome.reason}`,
              "Check that the source is up and the credentials still work, then update them with PUT /v1/connectors/{connector_id} if they changed."
            )
          )
          return { checks, details: Option.none<PostgresDetails>() }
        }
        checks.push(pass("reachable", `Logged in to ${details.right.database} as ${details.right.username}`))
        return { checks, details: Option.some(details.right) }
      })

    /**
     * Starts discovery (connectors.update) or joins the one still pending or running for this
     * connector. The connector row is locked while deciding, so concurrent calls agree on one
     * operation; the operation is created before the job is written, and the job and the
     * connector's pointer to it commit together.
     */
    const discover = tracedFn("Discovery.discover")(function* (principal: Principal, connectorId: string) {
      const connector = yield* visible(principal, connectorId, "connectors.update")
      // Not discoverable while it is being deleted: the delete purges the credentials a discovery reads.
      const deleting = yield* activeOperation(operations, connector.deleteOperationId)
      if (Option.isSome(deleting)) return yield* new ConnectorStateInvalid({ connectorId: connector.id, reason: `it is being deleted (operation ${deleting.value})` })
      const checked = yield* prerequisites(connector)
      if (Option.isNone(checked.details)) return yield* new DiscoveryPrerequisitesFailed({ checks: checked.checks })
      const details = checked.details.value
      const databases = details.databases ?? [details.database]
      const started = yield* transaction(
        Effect.gen(function* () {
          const previous = yield* repo.lockDiscoveryPointer(connector.id)
          if (previous !== null) {
            const status = yield* operations.status(previous)
            if (Option.isSome(status) && (status.value === "pending" || status.value === "running")) {
              return { operationId: previous, status: status.value, joined: true }
            }
          }
          const operationId = newOperationId("disc")
          yield* operations.create({ id: operationId, orgId: connector.orgId, resourceId: connector.id, type: "connector_discovery" })
          yield* repo.pointDiscovery(connector.id, operationId)
          yield* enqueueJob({ ...DISCOVERY_JOB, operationId, orgId: connector.orgId, payload: { connector_id: connector.id } }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql)
          )
          return { operationId, status: "pending" as StartedStatus, joined: false }
        })
      )
      yield* Effect.logInfo(started.joined ? "discovery joined" : "discovery started").pipe(
        Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId })
      )
      return { ...started, connectorId: connector.id, prerequisites: checked.checks, databases } satisfies DiscoveryStarted
    })

    /**
     * Replaces the selection (connectors.admin). Counters as the interface's Connector table says:
     * selection_schema_version takes schema_version, selected_schema_version goes up by one.
     */
    const select = tracedFn("Discovery.select")(function* (principal: Principal, input: { readonly connectorId: string; readonly selectedPaths: ReadonlyArray<string> }) {
      const connector = yield* visible(principal, input.connectorId, "connectors.admin")
      const structure = connector.schemaStructure
      if (structure === null || !isStructure(structure)) {
        return yield* new InvalidArgument({ field: "selected_paths", message: "Nothing was discovered yet: run POST /v1/connectors/{connector_id}/discover first" })
      }
      const resolved = resolveSelection(structure, input.selectedPaths)
      if (Either.isLeft(resolved)) return yield* new InvalidArgument({ field: "selected_paths", message: resolved.left })
      const { paths, selected } = resolved.right
      // The version the selection was made against is the one whose structure was checked; a
      // discovery landing in between makes needs_reselection true, as it should.
      yield* repo.replaceSelection(connector.id, { paths, selected, schemaVersion: connector.schemaVersion }).pipe(Effect.orDie)
      yield* Effect.logInfo("selection replaced").pipe(Effect.annotateLogs({ connector_id: connector.id, paths: paths.length, tables: selected.totals.tables }))
      return yield* connectors.get(principal, connector.id)
    })

    /**
     * Replaces the replica-identity decisions (connectors.admin) as a whole; tables left out are
     * `exclude`. The write is conditional on the decisions version and the schema version read
     * here: another write or a discovery in between is DecisionsConflict (409), never a merge.
     */
    const decide = tracedFn("Discovery.decide")(function* (principal: Principal, input: { readonly connectorId: string; readonly decisions: Readonly<Record<string, unknown>> }) {
      const connector = yield* visible(principal, input.connectorId, "connectors.admin")
      const basis = yield* repo.decisionsBasis(connector.id).pipe(Effect.orDie)
      if (Option.isNone(basis)) return yield* new ConnectorNotFound({ connectorId: connector.id })
      const row = basis.value
      if (!isStructure(row.schema_structure)) {
        return yield* new InvalidArgument({ field: "decisions", message: "Nothing was discovered yet: run POST /v1/connectors/{connector_id}/discover first" })
      }
      const missing = tablesOf(row.schema_structure).filter((t) => !t.has_replica_identity).map((t) => t.path)
      const next = row.replica_identity_decisions_version + 1
      const applied = applyDecisions(missing, input.decisions, next)
      if (Either.isLeft(applied)) return yield* new InvalidArgument({ field: "decisions", message: applied.left })
      const updated = yield* repo
        .replaceDecisions(connector.id, applied.right, { schemaVersion: row.schema_version, decisionsVersion: row.replica_identity_decisions_version })
        .pipe(Effect.orDie)
      if (!updated) return yield* new DecisionsConflict({ connectorId: connector.id })
      yield* Effect.logInfo("replica-identity decisions replaced").pipe(Effect.annotateLogs({ connector_id: connector.id, decisions_version: next }))
      return yield* connectors.get(principal, connector.id)
    })

    /**
     * The SQL an administrator runs on the source for the selection (connectors.read: it holds
     * no secret, only the username): the
     * role of the stored username with the provider's replication right, grants on the selected
     * schemas, decided REPLICA IDENTITY FULL, the publication. Never a password.
     */
    const writeGrantScript = tracedFn("Discovery.grantScript")(function* (principal: Principal, connectorId: string) {
      const connector = yield* visible(principal, connectorId, "connectors.read")
      if (connector.serviceName !== "postgresql") return yield* new GrantScriptUnavailable({ reason: `the connector is ${connector.serviceName}, not postgresql` })
      if (connector.schemaStructure === null) return yield* new GrantScriptUnavailable({ reason: "discovery has not run: POST /v1/connectors/{connector_id}/discover first" })
      const selected = connector.selectedSchemaStructure
      if (selected === null || !isStructure(selected) || selected.totals.schemas === 0) {
        return yield* new GrantScriptUnavailable({ reason: "no schemas are selected: POST /v1/connectors/{connector_id}/selection first" })
      }
      const details = yield* stored(connector.id).pipe(Effect.mapError((e) => new SecretStoreFailure({ reason: e.reason })))
      if (details.username.trim() === "") return yield* new GrantScriptUnavailable({ reason: "the connection details name no username" })
      const preflight = connector.replicaIdentityPreflight as Partial<ReplicaIdentityPreflight> | null
      return grantScript({
        connectorId: connector.id,
        provider: connector.sourceProvider ?? "vanilla",
        username: details.username,
        selected,
        decisions: preflight?.decisions ?? {}
      })
    })

    return { discover, select, decide, grantScript: writeGrantScript } as const
  })
}) {}

export const DiscoveryPayload = Schema.Struct({ connector_id: Schema.String })
export type DiscoveryPayload = typeof DiscoveryPayload.Type

const jobFailed = (message: string) => new JobFailed({ message })

/**
 * The discovery job: reads the credentials from the secret store, introspects every database of
 * the details (schemas → tables → columns, keys, replica identity, estimates, sizes), reporting
 * per schema, then writes schema_structure and bumps schema_version only when the structure hash
 * changed. Idempotent per operation id: a redelivery after the write answers the recorded result.
 * A missing connector or unreadable credentials fail the operation at once (JobFailed); a source
 * that cannot be read may be a blip, so it is retried and, after the last attempt, fails the
 * operation with its reason.
 */
export const discoveryJob: JobHandler<
  DiscoveryPayload,
  typeof DiscoveryPayload.Encoded,
  JobFailed | OperationEnded | RpcError | SqlError.SqlError | SourceUnavailable,
  ConnectorsRepo | SecretStore | SourceIntrospector | SqlClient.SqlClient
> = {
  ...DISCOVERY_JOB,
  payload: DiscoveryPayload,
  run: (job) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* ConnectorsRepo
      const introspector = yield* SourceIntrospector
      const connectorId = job.payload.connector_id

      const done = yield* repo.discoveryResult(job.operationId)
      if (Option.isSome(done)) return done.value as JsonObject

      const found = yield* repo.find(connectorId)
      if (Option.isNone(found)) return yield* jobFailed(`Connector ${connectorId} no longer exists`)
      const details = yield* storedPostgresDetails(connectorId).pipe(Effect.mapError((e) => jobFailed(`The connector's credentials cannot be used: ${e.reason}`)))
      const databaseNames = details.databases ?? [details.database]

      yield* job.report({ stage: "connect", stageLabel: `Connecting to ${databaseNames.length} database(s)`, progress: 1 })
      const databases: Array<DiscoveredDatabase> = []
      for (const [d, name] of databaseNames.entries()) {
        const database = yield* Effect.scoped(
          Effect.gen(function* () {
            const session = yield* introspector.open({ ...details, database: name }, details.password)
            const schemaNames = yield* session.schemas
            const schemas: Array<DiscoveredSchema> = []
            for (const [s, schemaName] of schemaNames.entries()) {
              const schema = yield* session.readSchema(schemaName)
              schemas.push(schema)
              // Progress spreads 1..95 over databases, then schemas within each.
              const share = (d + (s + 1) / schemaNames.length) / databaseNames.length
              yield* job.report({
                stage: "introspect",
                stageLabel: `Discovered ${name}.${schemaName} (${schema.tables.length} tables; schema ${s + 1} of ${schemaNames.length}, database ${d + 1} of ${databaseNames.length})`,
                progress: Math.max(1, Math.min(95, Math.floor(share * 95)))
              })
            }
            return { name, schemas } satisfies DiscoveredDatabase
          })
        )
        databases.push(database)
      }

      const structure = structureOf(databases)
      const hash = structureHash(structure)
      const missingIdentity = tablesOf(structure).filter((t) => !t.has_replica_identity).map((t) => t.path)
      yield* job.report({ stage: "write", stageLabel: "Recording the schema structure", progress: 97 })

      // One transaction, the connector row locked: two discoveries of one connector cannot both
      // bump the version, and the run row makes a redelivery answer the same result.
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const again = yield* repo.discoveryResult(job.operationId)
          if (Option.isSome(again)) return again.value as JsonObject
          const locked = yield* repo.lockDiscovered(connectorId)
          if (Option.isNone(locked)) return yield* jobFailed(`Connector ${connectorId} no longer exists`)
          const row = locked.value
          const changed = row.schema_hash !== hash
          const version = changed ? row.schema_version + 1 : row.schema_version
          // Decisions made for tables that still lack an identity stay; new ones are unresolved.
          const preflight = preflightAfterDiscovery(missingIdentity, row.replica_identity_preflight, row.replica_identity_decisions_version)
          yield* repo.recordDiscovered(connectorId, { structure, hash, version, preflight })
          const result = {
            connector_id: connectorId,
            schema_version: version,
            changed,
            ...structure.totals,
            tables_without_replica_identity: missingIdentity.length
          } satisfies JsonObject
          yield* repo.recordDiscoveryRun({ operationId: job.operationId, connectorId, version, changed, result })
          return result as JsonObject
        })
      )
    }).pipe(Effect.withSpan("discoveryJob.run", { attributes: { operationId: job.operationId } }))
}
