import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { Caller, effectService, operationStatusOf } from "@scion/kit"
import {
  type ConnectorSchema,
  ConnectorService,
  PreflightCheckStatus,
  type PreflightReportSchema
} from "@scion/proto/scion/connector/v1/connector_pb"
import { Effect, Option, Redacted } from "effect"
import { Connectors, type ConnectorView } from "../connectors/Connectors.js"
import { Deletion } from "../connectors/Deletion.js"
import { Discovery } from "../connectors/Discovery.js"
import type { CheckStatus, PreflightReport } from "../connectors/Preflight.js"
import { type ConnectorError, EngineAuthorityNotConfigured, EngineAuthorityUnavailable, toWireError, Unauthenticated } from "../domain/errors.js"
import { EngineProvisioner } from "../engine/EngineProvisioner.js"
import { EngineSetup, type SetupStarted } from "../engine/EngineSetup.js"
import { Quarantine, type QuarantineEntryRow } from "../engine/Quarantine.js"
import { DEFAULT_ATTEMPTS_LIMIT, DEFAULT_CHECKS_LIMIT, Readiness } from "../engine/Readiness.js"
import { DEFAULT_SCHEMA_CHANGES_LIMIT, SchemaChanges } from "../replication/SchemaFollower.js"
import {
  engineStatusToProto,
  indexingStatusToProto,
  quarantineStatusToProto,
  readinessStatusToProto,
  replicationStatusToProto,
  schemaChangeStatusToProto
} from "./statuses.js"

const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

const statusToProto = {
  pass: PreflightCheckStatus.PASS,
  warn: PreflightCheckStatus.WARN,
  fail: PreflightCheckStatus.FAIL
} as const satisfies Record<CheckStatus, PreflightCheckStatus>

export const reportToProto = (r: PreflightReport): MessageInitShape<typeof PreflightReportSchema> => ({
  preflightPass: r.preflight_pass,
  provider: r.provider,
  checks: r.checks.map((c) => ({ id: c.id, status: statusToProto[c.status], message: c.message, ...(c.remedy !== null ? { remedy: c.remedy } : {}) }))
})

/** Stored jsonb is JSON by construction. */
const json = (value: Record<string, unknown>): JsonObject => value as JsonObject

/**
 * The row for the wire. `withSchema` false for create (the interface: no schema_structure right
 * after create). The computed flags follow the Connector table.
 */
export const connectorToProto = ({ connector: c, access }: ConnectorView, withSchema: boolean): MessageInitShape<typeof ConnectorSchema> => ({
  connectorId: c.id,
  orgId: c.orgId,
  ...(c.projectId !== null ? { projectId: c.projectId } : {}),
  name: c.name,
  serviceName: c.serviceName,
  connectorCategory: c.connectorCategory,
  ...(withSchema && c.schemaStructure !== null ? { schemaStructure: json(c.schemaStructure) } : {}),
  schemaVersion: c.schemaVersion,
  ...(c.selectionSchemaVersion !== null ? { selectionSchemaVersion: c.selectionSchemaVersion } : {}),
  selectedSchemaVersion: c.selectedSchemaVersion,
  lastIndexedVersion: c.lastIndexedVersion,
  selectedEntityPaths: [...c.selectedEntityPaths],
  ...(c.selectedSchemaStructure !== null ? { selectedSchemaStructure: json(c.selectedSchemaStructure) } : {}),
  indexingStatus: indexingStatusToProto(c.indexingStatus),
  branchingEngineStatus: engineStatusToProto(c.branchingEngineStatus),
  ...(c.byoc !== null ? { byoc: c.byoc } : {}),
  useEnvironment: c.useEnvironment,
  ...(c.privateLinkId !== null ? { privateLinkId: c.privateLinkId } : {}),
  ...(c.environmentId !== null ? { environmentId: c.environmentId } : {}),
  ...(c.replicaIdentityPreflight !== null ? { replicaIdentityPreflight: json(c.replicaIdentityPreflight) } : {}),
  // Selection before discovery is impossible, so a missing snapshot never needs reselection.
  needsReselection: c.selectionSchemaVersion !== null && c.schemaVersion > c.selectionSchemaVersion,
  needsReindex: c.selectedSchemaVersion > c.lastIndexedVersion,
  canUpdate: access.canUpdate,
  canDelete: access.canDelete,
  ...(c.sourceProvider !== null ? { sourceProvider: c.sourceProvider } : {}),
  ...(c.createdBy !== null ? { createdBy: c.createdBy } : {}),
  createdAt: timestampFromDate(c.createdAt),
  updatedAt: timestampFromDate(c.updatedAt),
  deletionLocked: c.deletionLocked,
  ...(c.replication !== null
    ? {
        replication: {
          status: replicationStatusToProto(c.replication.status),
          ...(c.replication.lag_bytes !== null ? { lagBytes: BigInt(c.replication.lag_bytes) } : {}),
          ...(c.replication.last_applied_at !== null ? { lastAppliedAt: timestampFromDate(new Date(c.replication.last_applied_at)) } : {}),
          activePipelineId: c.replication.active_pipeline_id,
          schemaFollow: c.replication.schema_follow,
          measuredAt: timestampFromDate(new Date(c.replication.measured_at))
        }
      }
    : {})
})

const handle = (started: SetupStarted) => ({
  operationId: started.operationId,
  resourceId: started.connectorId,
  status: operationStatusOf(started.status),
  type: started.type
})

const quarantineToProto = (e: QuarantineEntryRow) => ({
  quarantineId: e.id,
  connectorId: e.connector_id,
  status: quarantineStatusToProto(e.status),
  reason: e.reason,
  detail: e.detail,
  quarantinedAt: timestampFromDate(e.quarantined_at),
  ...(e.released_at !== null ? { releasedAt: timestampFromDate(e.released_at) } : {})
})

/** ConnectorService as Connect routes over the Connectors service. Details are Redacted on arrival. */
export const connectorServiceRoutes = Effect.gen(function* () {
  const connectors = yield* Connectors
  const discovery = yield* Discovery
  const deletion = yield* Deletion
  const setup = yield* EngineSetup
  const readiness = yield* Readiness
  const quarantine = yield* Quarantine
  const schemaChanges = yield* SchemaChanges
  const provisioner = yield* EngineProvisioner
  return yield* effectService<typeof ConnectorService, ConnectorError, never>(
    ConnectorService,
    {
      preflight: (req) =>
        Effect.gen(function* () {
          const report = yield* connectors.preflight(yield* caller, {
            orgId: req.orgId,
            serviceName: req.serviceName,
            connectionDetails: Redacted.make<unknown>(req.connectionDetails ?? null),
            environmentId: req.environmentId,
            privateLinkId: req.privateLinkId
          })
          return { report: reportToProto(report) }
        }),
      createConnector: (req) =>
        Effect.gen(function* () {
          const view = yield* connectors.create(yield* caller, {
            orgId: req.orgId,
            projectId: req.projectId,
            name: req.name,
            serviceName: req.serviceName,
            connectionDetails: Redacted.make<unknown>(req.connectionDetails ?? null),
            byoc: req.byoc,
            useEnvironment: req.useEnvironment,
            environmentId: req.environmentId,
            privateLinkId: req.privateLinkId
          })
          return { connector: connectorToProto(view, false) }
        }),
      listConnectors: (req) =>
        Effect.gen(function* () {
          const views = yield* connectors.list(yield* caller, { orgId: req.orgId, connectorCategory: req.connectorCategory, serviceName: req.serviceName })
          return { connectors: views.map((v) => connectorToProto(v, true)) }
        }),
      getConnector: (req) => Effect.map(Effect.flatMap(caller, (p) => connectors.get(p, req.connectorId)), (v) => ({ connector: connectorToProto(v, true) })),
      updateConnector: (req) =>
        Effect.gen(function* () {
          const view = yield* connectors.update(yield* caller, {
            connectorId: req.connectorId,
            name: req.name,
            connectionDetails: req.connectionDetails === undefined ? undefined : Redacted.make<unknown>(req.connectionDetails)
          })
          // The engine's subscription follows the connector's credentials.
          if (req.connectionDetails !== undefined) yield* setup.refreshCredentials(view.connector.id)
          return { connector: connectorToProto(view, true) }
        }),
      getConnectionDetails: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => connectors.connectionDetails(p, req.connectorId)), (details) => ({ connectionDetails: details as JsonObject })),
      discoverConnector: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => discovery.discover(p, req.connectorId)), (started) => ({
          operationId: started.operationId,
          resourceId: started.connectorId,
          status: operationStatusOf(started.status),
          type: "connector_discovery",
          joined: started.joined,
          prerequisites: reportToProto({ preflight_pass: true, provider: "", checks: started.prerequisites }).checks ?? [],
          databases: [...started.databases]
        })),
      setSelection: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => discovery.select(p, { connectorId: req.connectorId, selectedPaths: req.selectedPaths })), (view) => ({
          connector: connectorToProto(view, true)
        })),
      setReplicaIdentityDecisions: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => discovery.decide(p, { connectorId: req.connectorId, decisions: req.decisions ?? {} })), (view) => ({
          connector: connectorToProto(view, true)
        })),
      getGrantScript: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => discovery.grantScript(p, req.connectorId)), (script) => ({
          sql: script.sql,
          sourceProvider: script.sourceProvider,
          replicationUsername: script.replicationUsername,
          schemasPerDatabase: Object.fromEntries(Object.entries(script.schemasPerDatabase).map(([db, names]) => [db, { names: [...names] }]))
        })),
      lockDeletion: (req) => Effect.map(Effect.flatMap(caller, (p) => deletion.lock(p, req.connectorId)), (view) => ({ connector: connectorToProto(view, true) })),
      unlockDeletion: (req) => Effect.map(Effect.flatMap(caller, (p) => deletion.unlock(p, req.connectorId)), (view) => ({ connector: connectorToProto(view, true) })),
      deleteConnector: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => deletion.delete(p, { connectorId: req.connectorId, force: req.force })), (started) => ({
          operationId: started.operationId,
          resourceId: started.connectorId,
          status: operationStatusOf(started.status),
          type: "connector_delete"
        })),
      setUpEngine: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => setup.setUp(p, req.connectorId)), (outcome) =>
          outcome._tag === "Started"
            ? { outcome: { case: "started" as const, value: handle(outcome.started) }, message: "Engine setup started" }
            : { outcome: { case: "connector" as const, value: connectorToProto(outcome.connector, true) }, message: outcome.message }
        ),
      indexConnector: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => setup.index(p, req.connectorId)), (outcome) =>
          outcome._tag === "Started"
            ? { outcome: { case: "started" as const, value: handle(outcome.started) }, message: "Rolling the selection out to the engine" }
            : { outcome: { case: "connector" as const, value: connectorToProto(outcome.connector, true) }, message: outcome.message }
        ),
      listReadinessChecks: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) =>
            readiness.checks(p, {
              connectorId: req.connectorId,
              attemptId: req.attemptId,
              checkName: req.checkName,
              onlyFailed: req.onlyFailed,
              limit: req.limit > 0 ? Math.min(req.limit, 5000) : DEFAULT_CHECKS_LIMIT,
              offset: Math.max(req.offset, 0)
            })
          ),
          (rows) => ({
            checks: rows.map((r) => ({
              attemptId: r.attempt_id,
              checkName: r.check_name,
              tablePath: r.table_path ?? "",
              status: readinessStatusToProto(r.status),
              message: r.message,
              podName: r.pod_name,
              checkedAt: timestampFromDate(r.checked_at)
            }))
          })
        ),
      listReadinessAttempts: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => readiness.attempts(p, { connectorId: req.connectorId, limit: req.limit > 0 ? Math.min(req.limit, 5000) : DEFAULT_ATTEMPTS_LIMIT })),
          (rows) => ({
            attempts: rows.map((r) => ({
              attemptId: r.attempt_id,
              totalChecks: r.total_checks,
              passedChecks: r.passed_checks,
              failedChecks: r.failed_checks,
              latestCheckedAt: timestampFromDate(r.latest_checked_at),
              podName: r.pod_name
            }))
          })
        ),
      listQuarantineEntries: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => quarantine.list(p, req.connectorId)), (entries) => ({ entries: entries.map(quarantineToProto) })),
      resetReplication: (req) => Effect.map(Effect.flatMap(caller, (p) => setup.reset(p, req.connectorId)), (started) => ({ started: handle(started) })),
      deepResetReplication: (req) => Effect.map(Effect.flatMap(caller, (p) => setup.deepReset(p, req.connectorId)), (started) => ({ started: handle(started) })),
      rollbackReplication: (req) => Effect.map(Effect.flatMap(caller, (p) => setup.rollback(p, req.connectorId)), (started) => ({ started: handle(started) })),
      // Public: no caller needed.
      getEngineCertificateAuthority: () =>
        provisioner.certificateAuthority.pipe(
          Effect.mapError((e) => new EngineAuthorityUnavailable({ reason: e.message })),
          Effect.flatMap(Option.match({ onNone: () => Effect.fail(new EngineAuthorityNotConfigured()), onSome: (certificatePem) => Effect.succeed({ certificatePem }) }))
        ),
      listSchemaChanges: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) =>
            schemaChanges.list(p, { connectorId: req.connectorId, limit: req.limit > 0 ? Math.min(req.limit, 5000) : DEFAULT_SCHEMA_CHANGES_LIMIT, offset: Math.max(req.offset, 0) })
          ),
          (rows) => ({
            changes: rows.map((r) => ({
              changeId: `sch_${r.id}`,
              mode: r.mode,
              commandTag: r.command_tag,
              ...(r.object_identity !== null ? { objectIdentity: r.object_identity } : {}),
              ...(r.statement !== null ? { statement: r.statement } : {}),
              status: schemaChangeStatusToProto(r.status),
              actions: [...r.actions],
              ...(r.error !== null ? { error: r.error } : {}),
              tablesAdded: [...r.tables_added],
              ...(r.source_committed_at !== null ? { sourceCommittedAt: timestampFromDate(r.source_committed_at) } : {}),
              appliedAt: timestampFromDate(r.applied_at)
            }))
          })
        ),
      releaseQuarantineEntry: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => quarantine.release(p, { connectorId: req.connectorId, quarantineId: req.quarantineId })), (entry) => ({
          entry: quarantineToProto(entry)
        }))
    },
    toWireError
  )
})
