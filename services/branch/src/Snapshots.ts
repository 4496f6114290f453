import { SqlClient } from "@effect/sql"
import { enqueueJob, makeId, newOperationId, type Principal, transactional, PostgresPools, tracedFn } from "@scion/kit"
import { Effect, Fiber, Option } from "effect"
import { OrgAccess } from "./Access.js"
import { BranchOperations, type OperationState } from "./BranchOperations.js"
import { BranchesRepo } from "./BranchesRepo.js"
import { ConnectorNotFound, EngineAccessUnavailable, EngineNotReady, PermissionDenied, SnapshotInUse, SnapshotNameTaken, SnapshotNotFound, SnapshotNotReady } from "./domain/errors.js"
import { checkSnapshotName, type Snapshot, snapshotDatabaseOf } from "./domain/models.js"
import { dropSnapshotDatabase } from "./engine/EngineSql.js"
import { Engines, isBranchable } from "./engine/Engines.js"
import { PlanLimits, requireRoomForInserted } from "./PlanLimits.js"
import { SnapshotsRepo } from "./SnapshotsRepo.js"

/** The jobs' unit and types: subjects `jobs.branch.snapshot_create` and `jobs.branch.snapshot_delete`. */
export const SNAPSHOT_CREATE_JOB = { unit: "branch", type: "snapshot_create" } as const
export const SNAPSHOT_DELETE_JOB = { unit: "branch", type: "snapshot_delete" } as const

export interface SnapshotHandle {
  readonly operationId: string
  readonly snapshotId: string
  readonly status: OperationState
}

/**
 * Snapshots of a connector's mirror (our extension): named, immutable copies made by the copier
 * (one pause of the mirror, shared with branch creates) and kept as template databases nobody can
 * connect to, so branches are cut from them without pausing the mirror, every time from the same
 * data. Permissions as branches': branches.create to make one, branches.read to see them,
 * branches.delete to delete one; another org's connector or snapshot is not found. They count
 * against the plan's branch limit with the org's branches.
 */
export class Snapshots extends Effect.Service<Snapshots>()("@scion/branch/Snapshots", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* SnapshotsRepo
    const branches = yield* BranchesRepo
    const engines = yield* Engines
    const pools = yield* PostgresPools
    const access = yield* OrgAccess
    const operations = yield* BranchOperations
    const limits = yield* PlanLimits
    const transaction = transactional(sql)

    const visibleConnector = (principal: Principal, connectorId: string, permission: "branches.read" | "branches.create") =>
      Effect.gen(function* () {
        const engine = yield* engines.get(connectorId)
        yield* access.require(principal, engine.orgId, permission).pipe(Effect.catchTag("NotAMember", () => Effect.fail(new ConnectorNotFound({ connectorId }))))
        return engine
      })

    const visibleSnapshot = (principal: Principal, snapshotId: string, permission: "branches.read" | "branches.create" | "branches.delete") =>
      Effect.gen(function* () {
        const found = yield* repo.find(snapshotId)
        if (Option.isNone(found) || found.value.status === "deleted") return yield* new SnapshotNotFound({ snapshotId })
        yield* access.require(principal, found.value.orgId, permission).pipe(Effect.catchTag("NotAMember", () => Effect.fail(new SnapshotNotFound({ snapshotId }))))
        return found.value
      })

    const currentStatus = (operationId: string) => Effect.map(operations.status(operationId), Option.getOrElse((): OperationState => "pending"))

    /** POST /v1/connectors/{id}/snapshots: the row, the operation and the job commit together. */
    const create = tracedFn("Snapshots.create")(function* (principal: Principal, connectorId: string, rawName: string) {
      const name = yield* checkSnapshotName(rawName.trim())
      const engine = yield* visibleConnector(principal, connectorId, "branches.create")
      if (!isBranchable(engine, { allowStale: false })) {
        return yield* new EngineNotReady({ connectorId, status: engine.status, ...Option.match(engine.quarantine, { onNone: () => ({}), onSome: (quarantine) => ({ quarantine }) }) })
      }
      // The plan's allowance travels while the transaction takes the name.
      const allowance = yield* Effect.fork(limits.branchAllowance(engine.orgId))
      return yield* transaction(
        Effect.gen(function* () {
          yield* repo.lockName(connectorId, name)
          if (yield* repo.nameTaken(connectorId, name)) return yield* new SnapshotNameTaken({ connectorId, name })
          const snapshotId = yield* makeId("snap")
          const operationId = newOperationId("snc")
          // Before the org's lock, as a branch create does (a refusal below fails it again).
          yield* operations.create({ id: operationId, orgId: engine.orgId, resourceId: snapshotId, type: "snapshot_create" })
          const allowed = yield* Fiber.join(allowance)
          yield* repo.insert({ id: snapshotId, orgId: engine.orgId, connectorId, name, databaseName: snapshotDatabaseOf(snapshotId), createOperationId: operationId })
          yield* enqueueJob({ ...SNAPSHOT_CREATE_JOB, operationId, orgId: engine.orgId, payload: { snapshot_id: snapshotId } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          // Snapshots and branches share the plan's limit, and the branches' org lock: the last step.
          yield* requireRoomForInserted(branches, allowed)
          yield* Effect.logInfo("snapshot create started").pipe(Effect.annotateLogs({ snapshot_id: snapshotId, connector_id: connectorId, operation_id: operationId }))
          return { operationId, snapshotId, status: "pending" } satisfies SnapshotHandle
        })
      )
    })

    const list = tracedFn("Snapshots.list")(function* (principal: Principal, connectorId: string) {
      const engine = yield* visibleConnector(principal, connectorId, "branches.read")
      return yield* repo.listByConnector(engine.connectorId)
    })

    const get = tracedFn("Snapshots.get")(function* (principal: Principal, snapshotId: string) {
      return yield* visibleSnapshot(principal, snapshotId, "branches.read")
    })

    /**
     * DELETE /v1/snapshots/{id}: a snapshot_delete operation, in one transaction with the row going
     * to deleting. Refused while it is being made or a branch is being cut from it.
     */
    const remove = tracedFn("Snapshots.delete")(function* (principal: Principal, snapshotId: string) {
      const visible = yield* visibleSnapshot(principal, snapshotId, "branches.delete")
      return yield* transaction(
        Effect.gen(function* () {
          const row = yield* repo.lock(snapshotId, "update")
          if (Option.isNone(row) || row.value.status === "deleted") return yield* new SnapshotNotFound({ snapshotId })
          const snapshot = row.value
          if (snapshot.status === "deleting" && snapshot.deleteOperationId !== null) {
            return { operationId: snapshot.deleteOperationId, snapshotId, status: yield* currentStatus(snapshot.deleteOperationId) } satisfies SnapshotHandle
          }
          if (snapshot.status === "creating") return yield* new SnapshotNotReady({ snapshotId, status: snapshot.status })
          if (yield* repo.inUse(snapshotId)) return yield* new SnapshotInUse({ snapshotId })
          const operationId = newOperationId("snd")
          yield* operations.create({ id: operationId, orgId: visible.orgId, resourceId: snapshotId, type: "snapshot_delete" })
          yield* repo.update(snapshotId, { status: "deleting", delete_operation_id: operationId })
          yield* enqueueJob({ ...SNAPSHOT_DELETE_JOB, operationId, orgId: visible.orgId, payload: { snapshot_id: snapshotId } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* Effect.logInfo("snapshot delete started").pipe(Effect.annotateLogs({ snapshot_id: snapshotId, operation_id: operationId }))
          return { operationId, snapshotId, status: "pending" } satisfies SnapshotHandle
        })
      )
    })

    /**
     * A branch create's check inside its transaction: the snapshot exists, is the connector's, and
     * is ready; the row stays share-locked until the create commits, so no delete starts meanwhile.
     */
    const requireReadyForBranch = (snapshotId: string, connectorId: string) =>
      Effect.gen(function* () {
        const row = yield* repo.lock(snapshotId, "share")
        if (Option.isNone(row) || row.value.status === "deleted" || row.value.connectorId !== connectorId) return yield* new SnapshotNotFound({ snapshotId })
        if (row.value.status !== "ready") return yield* new SnapshotNotReady({ snapshotId, status: row.value.status })
        return row.value
      })

    /** The connector delete's cleanup: every snapshot database of the connector dropped, the rows deleted. */
    const removeForConnector = tracedFn("Snapshots.removeForConnector")(function* (principal: Principal, connectorId: string) {
      if (principal.kind !== "service") return yield* new PermissionDenied({ orgId: "-", permission: "service principal" })
      const live = yield* repo.liveOnConnector(connectorId)
      if (live.length === 0) return 0
      const engine = yield* engines.get(connectorId).pipe(
        Effect.map(Option.some),
        Effect.catchTag("ConnectorNotFound", () => Effect.succeed(Option.none()))
      )
      for (const snapshot of live) {
        if (Option.isSome(engine) && engine.value.host !== "" && engine.value.port > 0) {
          yield* dropSnapshotDatabase(engine.value, snapshot.databaseName).pipe(
            Effect.provideService(PostgresPools, pools),
            Effect.mapError((e) => new EngineAccessUnavailable({ cause: `dropping snapshot ${snapshot.id}: ${e.message}` }))
          )
        }
        yield* repo.update(snapshot.id, { status: "deleted", deleted_at: new Date() })
      }
      return live.length
    })

    return { create, list, get, delete: remove, requireReadyForBranch, removeForConnector } as const
  })
}) {}

export type { Snapshot }
