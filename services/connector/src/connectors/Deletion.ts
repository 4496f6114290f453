import type { JsonObject } from "@bufbuild/protobuf"
import { SqlClient, type SqlError } from "@effect/sql"
import { enqueueJob, JobFailed, type JobHandler, newOperationId, type OperationEnded, type PostgresFailure, type Principal, quoteIdent, type RpcError, transactional, tracedFn } from "@scion/kit"
import { Config, Context, Duration, Effect, Either, Layer, Option, Schedule, Schema } from "effect"
import { ConnectorNotFound, DeleteInProgress, DeletionLocked } from "../domain/errors.js"
import type { Connector } from "../domain/models.js"
import { type BranchesUnavailable, ConnectorBranches } from "./ConnectorBranches.js"
import { EngineProvisioner } from "../engine/EngineProvisioner.js"
import { setSubscriptionEnabled } from "../engine/EngineReplication.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { PostgresDetails } from "./ConnectionDetails.js"
import { Connectors } from "./Connectors.js"
import { ConnectorsRepo } from "./ConnectorsRepo.js"
import { DeletionRepo } from "./DeletionRepo.js"
import { storedPostgresDetails } from "./StoredDetails.js"
import { activeOperation, ConnectorOperations } from "./Discovery.js"
import { publicationName } from "./GrantScript.js"
import { type CaptureRelease, releaseCapture } from "../replication/SourceCapture.js"
import { SourceUnavailable } from "./SchemaIntrospection.js"
import { openSourceSession, sourceReason } from "./SourceConnection.js"

/** The job's unit and type: subject `jobs.connector.delete`, durable `connector-delete`. */
export const DELETE_JOB = { unit: "connector", type: "delete" } as const

/** What Scion removed from one database of the source. */
export interface DatabaseCleanup {
  readonly database: string
  readonly publications_dropped: ReadonlyArray<string>
  readonly slots_dropped: ReadonlyArray<string>
  /** Scion's schema-change capture and heartbeat on that database (see CaptureRelease). */
  readonly capture: CaptureRelease
}

/**
 * Drops what Scion created for a connector on one source database: the publication
 * `scion_<connector id>` (the grant script's, later the engine's) and the logical replication
 * slots named for the connector (`scion_<connector id>` or `scion_<connector id>_…`) in that
 * database, terminating a walsender still holding one. Absent objects are fine.
 */
export class SourceCleaner extends Context.Tag("@scion/connector/SourceCleaner")<
  SourceCleaner,
  { readonly clean: (details: PostgresDetails, password: string, connectorId: string) => Effect.Effect<DatabaseCleanup, SourceUnavailable> }
>() {
  static make(options: { readonly connectTimeout: Duration.DurationInput; readonly queryTimeout: Duration.DurationInput }): Context.Tag.Service<SourceCleaner> {
    const connectMillis = Duration.toMillis(options.connectTimeout)
    const queryMillis = Duration.toMillis(options.queryTimeout)

    const clean = (details: PostgresDetails, password: string, connectorId: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const unavailable = (failure: PostgresFailure) => new SourceUnavailable({ database: details.database, reason: sourceReason(failure) })
          const session = yield* openSourceSession(details, password, { applicationName: "scion-connector-delete", connectMillis, queryMillis }).pipe(Effect.mapError(unavailable))
          const query = <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) => session.query<R>(text, values).pipe(Effect.mapError(unavailable))
          const name = publicationName(connectorId)
          // Every pipeline's publication: scion_<id>, and a deep reset's scion_<id>_g<n>.
          const publications = yield* query<{ pubname: string }>("select pubname from pg_publication where pubname = $1 or left(pubname, length($1) + 1) = $1 || '_'", [name])
          for (const p of publications) yield* query(`drop publication if exists ${quoteIdent(p.pubname)}`)
          const slots = yield* query<{ slot_name: string; active_pid: number | null }>(
            `select slot_name, active_pid from pg_replication_slots
             where database = current_database() and (slot_name = $1 or left(slot_name, length($1) + 1) = $1 || '_')`,
            [name]
          )
          for (const slot of slots) {
            if (slot.active_pid !== null) yield* query("select pg_terminate_backend($1, 5000)", [slot.active_pid])
            yield* query("select pg_drop_replication_slot($1)", [slot.slot_name])
          }
          // Schema-change capture goes with the last connector that used it (what an
          // administrator installed stays for them to remove).
          let capture: CaptureRelease = "none"
          for (const p of publications) capture = yield* releaseCapture({ query }, p.pubname, connectorId)
          if (capture === "left_installed") {
            yield* Effect.logInfo("schema-change capture left installed on the source: the connector's role may not drop what an administrator installed").pipe(
              Effect.annotateLogs({ connector_id: connectorId, database: details.database })
            )
          }
          return { database: details.database, publications_dropped: publications.map((p) => p.pubname), slots_dropped: slots.map((s) => s.slot_name), capture }
        })
      ).pipe(Effect.withSpan("SourceCleaner.clean", { attributes: { host: details.host, port: details.port, database: details.database } }))

    return SourceCleaner.of({ clean })
  }

  /** PREFLIGHT_CONNECT_TIMEOUT (default 5 s) and DISCOVERY_QUERY_TIMEOUT (default 60 s), as discovery. */
  static readonly layerConfig: Layer.Layer<SourceCleaner> = Layer.effect(
    SourceCleaner,
    Effect.gen(function* () {
      const connectTimeout = yield* Config.duration("PREFLIGHT_CONNECT_TIMEOUT").pipe(Config.withDefault(Duration.seconds(5)))
      const queryTimeout = yield* Config.duration("DISCOVERY_QUERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(60)))
      return SourceCleaner.make({ connectTimeout, queryTimeout })
    }).pipe(Effect.orDie)
  )
}

/** The 202's body: the connector_delete operation just started. */
export interface DeleteStarted {
  readonly operationId: string
  readonly connectorId: string
  readonly status: "pending"
}


/**
 * The deletion lock and connector deletion. A delete is an operation (connector_delete) and a
 * job; the connector row carries the lock and the pointer to the delete last started, and the
 * operation unit says whether that one is still pending or running ("in progress").
 */
export class Deletion extends Effect.Service<Deletion>()("@scion/connector/Deletion", {
  effect: Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const connectors = yield* Connectors
    const operations = yield* ConnectorOperations
    const sql = yield* SqlClient.SqlClient
    const deletions = yield* DeletionRepo

    const transaction = transactional(sql)

    // The connector if the caller holds the permission in its org; other orgs' are not found.
    const visible = connectors.visible

    /** The row locked for the rest of the transaction, with the delete still in progress, if any. */
    const lockRow = (connectorId: string) =>
      Effect.gen(function* () {
        const found = yield* deletions.lockForDelete(connectorId)
        if (Option.isNone(found)) return yield* new ConnectorNotFound({ connectorId })
        const row = found.value
        return { locked: row.deletion_locked, active: yield* activeOperation(operations, row.delete_operation_id) }
      })

    const setLock = (locked: boolean) =>
      Effect.fn(locked ? "Deletion.lock" : "Deletion.unlock")(function* (principal: Principal, connectorId: string) {
        const connector = yield* visible(principal, connectorId, "connectors.update")
        yield* transaction(
          Effect.gen(function* () {
            const row = yield* lockRow(connector.id)
            if (Option.isSome(row.active)) return yield* new DeleteInProgress({ connectorId: connector.id, operationId: row.active.value })
            // Idempotent: the same state again changes nothing (not even updated_at).
            if (row.locked !== locked) yield* deletions.setDeletionLocked(connector.id, locked)
          })
        )
        yield* Effect.logInfo(locked ? "connector deletion locked" : "connector deletion unlocked").pipe(Effect.annotateLogs({ connector_id: connector.id }))
        return yield* connectors.get(principal, connector.id)
      })

    /**
     * Starts a connector_delete operation and its job in one transaction with the row's pointer.
     * `honourLock` false is the project-deletion path (the project is gone; see the README).
     * Answers the delete already in progress as a Left.
     */
    const start = (connector: Connector, force: boolean, honourLock: boolean) =>
      transaction(
        Effect.gen(function* () {
          const row = yield* lockRow(connector.id)
          if (honourLock && row.locked) return yield* new DeletionLocked({ connectorId: connector.id })
          if (Option.isSome(row.active)) return Either.left(row.active.value)
          const operationId = newOperationId("del")
          yield* operations.create({ id: operationId, orgId: connector.orgId, resourceId: connector.id, type: "connector_delete" })
          yield* deletions.pointDelete(connector.id, operationId)
          yield* enqueueJob({ ...DELETE_JOB, operationId, orgId: connector.orgId, payload: { connector_id: connector.id, force } }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql)
          )
          return Either.right(operationId)
        })
      )

    /**
     * DELETE /v1/connectors/{id}?force= (connectors.delete): 409 while locked or while another
     * delete is pending or running; otherwise a new connector_delete operation.
     */
    const remove = tracedFn("Deletion.delete")(function* (principal: Principal, input: { readonly connectorId: string; readonly force: boolean }) {
      const connector = yield* visible(principal, input.connectorId, "connectors.delete")
      const started = yield* start(connector, input.force, true)
      if (Either.isLeft(started)) return yield* new DeleteInProgress({ connectorId: connector.id, operationId: started.left })
      yield* Effect.logInfo("connector delete started").pipe(Effect.annotateLogs({ connector_id: connector.id, operation_id: started.right, force: input.force }))
      return { operationId: started.right, connectorId: connector.id, status: "pending" } satisfies DeleteStarted
    })

    /**
     * Deletes (force) every connector of a deleted project, as the project-deletion consumer does:
     * the project's org's only (a project id names one org's project; another org's connector
     * naming it is not its child). Idempotent: connectors already gone are not there, and a delete
     * in progress is kept.
     */
    const removeProject = tracedFn("Deletion.removeProject")(function* (orgId: string, projectId: string) {
      const found = yield* repo.listByProject(orgId, projectId)
      const started: Array<string> = []
      for (const connector of found) {
        const outcome = yield* start(connector, true, false).pipe(
          // Deleted by someone else meanwhile: nothing to do.
          Effect.catchTag("ConnectorNotFound", () => Effect.succeed(Either.left("gone")))
        )
        if (Either.isRight(outcome)) started.push(outcome.right)
      }
      return { connectors: found.length, started }
    })

    return { lock: setLock(true), unlock: setLock(false), delete: remove, removeProject } as const
  })
}) {}

export const DeletePayload = Schema.Struct({ connector_id: Schema.String, force: Schema.Boolean })
export type DeletePayload = typeof DeletePayload.Type

/** Subject `jobs.connector.secret_purge`, durable `connector-secret_purge`: a delete's last step. */
export const SECRET_PURGE_JOB = { unit: "connector", type: "secret_purge" } as const

export const SecretPurgePayload = Schema.Struct({ connector_id: Schema.String, delete_operation_id: Schema.String })
export type SecretPurgePayload = typeof SecretPurgePayload.Type

/** The purge operation of a delete: its id follows from the delete's, so a redelivery finds it again. */
const purgeOperationIdOf = (deleteOperationId: string) => `op_prg${deleteOperationId.replace(/^op_/, "")}`.slice(0, 120)

/**
 * The connector_secret_purge job: in one transaction, the connector's secrets (its encrypted
 * connection details) and its row go. Started by the delete job once the source is cleaned and
 * the engine destroyed; a redelivery after the row is gone answers the same.
 */
export const secretPurgeJob: JobHandler<SecretPurgePayload, typeof SecretPurgePayload.Encoded, JobFailed | OperationEnded | RpcError, DeletionRepo> = {
  ...SECRET_PURGE_JOB,
  payload: SecretPurgePayload,
  run: (job) =>
    Effect.gen(function* () {
      const connectorId = job.payload.connector_id
      yield* job.report({ stage: "purge", stageLabel: "Purging the connector's secrets and deleting the connector", progress: 50 })
      const outcome = yield* DeletionRepo.purge(connectorId, job.payload.delete_operation_id)
      if (outcome._tag === "Superseded") return yield* new JobFailed({ message: `Superseded by delete operation ${outcome.by ?? "none"}` })
      yield* Effect.logInfo("connector secrets purged").pipe(Effect.annotateLogs({ connector_id: connectorId, secrets_purged: outcome.secretsPurged }))
      return { connector_id: connectorId, secrets_purged: outcome.secretsPurged, connector_deleted: outcome.connectorDeleted } satisfies JsonObject
    }).pipe(Effect.withSpan("secretPurgeJob.run", { attributes: { operationId: job.operationId } }))
}


/**
 * The delete job: drops what Scion created on the source (every database of the details), then,
 * in one transaction, purges the connector's secrets (the connector_secret_purge step) and
 * deletes the row. Without force a source that cannot be cleaned (unreachable, refused, missing
 * or unreadable credentials) fails the operation at once and leaves the connector as it was; with
 * force the source cleanup is skipped and the result says why. A redelivery after the row is gone
 * answers that it is gone.
 */
export const deleteJob: JobHandler<
  DeletePayload,
  typeof DeletePayload.Encoded,
  JobFailed | OperationEnded | RpcError | SqlError.SqlError | BranchesUnavailable,
  ConnectorsRepo | DeletionRepo | SecretStore | SourceCleaner | EngineProvisioner | ConnectorBranches | ConnectorOperations | SqlClient.SqlClient
> = {
  ...DELETE_JOB,
  payload: DeletePayload,
  run: (job) =>
    Effect.gen(function* () {
      const deletions = yield* DeletionRepo
      const repo = yield* ConnectorsRepo
      const cleaner = yield* SourceCleaner
      const { connector_id: connectorId, force } = job.payload

      const found = yield* repo.find(connectorId)
      if (Option.isNone(found)) return { connector_id: connectorId, deleted: true, already_deleted: true } satisfies JsonObject
      if (found.value.deleteOperationId !== null && found.value.deleteOperationId !== job.operationId) {
        return yield* new JobFailed({ message: `Superseded by delete operation ${found.value.deleteOperationId}` })
      }

      // The engine's subscription stops first, so it cannot re-take the slot being dropped.
      yield* job.report({ stage: "engine_pause", stageLabel: "Stopping the engine's replication", progress: 5 })
      // Branches first: their databases and roles live on the engine, and their rows in the branch
      // unit must not outlive it. The branch unit being unavailable is retried (then given up).
      const hadEngine = yield* deletions.hasEngine(connectorId)
      if (hadEngine) {
        yield* job.report({ stage: "branches", stageLabel: "Deleting the connector's branches", progress: 2 })
        const branches = yield* ConnectorBranches
        const dropped = yield* branches.deleteAll(connectorId)
        if (dropped > 0) yield* Effect.logInfo("connector branches deleted").pipe(Effect.annotateLogs({ connector_id: connectorId, branches: dropped }))
      }

      // The quarantine monitor leaves the engine alone from here on (a paused subscription is no break).
      yield* deletions.holdMonitorLease(connectorId)
      const paused = yield* setSubscriptionEnabled(connectorId, false).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("the engine's subscription could not be paused; the engine is destroyed anyway").pipe(
            Effect.annotateLogs({ connector_id: connectorId, error: error.message }),
            Effect.as(false)
          )
        )
      )

      yield* job.report({ stage: "source", stageLabel: "Dropping the publication and replication slots Scion created on the source", progress: 10 })
      let source: JsonObject
      if (found.value.serviceName !== "postgresql") {
        source = { status: "not_applicable" }
      } else {
        const cleaned = yield* Effect.either(
          Effect.gen(function* () {
            const details = yield* storedPostgresDetails(connectorId).pipe(Effect.mapError((e) => e.reason))
            const databases: Array<DatabaseCleanup> = []
            for (const database of details.databases ?? [details.database]) {
              databases.push(
                yield* cleaner.clean({ ...details, database }, details.password, connectorId).pipe(Effect.mapError((e) => `database ${e.database}: ${e.reason}`))
              )
            }
            return databases
          })
        )
        if (Either.isLeft(cleaned)) {
          if (!force) {
            // The connector stays: its replication resumes as it was.
            if (paused) yield* setSubscriptionEnabled(connectorId, true).pipe(Effect.ignore)
            yield* deletions.releaseMonitorLease(connectorId)
            return yield* new JobFailed({
              message: `The source could not be cleaned up (${cleaned.left}); the connector was not deleted. Retry once the source is reachable, or delete with force=true to abandon what Scion created on it.`
            })
          }
          source = { status: "skipped", reason: `force: the source could not be cleaned up (${cleaned.left}); its publication and replication slots were abandoned` }
        } else {
          source = { status: "cleaned", databases: cleaned.right.map((d) => ({ database: d.database, publications_dropped: [...d.publications_dropped], slots_dropped: [...d.slots_dropped], capture: d.capture })) }
        }
      }

      // destroy is idempotent: also run when no setup recorded an engine (one may be half made).
      yield* job.report({ stage: "engine", stageLabel: "Destroying the connector's engine", progress: 60 })
      const provisioner = yield* EngineProvisioner
      yield* provisioner.destroy(connectorId).pipe(Effect.mapError((e) => new JobFailed({ message: `The engine could not be destroyed (${e.message}); retry the delete` })))

      // The purge is an operation of its own (connector_secret_purge); the delete completes with it.
      yield* job.report({ stage: "secrets", stageLabel: "Purging the connector's secrets and deleting the connector", progress: 80 })
      const operations = yield* ConnectorOperations
      const purgeOperationId = purgeOperationIdOf(job.operationId)
      const purged = yield* deletions.countSecrets(connectorId)
      yield* operations.create({ id: purgeOperationId, orgId: found.value.orgId, resourceId: connectorId, type: "connector_secret_purge" }).pipe(
        Effect.mapError((e) => new JobFailed({ message: `The secret purge could not start (${e.cause}); retry the delete` }))
      )
      yield* enqueueJob({ ...SECRET_PURGE_JOB, operationId: purgeOperationId, orgId: found.value.orgId, payload: { connector_id: connectorId, delete_operation_id: job.operationId } })
      const purgeStatus = yield* operations.status(purgeOperationId).pipe(
        Effect.mapError((e) => e.cause),
        Effect.flatMap((status) => (Option.isSome(status) && (status.value === "completed" || status.value === "failed") ? Effect.succeed(status.value) : Effect.fail("running"))),
        Effect.retry(Schedule.spaced(Duration.millis(100)).pipe(Schedule.upTo(Duration.seconds(120)))),
        Effect.mapError(() => new JobFailed({ message: `The secret purge (${purgeOperationId}) did not finish in time; retry the delete` }))
      )
      if (purgeStatus === "failed") return yield* new JobFailed({ message: `The secret purge failed (see operation ${purgeOperationId}); retry the delete` })
      yield* Effect.logInfo("connector deleted").pipe(Effect.annotateLogs({ connector_id: connectorId, force, source_cleanup: String(source.status) }))
      return {
        connector_id: connectorId,
        deleted: true,
        force,
        source_cleanup: source,
        engine: { status: hadEngine ? "destroyed" : "not_set_up" },
        steps: [{ type: "connector_secret_purge", operation_id: purgeOperationId, status: "completed", secrets_purged: purged }]
      } satisfies JsonObject
    }).pipe(Effect.withSpan("deleteJob.run", { attributes: { operationId: job.operationId } }))
}
