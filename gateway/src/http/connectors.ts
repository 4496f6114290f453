import { group } from "../serve/handlers.js"
import type { JsonObject } from "@bufbuild/protobuf"
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import { hasReason, type RpcError } from "@scion/kit"
import * as pb from "@scion/proto/scion/connector/v1/connector_pb"
import type { OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { type Context, Effect, Either, Schema } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import type { Upstreams } from "../Upstreams.js"
import * as C from "../connectorSchemas.js"
import { acceptedStatus, requiredFrom } from "./present.js"

/** The connector unit leaving out a required field is a bug: it throws, the edge answers 500. */
const required = requiredFrom("connector")
const iso = (ts: Timestamp | undefined) => timestampDate(required(ts, "a timestamp")).toISOString()

const checkStatuses = {
  [pb.PreflightCheckStatus.UNSPECIFIED]: undefined,
  [pb.PreflightCheckStatus.PASS]: "pass",
  [pb.PreflightCheckStatus.WARN]: "warn",
  [pb.PreflightCheckStatus.FAIL]: "fail"
} as const satisfies Record<pb.PreflightCheckStatus, "pass" | "warn" | "fail" | undefined>

const checks = (list: ReadonlyArray<pb.PreflightCheck>): Array<typeof C.PreflightCheck.Type> =>
  list.map((c) => ({ id: c.id, status: required(checkStatuses[c.status], "a check status"), message: c.message, remedy: c.remedy ?? null }))

const report = (r: pb.PreflightReport | undefined): typeof C.PreflightReport.Type => {
  const v = required(r, "report")
  return { preflight_pass: v.preflightPass, provider: v.provider, checks: checks(v.checks) }
}

const byocs = { environment: "environment", self_managed: "self_managed" } as const

// connector.proto's statuses as the interface names them; UNSPECIFIED is a contract violation.
const replicationStatuses = {
  [pb.ReplicationStatus.UNSPECIFIED]: undefined,
  [pb.ReplicationStatus.STREAMING]: "streaming",
  [pb.ReplicationStatus.CATCHING_UP]: "catching_up",
  [pb.ReplicationStatus.APPLYING_SCHEMA_CHANGE]: "applying_schema_change",
  [pb.ReplicationStatus.QUARANTINED]: "quarantined",
  [pb.ReplicationStatus.STOPPED]: "stopped"
} as const satisfies Record<pb.ReplicationStatus, typeof C.Replication.Type["status"] | undefined>

const indexingStatuses = {
  [pb.IndexingStatus.UNSPECIFIED]: undefined,
  [pb.IndexingStatus.NOT_INDEXED]: "not_indexed",
  [pb.IndexingStatus.INDEXING]: "indexing",
  [pb.IndexingStatus.INDEXED]: "indexed",
  [pb.IndexingStatus.FAILED]: "failed"
} as const satisfies Record<pb.IndexingStatus, string | undefined>

const engineStatuses = {
  [pb.BranchingEngineStatus.UNSPECIFIED]: undefined,
  [pb.BranchingEngineStatus.NOT_SET_UP]: "not_set_up",
  [pb.BranchingEngineStatus.SETTING_UP]: "setting_up",
  [pb.BranchingEngineStatus.READY]: "ready",
  [pb.BranchingEngineStatus.DEGRADED]: "degraded",
  [pb.BranchingEngineStatus.FAILED_VALIDATION]: "failed_validation",
  [pb.BranchingEngineStatus.FAILED]: "failed"
} as const satisfies Record<pb.BranchingEngineStatus, string | undefined>

const readinessStatuses = {
  [pb.ReadinessCheckStatus.UNSPECIFIED]: undefined,
  [pb.ReadinessCheckStatus.PASS]: "pass",
  [pb.ReadinessCheckStatus.FAIL]: "fail"
} as const satisfies Record<pb.ReadinessCheckStatus, typeof C.ReadinessCheck.Type["status"] | undefined>

const quarantineStatuses = {
  [pb.QuarantineEntryStatus.UNSPECIFIED]: undefined,
  [pb.QuarantineEntryStatus.QUARANTINED]: "quarantined",
  [pb.QuarantineEntryStatus.RELEASED]: "released"
} as const satisfies Record<pb.QuarantineEntryStatus, typeof C.QuarantineEntry.Type["status"] | undefined>

const schemaChangeStatuses = {
  [pb.SchemaChangeStatus.UNSPECIFIED]: undefined,
  [pb.SchemaChangeStatus.APPLIED]: "applied",
  [pb.SchemaChangeStatus.SKIPPED]: "skipped",
  [pb.SchemaChangeStatus.RECONCILED]: "reconciled",
  [pb.SchemaChangeStatus.FAILED]: "failed"
} as const satisfies Record<pb.SchemaChangeStatus, typeof C.SchemaChange.Type["status"] | undefined>

/** An accepted operation's status; the handle schemas narrow it further where the interface does. */
const accepted = <S extends "pending" | "running" | "completed" | "failed">(status: OperationStatus, allowed: ReadonlyArray<S>): S => acceptedStatus("connector", status, allowed)
const schemaFollows = { capture: "capture", reconcile: "reconcile" } as const satisfies Record<string, typeof C.Replication.Type["schema_follow"]>

const replication = (r: pb.ReplicationState): typeof C.Replication.Type => ({
  status: required(replicationStatuses[r.status], "a replication status"),
  lag_bytes: r.lagBytes === undefined ? null : Number(r.lagBytes),
  last_applied_at: r.lastAppliedAt === undefined ? null : iso(r.lastAppliedAt),
  active_pipeline_id: r.activePipelineId,
  schema_follow: required(schemaFollows[r.schemaFollow as keyof typeof schemaFollows], "a schema follow mode"),
  measured_at: iso(r.measuredAt)
})

const createdConnector = (c: pb.Connector | undefined): typeof C.CreatedConnector.Type => {
  const v = required(c, "connector")
  return {
    connector_id: v.connectorId,
    org_id: v.orgId,
    project_id: v.projectId ?? null,
    name: v.name,
    service_name: v.serviceName,
    connector_category: v.connectorCategory,
    schema_version: v.schemaVersion,
    selection_schema_version: v.selectionSchemaVersion ?? null,
    selected_schema_version: v.selectedSchemaVersion,
    last_indexed_version: v.lastIndexedVersion,
    selected_entity_paths: v.selectedEntityPaths,
    selected_schema_structure: v.selectedSchemaStructure ?? null,
    indexing_status: required(indexingStatuses[v.indexingStatus], "an indexing status"),
    branching_engine_status: required(engineStatuses[v.branchingEngineStatus], "a branching engine status"),
    byoc: v.byoc === undefined ? null : required(byocs[v.byoc as keyof typeof byocs], "a known byoc"),
    use_environment: v.useEnvironment,
    private_link_id: v.privateLinkId ?? null,
    environment_id: v.environmentId ?? null,
    replica_identity_preflight: v.replicaIdentityPreflight ?? null,
    needs_reselection: v.needsReselection,
    needs_reindex: v.needsReindex,
    source_provider: v.sourceProvider ?? null,
    can_update: v.canUpdate,
    can_delete: v.canDelete,
    deletion_locked: v.deletionLocked,
    replication: v.replication === undefined ? null : replication(v.replication),
    created_by: v.createdBy ?? null,
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt)
  }
}

const connector = (c: pb.Connector | undefined): typeof C.Connector.Type => ({
  ...createdConnector(c),
  schema_structure: required(c, "connector").schemaStructure ?? null
})

/** Only a JSON object travels as a Struct; anything else reaches the unit as missing (its 400). */
const struct = (value: unknown): JsonObject | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined

const decodeReport = Schema.decodeUnknownSync(Schema.parseJson(C.PreflightReport))

/**
 * A failed gate arrives as FAILED_PRECONDITION / PREFLIGHT_FAILED with the report in the error's
 * metadata; it leaves the call as a Left so the handler answers 422 with the report.
 */
const gated = <A>(call: Effect.Effect<A, RpcError>): Effect.Effect<Either.Either<A, RpcError>, RpcError> =>
  call.pipe(
    Effect.map(Either.right),
    Effect.catchIf(
      (e) => hasReason(e, "PREFLIGHT_FAILED"),
      (e) => Effect.succeed(Either.left(e))
    )
  )

const answerGate = <A, B>(outcome: Either.Either<A, RpcError>, ok: (a: A) => B): Effect.Effect<B, C.PreflightNotPassed> =>
  Either.match(outcome, {
    onRight: (a) => Effect.succeed(ok(a)),
    onLeft: (e) => Effect.fail(new C.PreflightNotPassed({ detail: e.message, preflight: decodeReport(required(e.metadata.preflight_report, "preflight_report")) }))
  })

const decodePrerequisites = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(C.PreflightCheck)))

/** A failed discovery prerequisite arrives with the checks in the metadata: 422 with them. */
const prerequisitesNotMet = (e: RpcError) =>
  new C.DiscoveryPrerequisitesNotMet({ detail: e.message, prerequisites: decodePrerequisites(required(e.metadata.prerequisites, "prerequisites")) })

const isSetupPrerequisites = (e: RpcError) => hasReason(e, "ENGINE_SETUP_PREREQUISITES_FAILED")
const setupPrerequisitesNotMet = (e: RpcError) =>
  new C.EngineSetupPrerequisitesNotMet({ detail: e.message, prerequisites: decodePrerequisites(required(e.metadata.prerequisites, "prerequisites")) })

const handleTypes = {
  connector_engine_setup: "connector_engine_setup",
  connector_rollout: "connector_rollout",
  connector_reset: "connector_reset",
  connector_deep_reset: "connector_deep_reset",
  connector_replication_rollback: "connector_replication_rollback"
} as const

/** A started operation answers 202 with its handle; nothing to start answers the connector and why. */
const operationHandle = (h: pb.OperationHandle | undefined): typeof C.ConnectorOperationHandle.Type => {
  const v = required(h, "operation handle")
  return {
    operation_id: v.operationId,
    resource_id: v.resourceId,
    status: accepted(v.status, ["pending", "running", "completed", "failed"] as const),
    type: required(handleTypes[v.type as keyof typeof handleTypes], "a known type")
  }
}

const startedOrConnector = (r: pb.SetUpEngineResponse | pb.IndexConnectorResponse): typeof C.ConnectorOperationHandle.Type | typeof C.ConnectorWithMessage.Type => {
  switch (r.outcome.case) {
    case "started":
      return operationHandle(r.outcome.value)
    case "connector":
      return { ...connector(r.outcome.value), message: r.message }
    default:
      throw new Error("connector response is missing an outcome")
  }
}

/**
 * Reset and deep reset: 202 with the handle; the 422s of engine setup's prerequisites and of an
 * engine never set up.
 */
const pipelineWork = (call: (u: Context.Tag.Service<Upstreams>) => Effect.Effect<pb.ResetReplicationResponse | pb.DeepResetReplicationResponse, RpcError>) =>
  asCaller((u) =>
    call(u).pipe(
      Effect.map(Either.right),
      Effect.catchIf((e) => isSetupPrerequisites(e) || hasReason(e, "ENGINE_NOT_SET_UP"), (e) => Effect.succeed(Either.left(e)))
    )
  ).pipe(
    Effect.flatMap((outcome) =>
      Either.match(outcome, {
        onLeft: (e): Effect.Effect<never, C.EngineSetupPrerequisitesNotMet | C.EngineNotSetUp> =>
          Effect.fail(hasReason(e, "ENGINE_NOT_SET_UP") ? new C.EngineNotSetUp({ detail: e.message }) : setupPrerequisitesNotMet(e)),
        onRight: (r) => Effect.succeed(operationHandle(r.started))
      })
    )
  )

const quarantineEntry = (e: pb.QuarantineEntry): typeof C.QuarantineEntry.Type => ({
  quarantine_id: e.quarantineId,
  connector_id: e.connectorId,
  status: required(quarantineStatuses[e.status], "a quarantine status"),
  reason: e.reason,
  detail: e.detail,
  quarantined_at: iso(e.quarantinedAt),
  released_at: e.releasedAt === undefined ? null : iso(e.releasedAt)
})


export const ConnectorsLive = group(Api, "connectors", (handlers) =>
  handlers
    .handle("preflight", ({ payload }) =>
      asCaller((u) =>
        u.connectors.preflight({
          orgId: payload.org_id ?? "",
          serviceName: payload.service_name,
          connectionDetails: struct(payload.connection_details),
          ...(payload.environment_id != null ? { environmentId: payload.environment_id } : {}),
          ...(payload.private_link_id != null ? { privateLinkId: payload.private_link_id } : {})
        })
      ).pipe(Effect.map((r) => report(r.report)))
    )
    .handle("create", ({ payload }) =>
      asCaller((u) =>
        gated(
          u.connectors.createConnector({
            orgId: payload.org_id ?? "",
            serviceName: payload.service_name,
            connectionDetails: struct(payload.connection_details),
            useEnvironment: payload.use_environment === true,
            ...(payload.project_id != null ? { projectId: payload.project_id } : {}),
            ...(payload.name != null ? { name: payload.name } : {}),
            ...(payload.byoc != null ? { byoc: payload.byoc } : {}),
            ...(payload.environment_id != null ? { environmentId: payload.environment_id } : {}),
            ...(payload.private_link_id != null ? { privateLinkId: payload.private_link_id } : {})
          })
        )
      ).pipe(Effect.flatMap((outcome) => answerGate(outcome, (r) => createdConnector(r.connector))))
    )
    .handle("list", ({ urlParams }) =>
      asCaller((u) =>
        u.connectors.listConnectors({
          orgId: urlParams.org_id,
          ...(urlParams.connector_category !== undefined ? { connectorCategory: urlParams.connector_category } : {}),
          ...(urlParams.service_name !== undefined ? { serviceName: urlParams.service_name } : {})
        })
      ).pipe(Effect.map((r) => ({ connectors: r.connectors.map(connector) })))
    )
    .handle("get", ({ path }) => asCaller((u) => u.connectors.getConnector({ connectorId: path.connector_id })).pipe(Effect.map((r) => connector(r.connector))))
    .handle("update", ({ path, payload }) =>
      asCaller((u) =>
        gated(
          u.connectors.updateConnector({
            connectorId: path.connector_id,
            ...(payload.name !== undefined ? { name: payload.name } : {}),
            // Sent but not an object: an empty Struct, which the unit refuses as invalid details (400).
            ...(payload.connection_details !== undefined ? { connectionDetails: struct(payload.connection_details) ?? {} } : {})
          })
        )
      ).pipe(Effect.flatMap((outcome) => answerGate(outcome, (r) => connector(r.connector))))
    )
    .handle("connectionDetails", ({ path }) =>
      asCaller((u) => u.connectors.getConnectionDetails({ connectorId: path.connector_id })).pipe(
        Effect.map((r) => required(r.connectionDetails, "connection_details") as Record<string, unknown>)
      )
    )
    .handle("discover", ({ path }) =>
      asCaller((u) =>
        u.connectors.discoverConnector({ connectorId: path.connector_id }).pipe(
          Effect.map(Either.right),
          Effect.catchIf(
            (e) => hasReason(e, "DISCOVERY_PREREQUISITES_FAILED"),
            (e) => Effect.succeed(Either.left(e))
          )
        )
      ).pipe(
        Effect.flatMap((outcome) =>
          Either.match(outcome, {
            onLeft: (e) => Effect.fail(prerequisitesNotMet(e)),
            onRight: (r) =>
              Effect.succeed({
                operation_id: r.operationId,
                resource_id: r.resourceId,
                status: accepted(r.status, ["pending", "running"] as const),
                type: "connector_discovery" as const,
                joined: r.joined,
                prerequisites: checks(r.prerequisites),
                databases: r.databases
              })
          })
        )
      )
    )
    .handle("replicaIdentityDecisions", ({ path, payload }) =>
      asCaller((u) => u.connectors.setReplicaIdentityDecisions({ connectorId: path.connector_id, decisions: payload.decisions as JsonObject })).pipe(
        Effect.map((r) => connector(r.connector))
      )
    )
    .handle("grantScript", ({ path }) =>
      asCaller((u) =>
        u.connectors.getGrantScript({ connectorId: path.connector_id }).pipe(
          Effect.map(Either.right),
          Effect.catchIf(
            (e) => hasReason(e, "GRANT_SCRIPT_PREREQUISITES_FAILED"),
            (e) => Effect.succeed(Either.left(e))
          )
        )
      ).pipe(
        Effect.flatMap((outcome) =>
          Either.match(outcome, {
            onLeft: (e) => Effect.fail(new C.GrantScriptNotAvailable({ detail: e.message })),
            onRight: (r) =>
              Effect.succeed({
                sql: r.sql,
                source_provider: r.sourceProvider,
                replication_username: r.replicationUsername,
                schemas_per_database: Object.fromEntries(Object.entries(r.schemasPerDatabase).map(([db, names]) => [db, names.names]))
              })
          })
        )
      )
    )
    .handle("delete", ({ path, urlParams }) =>
      asCaller((u) => u.connectors.deleteConnector({ connectorId: path.connector_id, force: urlParams.force === "true" })).pipe(
        Effect.map((r) => ({
          operation_id: r.operationId,
          resource_id: r.resourceId,
          status: accepted(r.status, ["pending"] as const),
          type: "connector_delete" as const
        }))
      )
    )
    .handle("lockDeletion", ({ path }) =>
      asCaller((u) => u.connectors.lockDeletion({ connectorId: path.connector_id })).pipe(Effect.map((r) => connector(r.connector)))
    )
    .handle("unlockDeletion", ({ path }) =>
      asCaller((u) => u.connectors.unlockDeletion({ connectorId: path.connector_id })).pipe(Effect.map((r) => connector(r.connector)))
    )
    .handle("engineSetup", ({ path }) =>
      asCaller((u) => u.connectors.setUpEngine({ connectorId: path.connector_id }).pipe(Effect.map(Either.right), Effect.catchIf(isSetupPrerequisites, (e) => Effect.succeed(Either.left(e))))).pipe(
        Effect.flatMap((outcome) => Either.match(outcome, { onLeft: (e) => Effect.fail(setupPrerequisitesNotMet(e)), onRight: (r) => Effect.succeed(startedOrConnector(r)) }))
      )
    )
    .handle("index", ({ path }) =>
      asCaller((u) => u.connectors.indexConnector({ connectorId: path.connector_id }).pipe(Effect.map(Either.right), Effect.catchIf(isSetupPrerequisites, (e) => Effect.succeed(Either.left(e))))).pipe(
        Effect.flatMap((outcome) => Either.match(outcome, { onLeft: (e) => Effect.fail(setupPrerequisitesNotMet(e)), onRight: (r) => Effect.succeed(startedOrConnector(r)) }))
      )
    )
    .handle("reset", ({ path }) => pipelineWork((u) => u.connectors.resetReplication({ connectorId: path.connector_id })))
    .handle("deepReset", ({ path }) => pipelineWork((u) => u.connectors.deepResetReplication({ connectorId: path.connector_id })))
    .handle("replicationRollback", ({ path }) =>
      asCaller((u) =>
        u.connectors.rollbackReplication({ connectorId: path.connector_id }).pipe(
          Effect.map(Either.right),
          Effect.catchIf((e) => hasReason(e, "ROLLBACK_UNAVAILABLE") || hasReason(e, "ENGINE_NOT_SET_UP"), (e) => Effect.succeed(Either.left(e)))
        )
      ).pipe(
        Effect.flatMap((outcome) =>
          Either.match(outcome, {
            onLeft: (e): Effect.Effect<never, C.RollbackUnavailable | C.EngineNotSetUp> =>
              Effect.fail(hasReason(e, "ENGINE_NOT_SET_UP") ? new C.EngineNotSetUp({ detail: e.message }) : new C.RollbackUnavailable({ detail: e.message })),
            onRight: (r) => Effect.succeed(operationHandle(r.started))
          })
        )
      )
    )
    .handle("readinessChecks", ({ path, urlParams }) =>
      asCaller((u) =>
        u.connectors.listReadinessChecks({
          connectorId: path.connector_id,
          ...(urlParams.attempt_id !== undefined ? { attemptId: urlParams.attempt_id } : {}),
          ...(urlParams.check_name !== undefined ? { checkName: urlParams.check_name } : {}),
          onlyFailed: urlParams.only_failed === "true",
          limit: urlParams.limit ?? 500,
          offset: urlParams.offset ?? 0
        })
      ).pipe(
        Effect.map((r) => ({
          checks: r.checks.map((c) => ({
            attempt_id: c.attemptId,
            check_name: c.checkName,
            table_path: c.tablePath,
            status: required(readinessStatuses[c.status], "a check status"),
            message: c.message,
            pod_name: c.podName,
            checked_at: iso(c.checkedAt)
          }))
        }))
      )
    )
    .handle("readinessAttempts", ({ path, urlParams }) =>
      asCaller((u) => u.connectors.listReadinessAttempts({ connectorId: path.connector_id, limit: urlParams.limit ?? 50 })).pipe(
        Effect.map((r) => ({
          attempts: r.attempts.map((a) => ({
            attempt_id: a.attemptId,
            total_checks: a.totalChecks,
            passed_checks: a.passedChecks,
            failed_checks: a.failedChecks,
            latest_checked_at: iso(a.latestCheckedAt),
            pod_name: a.podName
          }))
        }))
      )
    )
    .handle("schemaChanges", ({ path, urlParams }) =>
      asCaller((u) => u.connectors.listSchemaChanges({ connectorId: path.connector_id, limit: urlParams.limit ?? 500, offset: urlParams.offset ?? 0 })).pipe(
        Effect.map((r) => ({
          changes: r.changes.map((c) => ({
            change_id: c.changeId,
            mode: required(c.mode === "captured" || c.mode === "reconciled" ? c.mode : undefined, "a schema change mode"),
            command_tag: c.commandTag,
            object_identity: c.objectIdentity ?? null,
            statement: c.statement ?? null,
            status: required(schemaChangeStatuses[c.status], "a schema change status"),
            actions: [...c.actions],
            error: c.error ?? null,
            tables_added: [...c.tablesAdded],
            source_committed_at: c.sourceCommittedAt !== undefined ? iso(c.sourceCommittedAt) : null,
            applied_at: iso(c.appliedAt)
          }))
        }))
      )
    )
    .handle("quarantine", ({ path }) =>
      asCaller((u) => u.connectors.listQuarantineEntries({ connectorId: path.connector_id })).pipe(Effect.map((r) => ({ entries: r.entries.map(quarantineEntry) })))
    )
    .handle("releaseQuarantine", ({ path }) =>
      asCaller((u) => u.connectors.releaseQuarantineEntry({ connectorId: path.connector_id, quarantineId: path.quarantine_id })).pipe(
        Effect.map((r) => quarantineEntry(required(r.entry, "entry")))
      )
    )
    .handle("selection", ({ path, payload }) =>
      asCaller((u) => u.connectors.setSelection({ connectorId: path.connector_id, selectedPaths: [...payload.selected_paths] })).pipe(
        Effect.map((r) => connector(r.connector))
      )
    )
)
