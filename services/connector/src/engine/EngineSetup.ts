import { SqlClient } from "@effect/sql"
import { dieOnSqlError, enqueueJob, newOperationId, type Principal, quoteIdent, quoteLiteral, transactional } from "@scion/kit"
import { Effect, Either, Option } from "effect"
import { Connectors, type ConnectorView } from "../connectors/Connectors.js"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { activeOperation as activeOperationOf, type ConnectorOperationType, ConnectorOperations, type StartedStatus } from "../connectors/Discovery.js"

import { isStructure } from "../connectors/SchemaIntrospection.js"
import { ConnectorStateInvalid, DeleteInProgress, EngineNotSetUp, EngineSetupInProgress, EngineSetupPrerequisitesFailed, RollbackUnavailable } from "../domain/errors.js"
import type { Connector } from "../domain/models.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { EngineProvisioner } from "./EngineProvisioner.js"
import { engineRecord } from "./EngineSetupRepo.js"
import { startPipelineOperation } from "../replication/Pipelines.js"
import { PipelinesRepo } from "../replication/PipelinesRepo.js"
import { EngineSetupRepo } from "./EngineSetupRepo.js"
import { type EngineSetupPayload, ENGINE_SETUP_JOB, fail, setupPrerequisites } from "./SetupPlan.js"
import { onMirrorUnderLock, subscriptionConninfo, withoutStatementLog } from "./PgSession.js"

export { activePipeline, MIRROR_DATABASE, type PipelineNames, pipelineNames, replicationNames } from "../replication/PipelineNames.js"

/** An engine that has been set up and serves branches (degraded ones only to callers who accept stale data). */
const isSetUp = (status: string) => status === "ready" || status === "degraded"

/** What the 202 answers. */
export interface SetupStarted {
  readonly operationId: string
  readonly connectorId: string
  readonly status: StartedStatus
  readonly type: OperationTypeOfMode | "connector_replication_rollback"
}

/** The operation each mode of the setup job runs as. */
const operationTypeOf = { setup: "connector_engine_setup", rollout: "connector_rollout", reset: "connector_reset", deep_reset: "connector_deep_reset" } as const satisfies Record<
  EngineSetupPayload["mode"],
  ConnectorOperationType
>
type OperationTypeOfMode = (typeof operationTypeOf)[EngineSetupPayload["mode"]]

/** POST …/engine-setup: a new operation, or the connector when its engine is already set up. */
export type SetupOutcome = { readonly _tag: "Started"; readonly started: SetupStarted } | { readonly _tag: "AlreadySetUp"; readonly connector: ConnectorView; readonly message: string }

/** POST …/index: a rollout operation, or the connector with the selection recorded. */
export type IndexOutcome = { readonly _tag: "Started"; readonly started: SetupStarted } | { readonly _tag: "Recorded"; readonly connector: ConnectorView; readonly message: string }

const operationPrefixOf = { setup: "eng", rollout: "roll", reset: "rst", deep_reset: "drst" } as const satisfies Record<EngineSetupPayload["mode"], string>


/**
 * Starting engine setup (POST …/engine-setup) and applying a selection (POST …/index). The
 * connector row is locked while deciding, so a setup, a rollout and a delete never start together.
 */
export class EngineSetup extends Effect.Service<EngineSetup>()("@scion/connector/EngineSetup", {
  effect: Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const connectors = yield* Connectors
    const secrets = yield* SecretStore
    const operations = yield* ConnectorOperations
    const provisioner = yield* EngineProvisioner
    const sql = yield* SqlClient.SqlClient
    const pipelines = yield* PipelinesRepo
    const setups = yield* EngineSetupRepo
    const transaction = transactional(sql)

    const storedDetails = (connectorId: string) =>
      storedPostgresDetails(connectorId).pipe(
        Effect.provideService(ConnectorsRepo, repo),
        Effect.provideService(SecretStore, secrets),
        Effect.mapError((e) => e.reason),
        Effect.either
      )

    const activeOperation = (operationId: string | null) => activeOperationOf(operations, operationId)

    /**
     * Inside a transaction: locks the connector row and refuses while a delete or another of its
     * pipeline operations (setup, rollout, reset, deep reset, cutover, rollback) runs.
     */
    const lockIdle = (connectorId: string) =>
      Effect.gen(function* () {
        const row = Option.getOrUndefined(yield* setups.lockPointers(connectorId))
        const deleting = yield* activeOperation(row?.delete_operation_id ?? null)
        if (Option.isSome(deleting)) return yield* new DeleteInProgress({ connectorId, operationId: deleting.value })
        const setting = yield* activeOperation(row?.setup_operation_id ?? null)
        if (Option.isSome(setting)) return yield* new EngineSetupInProgress({ connectorId, operationId: setting.value })
      })

    /** Locks the row, refuses while a delete or another setup runs, then creates the operation and its job. */
    const dispatch = (connector: Connector, mode: EngineSetupPayload["mode"]) =>
      transaction(
        Effect.gen(function* () {
          yield* lockIdle(connector.id)
          const operationId = newOperationId(operationPrefixOf[mode])
          const type = operationTypeOf[mode]
          yield* operations.create({ id: operationId, orgId: connector.orgId, resourceId: connector.id, type })
          yield* setups.pointSetup(connector.id, operationId, mode)
          yield* enqueueJob({ ...ENGINE_SETUP_JOB, operationId, orgId: connector.orgId, payload: { connector_id: connector.id, mode } }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql)
          )
          return { operationId, connectorId: connector.id, status: "pending", type } satisfies SetupStarted
        })
      )

    /** The checks of the 422, or the plan: the stored details decide which database is mirrored. */
    const checkPrerequisites = (connector: Connector) =>
      Effect.gen(function* () {
        if (connector.serviceName !== "postgresql") {
          return yield* new ConnectorStateInvalid({ connectorId: connector.id, reason: `engines mirror PostgreSQL sources; this connector is ${connector.serviceName}` })
        }
        const details = yield* storedDetails(connector.id)
        if (Either.isLeft(details)) {
          return yield* new EngineSetupPrerequisitesFailed({
            checks: [fail("credentials", `The connector's credentials cannot be used: ${details.left}`, "Send the connection details again with PUT /v1/connectors/{connector_id}.")]
          })
        }
        const checked = setupPrerequisites(connector, details.right.database)
        if (Option.isNone(checked.plan)) return yield* new EngineSetupPrerequisitesFailed({ checks: checked.checks })
        return checked.plan.value
      })

    /**
     * POST …/engine-setup (connectors.update): 200 with a message when the engine is ready and
     * mirrors the latest selection; otherwise the prerequisites (422) and a new operation.
     */
    const setUp = Effect.fn("EngineSetup.setUp")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      yield* checkPrerequisites(connector)
      if (isSetUp(connector.branchingEngineStatus) && connector.lastIndexedVersion >= connector.selectedSchemaVersion) {
        return { _tag: "AlreadySetUp", connector: yield* connectors.get(principal, connector.id), message: "The engine is already set up and mirrors the current selection" } satisfies SetupOutcome
      }
      // A ready engine with a newer selection is brought up to date by the same steps.
      const started = yield* dispatch(connector, isSetUp(connector.branchingEngineStatus) ? "rollout" : "setup")
      yield* Effect.logInfo("engine setup started").pipe(Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId, type: started.type }))
      return { _tag: "Started", started } satisfies SetupOutcome
    }, dieOnSqlError)

    /**
     * POST …/index (connectors.update): applies the selection. On a ready engine that is behind
     * the selection, a connector_rollout operation; while no engine is set up, the selection is
     * recorded as the one engine setup will mirror; when nothing changed, the connector as it is.
     */
    const index = Effect.fn("EngineSetup.index")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      if (!isStructure(connector.selectedSchemaStructure)) {
        return yield* new ConnectorStateInvalid({ connectorId: connector.id, reason: "nothing is selected: choose tables with POST /v1/connectors/{connector_id}/selection first" })
      }
      if (connector.branchingEngineStatus === "setting_up") {
        const setting = yield* activeOperation(Option.getOrNull(yield* setups.setupOperationOf(connector.id)))
        if (Option.isSome(setting)) return yield* new EngineSetupInProgress({ connectorId: connector.id, operationId: setting.value })
      }
      if (isSetUp(connector.branchingEngineStatus)) {
        if (connector.lastIndexedVersion >= connector.selectedSchemaVersion) {
          return { _tag: "Recorded", connector: yield* connectors.get(principal, connector.id), message: "The engine already mirrors the current selection" } satisfies IndexOutcome
        }
        yield* checkPrerequisites(connector)
        const started = yield* dispatch(connector, "rollout")
        yield* Effect.logInfo("selection rollout started").pipe(Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId }))
        return { _tag: "Started", started } satisfies IndexOutcome
      }
      yield* setups.recordIndexed(connector.id)
      return {
        _tag: "Recorded",
        connector: yield* connectors.get(principal, connector.id),
        message: "Selection recorded: engine setup will mirror it (POST /v1/connectors/{connector_id}/engine-setup)"
      } satisfies IndexOutcome
    }, dieOnSqlError)

    /**
     * Starts a setup, or a reset, for the quarantine monitor (no caller: the monitor restores a
     * pipeline the engine set up before). A setup or delete in progress is answered as a failure.
     */
    const restart = Effect.fn("EngineSetup.restart")(function* (connectorId: string, mode: "setup" | "reset" = "setup") {
      const found = yield* repo.find(connectorId)
      if (Option.isNone(found)) return yield* new ConnectorStateInvalid({ connectorId, reason: "the connector no longer exists" })
      return yield* dispatch(found.value, mode)
    }, dieOnSqlError)

    /**
     * After new connection details (PUT …): the engine's subscription logs in with them from now
     * on. Nothing to do without an engine; a failure is logged, not raised (the update stands,
     * and the quarantine monitor reports replication that breaks).
     */
    const refreshCredentials = Effect.fn("EngineSetup.refreshCredentials")(function* (connectorId: string) {
      const found = yield* engineRecord(connectorId).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      if (Option.isNone(found)) return false
      const record = found.value
      const details = yield* storedDetails(connectorId)
      if (Either.isLeft(details)) return false
      return yield* Effect.gen(function* () {
        const engine = yield* provisioner.start(connectorId)
        const changed = yield* onMirrorUnderLock(engine, record.mirror_database, { applicationName: "scion-connector", connectMillis: 10_000 }, (mirror) =>
          Effect.gen(function* () {
            const [present] = yield* mirror.query("select 1 from pg_subscription where subname = $1", [record.subscription_name])
            if (present === undefined) return false
            yield* withoutStatementLog(mirror, mirror.query(`alter subscription ${quoteIdent(record.subscription_name)} connection ${quoteLiteral(subscriptionConninfo(details.right, details.right.password))}`))
            return true
          })
        )
        if (changed) yield* Effect.logInfo("engine subscription given the new credentials").pipe(Effect.annotateLogs({ connector_id: connectorId }))
        return changed
      }).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("the engine's subscription could not be given the new credentials").pipe(
            Effect.annotateLogs({ connector_id: connectorId, error: (error as { message?: string }).message ?? String(error) }),
            Effect.as(false)
          )
        )
      )
    }, dieOnSqlError)

    /**
     * Work on a set-up engine's pipeline (reset, deep reset): refused when no engine was ever made
     * (a setup in progress answers 409 from dispatch), then engine setup's prerequisites.
     */
    const startPipelineWork = (principal: Principal, connectorId: string, mode: "reset" | "deep_reset") =>
      Effect.gen(function* () {
        const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
        const record = yield* engineRecord(connector.id).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        if (Option.isNone(record) || connector.branchingEngineStatus === "not_set_up") {
          return yield* new EngineNotSetUp({ connectorId: connector.id, status: connector.branchingEngineStatus })
        }
        yield* checkPrerequisites(connector)
        const started = yield* dispatch(connector, mode)
        yield* Effect.logInfo(mode === "reset" ? "replication reset started" : "deep reset started").pipe(
          Effect.annotateLogs({ connector_id: connector.id, operation_id: started.operationId })
        )
        return started
      })

    /**
     * POST …/reset (connectors.update): a connector_reset operation that re-copies the mirror's
     * data in place from a fresh slot, keeping its schema. Branches wait meanwhile (setting_up).
     */
    const reset = Effect.fn("EngineSetup.reset")(function* (principal: Principal, connectorId: string) {
      return yield* startPipelineWork(principal, connectorId, "reset")
    }, dieOnSqlError)

    /**
     * POST …/deep-reset (connectors.update): a connector_deep_reset operation that builds a new
     * pipeline beside the active one (new slot, publication and mirror database, the DDL read
     * fresh, a full copy, readiness) while branches keep being cut from the current mirror, then
     * starts the cutover. Nothing changes for branches until the cutover.
     */
    const deepReset = Effect.fn("EngineSetup.deepReset")(function* (principal: Principal, connectorId: string) {
      return yield* startPipelineWork(principal, connectorId, "deep_reset")
    }, dieOnSqlError)

    /**
     * POST …/replication-rollback (connectors.update): a connector_replication_rollback operation
     * that makes the pipeline the last cutover replaced active again, while its grace lasts.
     */
    const rollback = Effect.fn("EngineSetup.rollback")(function* (principal: Principal, connectorId: string) {
      const connector = yield* connectors.visible(principal, connectorId, "connectors.update")
      if (connector.branchingEngineStatus === "not_set_up") return yield* new EngineNotSetUp({ connectorId: connector.id, status: connector.branchingEngineStatus })
      return yield* transaction(
        Effect.gen(function* () {
          yield* lockIdle(connector.id)
          const target = yield* pipelines.rollbackTarget(connector.id)
          if (Option.isNone(target)) return yield* new RollbackUnavailable({ connectorId: connector.id })
          const operationId = yield* startPipelineOperation({ connectorId: connector.id, orgId: connector.orgId, action: "rollback", pipelineId: target.value.id, guard: true }).pipe(
            Effect.provideService(PipelinesRepo, pipelines),
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.provideService(ConnectorOperations, operations)
          )
          return { operationId, connectorId: connector.id, status: "pending", type: "connector_replication_rollback" } as const
        })
      )
    }, dieOnSqlError)

    return { setUp, index, reset, deepReset, rollback, restart, refreshCredentials } as const
  })
}) {}
export { EngineSetupConfig, type EngineSetupJobError, type EngineSetupOptions, engineSetupJob } from "./SetupJob.js"
export { type BranchingEngineStatus, ENGINE_SETUP_JOB, EngineSetupPayload, type MirrorPlan, setupPrerequisites } from "./SetupPlan.js"
export { subscriptionConninfo } from "./PgSession.js"
export { type ReadinessCheck } from "./ReadinessEvidence.js"
