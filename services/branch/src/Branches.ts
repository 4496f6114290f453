import { SqlClient } from "@effect/sql"
import { enqueueJob, makeId, newOperationId, type Principal, transactional, PostgresPools, tracedFn } from "@scion/kit"
import { Clock, Effect, Fiber, FiberSet, Option, Redacted } from "effect"
import { OrgAccess } from "./Access.js"
import { BranchOperations, type OperationState } from "./BranchOperations.js"
import { BranchesRepo } from "./BranchesRepo.js"
import {
  BranchNameTaken,
  BranchNotActive,
  BranchNotFound,
  BranchProtected,
  ResetInProgress,
  ConnectorNotFound,
  CreateInProgress,
  DeleteInProgress,
  EngineAccessUnavailable,
  EngineNotReady,
  IdempotencyKeyReused,
  MaskingIncomplete,
  PermissionDenied
} from "./domain/errors.js"
import {
  type Branch,
  type BranchPatch,
  type BranchUrls,
  checkBranchName,
  checkExpiry,
  type ColumnRef,
  columnKey,
  type CreateInput,
  engineNamesOf,
  fingerprintOf,
  IDEMPOTENCY_WINDOW_HOURS,
  type MaskingConfig,
  noUrls,
  uncoveredColumns,
  urlsOf,
  validateCreate,
  validateMaskingPolicy,
  validateMaskingRules
} from "./domain/models.js"
import { dropBranch, warmAdminSessions } from "./engine/EngineSql.js"
import { readCatalog } from "./engine/SchemaCatalog.js"
import { schemaDiff } from "./domain/schemaDiff.js"
import { Copier } from "./engine/Copier.js"
import { AcceptedEngines } from "./engine/AcceptedEngines.js"
import { type BranchingEngine, Engines, isBranchable } from "./engine/Engines.js"
import { type PasswordEnvelope, Passwords } from "./Passwords.js"
import { PlanLimits, requireRoomForInserted } from "./PlanLimits.js"
import { Snapshots } from "./Snapshots.js"

/** The jobs' unit and types: subjects `jobs.branch.create` and `jobs.branch.delete`. */
export const CREATE_JOB = { unit: "branch", type: "create" } as const
export const DELETE_JOB = { unit: "branch", type: "delete" } as const
export const RESET_JOB = { unit: "branch", type: "reset" } as const



export interface Handle {
  readonly operationId: string
  readonly branchId: string
  readonly status: OperationState
  readonly replayed: boolean
}

export interface BranchView {
  readonly branch: Branch
  readonly urls: BranchUrls
}

/**
 * Branch create, read, list and delete for callers; the connectors' masking rules; and the
 * connector delete's cleanup. The connector's org comes from the connector unit
 * (EngineAccessService), never from the request; another org's connector or branch is not found.
 */
export class Branches extends Effect.Service<Branches>()("@scion/branch/Branches", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* BranchesRepo
    const engines = yield* Engines
    const accepted = yield* AcceptedEngines
    const access = yield* OrgAccess
    const operations = yield* BranchOperations
    const passwords = yield* Passwords
    const pools = yield* PostgresPools
    const copier = yield* Copier
    const limits = yield* PlanLimits
    const snapshots = yield* Snapshots
    const transaction = transactional(sql)
    /** Work a request starts and does not wait for (the engine's logins ahead of a job); ends with the service. */
    const background = yield* FiberSet.make()
    /**
     * The engine logins a just-accepted job's copy will wait on, started as the request is answered
     * (a no-op when the pool holds them; they would otherwise wait at its copy batch): the admin
     * sessions, and the session on the mirror its batch checks and pauses it on.
     */
    const warmForJob = (engine: BranchingEngine) =>
      Effect.zipRight(FiberSet.run(background, Effect.provideService(warmAdminSessions(engine), PostgresPools, pools)), copier.warmMirror(engine))

    /** The connector's engine if the caller holds the permission in its org; other orgs' connectors are not found. */
    const visibleConnector = (principal: Principal, connectorId: string, permission: "branches.read" | "branches.create" | "connectors.update") =>
      Effect.gen(function* () {
        const engine = yield* engines.get(connectorId)
        yield* access.require(principal, engine.orgId, permission).pipe(Effect.catchTag("NotAMember", () => Effect.fail(new ConnectorNotFound({ connectorId }))))
        return engine
      })

    const visibleBranch = (principal: Principal, branchId: string, permission: "branches.read" | "branches.create" | "branches.delete") =>
      Effect.gen(function* () {
        const found = yield* repo.findWithEnvelope(branchId)
        if (Option.isNone(found) || found.value.branch.status === "deleted") return yield* new BranchNotFound({ branchId })
        yield* access.require(principal, found.value.branch.orgId, permission).pipe(Effect.catchTag("NotAMember", () => Effect.fail(new BranchNotFound({ branchId }))))
        return found.value
      })

    /** Whether the caller may see connection URLs in the org: branches.create (a viewer sees the branch, not its password). */
    const mayConnect = (principal: Principal, orgId: string) =>
      access.require(principal, orgId, "branches.create").pipe(
        Effect.as(true),
        Effect.catchTags({ PermissionDenied: () => Effect.succeed(false), NotAMember: () => Effect.succeed(false) })
      )

    const urlsFor = (allowed: boolean, branch: Branch, envelope: Option.Option<PasswordEnvelope>) =>
      Effect.gen(function* () {
        if (!allowed || branch.status !== "active" || Option.isNone(envelope)) return noUrls
        const password = yield* passwords.open(envelope.value, branch.id)
        return urlsOf(branch, Redacted.value(password))
      })

    const currentStatus = (operationId: string) =>
      Effect.map(operations.status(operationId), Option.getOrElse((): OperationState => "pending"))

    /**
     * POST /v1/branch/create. With an idempotency key (per org, 24 h): the same connector, service
     * type and name answers the first handle (replayed), another request is IdempotencyKeyReused.
     * The key and the connector+name are locked while deciding, so concurrent identical requests
     * make one branch; the branch row, the key, the operation and the job commit together.
     */
    const create = tracedFn("Branches.create")(function* (principal: Principal, input: CreateInput) {
      const valid = yield* validateCreate(input)
      const engine = yield* visibleConnector(principal, valid.connectorId, "branches.create")
      const orgId = engine.orgId
      const fingerprint = fingerprintOf(valid)
      // The plan's allowance travels while the transaction decides everything else.
      const allowance = yield* Effect.fork(limits.branchAllowance(orgId))
      const handle = yield* transaction(
        Effect.gen(function* () {
          if (valid.idempotencyKey !== null) {
            yield* repo.lockIdempotencyKey(orgId, valid.idempotencyKey)
            // Expired keys of the org go (so this one can be used again); the window is 24 hours.
            yield* repo.purgeExpiredKeys(orgId)
            const found = yield* repo.findKey(orgId, valid.idempotencyKey)
            if (Option.isSome(found)) {
              const record = found.value
              if (record.fingerprint !== fingerprint) return yield* new IdempotencyKeyReused({ key: valid.idempotencyKey })
              return { operationId: record.operation_id, branchId: record.branch_id, status: yield* currentStatus(record.operation_id), replayed: true } satisfies Handle
            }
          }
          // A strict masking policy: no branch while a flagged column is neither masked nor marked safe.
          const uncovered = uncoveredColumns(yield* repo.maskingConfig(engine.connectorId), engine.maskingSuggestions)
          if (uncovered.length > 0) return yield* new MaskingIncomplete({ connectorId: engine.connectorId, columns: uncovered.map(columnKey) })
          // From a snapshot: it must be the connector's and ready, and stays share-locked until commit.
          if (valid.snapshotId !== null) yield* snapshots.requireReadyForBranch(valid.snapshotId, valid.connectorId)
          // A snapshot's copy needs a running engine, not a fresh mirror.
          if (!isBranchable(engine, { allowStale: valid.allowStale || valid.snapshotId !== null })) {
            return yield* new EngineNotReady({ connectorId: engine.connectorId, status: engine.status, ...Option.match(engine.quarantine, { onNone: () => ({}), onSome: (quarantine) => ({ quarantine }) }) })
          }
          yield* repo.lockName(valid.connectorId, valid.name)
          const existing = yield* repo.liveByName(valid.connectorId, valid.name)
          if (Option.isSome(existing)) {
            const live = existing.value
            if (live.status === "creating") return yield* new CreateInProgress({ connectorId: valid.connectorId, name: valid.name, operationId: live.create_operation_id })
            return yield* new BranchNameTaken({ connectorId: valid.connectorId, name: valid.name })
          }
          const branchId = yield* makeId("br")
          const operationId = newOperationId("brc")
          // Created before the org's lock is taken, so concurrent creates in one org do not queue
          // on this call; a create refused below fails it again as the transaction rolls back.
          yield* operations.create({ id: operationId, orgId, resourceId: branchId, type: "branch_create" })
          const allowed = yield* Fiber.join(allowance)
          const names = engineNamesOf(branchId)
          const pooler = Option.getOrNull(engine.pooler)
          yield* repo.insert({
            id: branchId,
            org_id: orgId,
            connector_id: valid.connectorId,
            name: valid.name,
            service_type: valid.serviceType,
            database_name: names.databaseName,
            role_name: names.roleName,
            engine_host: engine.host,
            engine_port: engine.port,
            pooler_host: pooler?.host ?? null,
            pooler_port: pooler?.port ?? null,
            create_operation_id: operationId,
            allow_stale: valid.allowStale,
            consistent_with_source: valid.consistentWithSource,
            min_source_lsn: valid.minSourceLsn,
            expires_at: valid.expiresAt,
            snapshot_id: valid.snapshotId
          })
          if (valid.idempotencyKey !== null) {
            yield* repo.insertKey({
              org_id: orgId,
              key: valid.idempotencyKey,
              fingerprint,
              branch_id: branchId,
              operation_id: operationId,
              expires_at: new Date(Date.now() + IDEMPOTENCY_WINDOW_HOURS * 3600_000)
            })
          }
          yield* enqueueJob({ ...CREATE_JOB, operationId, orgId, payload: { branch_id: branchId } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          // The plan's branch limit counts the org's live branches (creating, active, deleting) and
          // snapshots, this one among them: the last step, under the org's lock held to commit.
          yield* requireRoomForInserted(repo, allowed)
          // Its job, when it starts here, acts on the answer this create acted on.
          yield* accepted.keep(operationId, engine)
          yield* Effect.logInfo("branch create started").pipe(Effect.annotateLogs({ branch_id: branchId, connector_id: valid.connectorId, operation_id: operationId }))
          return { operationId, branchId, status: "pending", replayed: false } satisfies Handle
        })
      )
      if (!handle.replayed) yield* warmForJob(engine)
      return handle
    })

    const get = tracedFn("Branches.get")(function* (principal: Principal, branchId: string) {
      const { branch, envelope } = yield* visibleBranch(principal, branchId, "branches.read")
      const allowed = branch.status === "active" && (yield* mayConnect(principal, branch.orgId))
      return { branch, urls: yield* urlsFor(allowed, branch, envelope) } satisfies BranchView
    })

    const list = tracedFn("Branches.list")(function* (principal: Principal, connectorId: string) {
      const engine = yield* visibleConnector(principal, connectorId, "branches.read")
      const branches = yield* repo.listByConnector(engine.connectorId)
      const allowed = branches.some((b) => b.branch.status === "active") && (yield* mayConnect(principal, engine.orgId))
      const views: Array<BranchView> = []
      for (const { branch, envelope } of branches) views.push({ branch, urls: yield* urlsFor(allowed, branch, envelope) })
      return views
    })

    /**
     * A branch_delete operation for the branch, in one transaction with the row going to
     * deleting; 409 while the create or another delete runs, or while the branch is protected.
     */
    const startDelete = (branch: Branch) =>
      transaction(
        Effect.gen(function* () {
          const row = yield* repo.lock(branch.id)
          if (Option.isNone(row) || row.value.status === "deleted") return yield* new BranchNotFound({ branchId: branch.id })
          if (row.value.status === "creating") return yield* new CreateInProgress({ connectorId: branch.connectorId, name: branch.name, operationId: row.value.create_operation_id })
          if (row.value.status === "deleting" && row.value.delete_operation_id !== null) {
            const status = yield* operations.status(row.value.delete_operation_id)
            if (Option.isSome(status) && (status.value === "pending" || status.value === "running")) {
              return yield* new DeleteInProgress({ branchId: branch.id, operationId: row.value.delete_operation_id })
            }
          }
          if (row.value.protected) return yield* new BranchProtected({ branchId: branch.id })
          yield* refuseWhileResetting(branch.id, row.value.reset_operation_id)
          const operationId = newOperationId("brd")
          yield* operations.create({ id: operationId, orgId: branch.orgId, resourceId: branch.id, type: "branch_delete" })
          yield* repo.update(branch.id, { status: "deleting", delete_operation_id: operationId })
          yield* enqueueJob({ ...DELETE_JOB, operationId, orgId: branch.orgId, payload: { branch_id: branch.id } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* Effect.logInfo("branch delete started").pipe(Effect.annotateLogs({ branch_id: branch.id, operation_id: operationId }))
          return { operationId, branchId: branch.id, status: "pending", replayed: false } satisfies Handle
        })
      )

    /** ResetInProgress while the branch's last reset is pending or running. */
    const refuseWhileResetting = (branchId: string, resetOperationId: string | null) =>
      resetOperationId === null
        ? Effect.void
        : Effect.flatMap(operations.status(resetOperationId), (status) =>
            Option.isSome(status) && (status.value === "pending" || status.value === "running") ? Effect.fail(new ResetInProgress({ branchId, operationId: resetOperationId })) : Effect.void
          )

    /**
     * POST /v1/branches/{id}/reset: a branch_reset operation that gives the branch the mirror's
     * current data and schema under the same database, role, password and URL (open sessions end).
     * Only an active, unprotected branch of a branchable engine; one reset at a time.
     */
    const reset = tracedFn("Branches.reset")(function* (principal: Principal, branchId: string) {
      const { branch } = yield* visibleBranch(principal, branchId, "branches.delete")
      const engine = yield* engines.get(branch.connectorId)
      if (!isBranchable(engine, { allowStale: branch.allowStale })) {
        return yield* new EngineNotReady({ connectorId: engine.connectorId, status: engine.status, ...Option.match(engine.quarantine, { onNone: () => ({}), onSome: (quarantine) => ({ quarantine }) }) })
      }
      const handle = yield* transaction(
        Effect.gen(function* () {
          const row = yield* repo.lock(branch.id)
          if (Option.isNone(row) || row.value.status === "deleted") return yield* new BranchNotFound({ branchId })
          if (row.value.status === "deleting" && row.value.delete_operation_id !== null) return yield* new DeleteInProgress({ branchId, operationId: row.value.delete_operation_id })
          if (row.value.status !== "active") return yield* new BranchNotActive({ branchId, status: row.value.status })
          if (row.value.protected) return yield* new BranchProtected({ branchId })
          yield* refuseWhileResetting(branchId, row.value.reset_operation_id)
          const operationId = newOperationId("brr")
          yield* operations.create({ id: operationId, orgId: branch.orgId, resourceId: branch.id, type: "branch_reset" })
          yield* repo.update(branch.id, { reset_operation_id: operationId })
          yield* enqueueJob({ ...RESET_JOB, operationId, orgId: branch.orgId, payload: { branch_id: branch.id } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* Effect.logInfo("branch reset started").pipe(Effect.annotateLogs({ branch_id: branch.id, operation_id: operationId }))
          return { operationId, branchId: branch.id, status: "pending", replayed: false } satisfies Handle
        })
      )
      yield* warmForJob(engine)
      return handle
    })

    /**
     * GET /v1/branches/{id}/schema-diff: the statements that take the mirror's schema to the
     * branch's (what a migration run on the branch did), read from both catalogs on the engine.
     */
    const schemaDiffOf = tracedFn("Branches.schemaDiff")(function* (principal: Principal, branchId: string) {
      const { branch } = yield* visibleBranch(principal, branchId, "branches.read")
      if (branch.status !== "active") return yield* new BranchNotActive({ branchId, status: branch.status })
      const engine = yield* engines.get(branch.connectorId)
      const [mirror, copy] = yield* Effect.all([readCatalog(engine, engine.mirrorDatabase), readCatalog(engine, branch.databaseName)], { concurrency: 2 }).pipe(
        Effect.mapError((failure) => new EngineAccessUnavailable({ cause: failure.message }))
      )
      return schemaDiff(mirror, copy)
    })

    /** DELETE /v1/branches/{id}. */
    const remove = tracedFn("Branches.delete")(function* (principal: Principal, branchId: string) {
      const { branch } = yield* visibleBranch(principal, branchId, "branches.delete")
      return yield* startDelete(branch)
    })

    /**
     * PATCH /v1/branches/{id}: name, protected, expires_at (null clears it). The URL does not
     * change with the name (the database is named after the id). branches.create, as for making one.
     */
    const update = tracedFn("Branches.update")(function* (principal: Principal, branchId: string, patch: BranchPatch) {
      const { branch } = yield* visibleBranch(principal, branchId, "branches.create")
      const name = patch.name === undefined ? undefined : yield* checkBranchName(patch.name.trim())
      const expiresAt = patch.expiresAt === undefined || patch.expiresAt === null ? patch.expiresAt : yield* checkExpiry(patch.expiresAt, yield* Clock.currentTimeMillis)
      yield* transaction(
        Effect.gen(function* () {
          const row = yield* repo.lock(branch.id)
          if (Option.isNone(row) || row.value.status === "deleted") return yield* new BranchNotFound({ branchId })
          if (row.value.status === "deleting" && row.value.delete_operation_id !== null) {
            return yield* new DeleteInProgress({ branchId, operationId: row.value.delete_operation_id })
          }
          if (name !== undefined && name !== branch.name) {
            // The same lock the create takes for a name: a rename and a create cannot both win it.
            yield* repo.lockName(branch.connectorId, name)
            if (yield* repo.nameTaken(branch.connectorId, name, branch.id)) return yield* new BranchNameTaken({ connectorId: branch.connectorId, name })
          }
          yield* repo.update(branch.id, {
            ...(name !== undefined ? { name } : {}),
            ...(patch.protected !== undefined ? { protected: patch.protected } : {}),
            ...(expiresAt !== undefined ? { expires_at: expiresAt } : {})
          })
        })
      )
      yield* Effect.logInfo("branch updated").pipe(Effect.annotateLogs({ branch_id: branchId }))
      return yield* get(principal, branchId)
    })

    /**
     * The expiry sweeper's pass: a branch_delete for each expired branch (active or failed, not
     * protected), as the platform. Replicas may sweep together: the row lock lets one start it,
     * the others see the delete in progress.
     */
    const deleteExpired = Effect.gen(function* () {
      const due = yield* repo.expired(50)
      for (const id of due) {
        const branch = yield* repo.find(id)
        if (Option.isNone(branch)) continue
        yield* startDelete(branch.value).pipe(
          Effect.tap((handle) => Effect.logInfo("expired branch deleted").pipe(Effect.annotateLogs({ branch_id: id, operation_id: handle.operationId }))),
          Effect.catchAll((error) => Effect.logWarning("deleting an expired branch did not start").pipe(Effect.annotateLogs({ branch_id: id, reason: error._tag })))
        )
      }
      return due.length
    }).pipe(Effect.withSpan("Branches.deleteExpired"))

    /**
     * The connector delete's first step (service principals only): drops every branch database
     * and role of the connector and marks the branches deleted. Idempotent; an engine already
     * gone leaves nothing to drop.
     */
    const removeConnectorBranches = tracedFn("Branches.removeConnectorBranches")(function* (principal: Principal, connectorId: string) {
      if (principal.kind !== "service") return yield* new PermissionDenied({ orgId: "-", permission: "service principal" })
      // The connector's snapshots go with its branches.
      yield* snapshots.removeForConnector(principal, connectorId)
      const live = yield* repo.liveOnConnector(connectorId)
      if (live.length === 0) return 0
      const engine = yield* engines.get(connectorId).pipe(
        Effect.map(Option.some),
        Effect.catchTag("ConnectorNotFound", () => Effect.succeed(Option.none()))
      )
      let deleted = 0
      for (const branch of live) {
        if (Option.isSome(engine) && engine.value.host !== "" && engine.value.port > 0) {
          yield* dropBranch(engine.value, branch.databaseName, branch.roleName).pipe(
            Effect.provideService(PostgresPools, pools),
            Effect.mapError((e) => new EngineAccessUnavailable({ cause: `dropping branch ${branch.id}: ${e.message}` }))
          )
        }
        yield* repo.update(branch.id, { status: "deleted", deleted_at: new Date(), password_envelope: null })
        deleted++
      }
      yield* Effect.logInfo("connector branches deleted").pipe(Effect.annotateLogs({ connector_id: connectorId, deleted }))
      return deleted
    })

    const getMaskingRules = tracedFn("Branches.getMaskingRules")(function* (principal: Principal, connectorId: string) {
      const engine = yield* visibleConnector(principal, connectorId, "branches.read")
      const { rules, policy, safeColumns } = yield* repo.maskingConfig(engine.connectorId)
      // Discovery's suggestions for columns no rule covers and no one marked safe: shown, applied
      // only once PUT as rules. They follow the source's schema changes.
      const covered = new Set([...rules.map(columnKey), ...safeColumns.map(columnKey)])
      const suggested = engine.maskingSuggestions.filter((s) => !covered.has(columnKey(s)))
      return { rules, suggested, policy, safeColumns }
    })

    const setMaskingRules = tracedFn("Branches.setMaskingRules")(function* (
      principal: Principal,
      connectorId: string,
      input: {
        readonly rules: ReadonlyArray<{ schema: string; table: string; column: string; method: string }>
        readonly policy: string | undefined
        readonly safeColumns: ReadonlyArray<ColumnRef>
      }
    ) {
      const valid = yield* validateMaskingRules(input.rules)
      const { policy, safeColumns } = yield* validateMaskingPolicy(input.policy, input.safeColumns)
      const engine = yield* visibleConnector(principal, connectorId, "connectors.update")
      const config: MaskingConfig = { rules: valid, policy, safeColumns }
      yield* repo.replaceMaskingConfig(engine.connectorId, engine.orgId, config)
      return config
    })

    return { create, get, list, delete: remove, update, reset, schemaDiff: schemaDiffOf, deleteExpired, removeConnectorBranches, getMaskingRules, setMaskingRules } as const
  })
}) {}
