import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt"
import { branchJson, branchStatusToProto, Caller, effectService, operationStatusOf, type Routes, snapshotJson, snapshotStatusToProto } from "@scion/kit"
import { BranchService, type Branch as PbBranch } from "@scion/proto/scion/branch/v1/branch_pb"
import { create, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf"
import { BranchSchema, SnapshotSchema } from "@scion/proto/scion/branch/v1/branch_pb"
import { Effect, Option } from "effect"
import { Branches, type BranchView } from "../Branches.js"
import { type BranchError, InvalidArgument, toWireError, Unauthenticated } from "../domain/errors.js"
import type { MaskingRule, Snapshot } from "../domain/models.js"
import { Snapshots } from "../Snapshots.js"

/** The verified principal of the request; none means UNAUTHENTICATED. */
const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

const ts = (d: Date | null) => (d === null ? undefined : timestampFromDate(d))

export const branchToProto = ({ branch, urls }: BranchView): MessageInitShape<typeof BranchSchema> => ({
  branchId: branch.id,
  name: branch.name,
  connectorId: branch.connectorId,
  serviceType: branch.serviceType,
  status: branchStatusToProto(branch.status),
  ...(urls.branchUrl !== null ? { branchUrl: urls.branchUrl } : {}),
  ...(urls.pooledBranchUrl !== null ? { pooledBranchUrl: urls.pooledBranchUrl } : {}),
  ...(urls.pooledBranchPrismaUrl !== null ? { pooledBranchPrismaUrl: urls.pooledBranchPrismaUrl } : {}),
  createdAt: timestampFromDate(branch.createdAt),
  readReadyAt: ts(branch.readReadyAt),
  writeReadyAt: ts(branch.writeReadyAt),
  maskedReadyAt: ts(branch.maskedReadyAt),
  orgId: branch.orgId,
  updatedAt: timestampFromDate(branch.updatedAt),
  createOperationId: branch.createOperationId,
  ...(branch.deleteOperationId !== null ? { deleteOperationId: branch.deleteOperationId } : {}),
  ...(branch.error !== null ? { error: branch.error } : {}),
  ...(branch.dataAsOf !== null ? { dataAsOf: timestampFromDate(branch.dataAsOf) } : {}),
  ...(branch.sourceLsn !== null ? { sourceLsn: branch.sourceLsn } : {}),
  protected: branch.protected,
  ...(branch.expiresAt !== null ? { expiresAt: timestampFromDate(branch.expiresAt) } : {}),
  ...(branch.snapshotId !== null ? { snapshotId: branch.snapshotId } : {})
})

export const snapshotToProto = (snapshot: Snapshot): MessageInitShape<typeof SnapshotSchema> => ({
  snapshotId: snapshot.id,
  connectorId: snapshot.connectorId,
  orgId: snapshot.orgId,
  name: snapshot.name,
  status: snapshotStatusToProto(snapshot.status),
  ...(snapshot.dataAsOf !== null ? { dataAsOf: timestampFromDate(snapshot.dataAsOf) } : {}),
  ...(snapshot.sourceLsn !== null ? { sourceLsn: snapshot.sourceLsn } : {}),
  ...(snapshot.error !== null ? { error: snapshot.error } : {}),
  createdAt: timestampFromDate(snapshot.createdAt),
  createOperationId: snapshot.createOperationId
})

/** The snapshot as the completed snapshot_create operation's result: the JSON GET answers (the kit's presenter). */
export const snapshotResult = (snapshot: Snapshot): JsonObject => ({ ...snapshotJson(create(SnapshotSchema, snapshotToProto(snapshot))) })

/**
 * The interface's Branch as the completed branch_create operation's result: the same presenter
 * the gateway answers GET and list with, over the same proto Branch.
 */
export const branchResult = (view: BranchView): JsonObject => ({ ...branchJson(create(BranchSchema, branchToProto(view))) })

const ruleToProto = (r: MaskingRule) => ({ schema: r.schema, table: r.table, column: r.column, method: r.method })

export type { PbBranch }

/** BranchService as Connect routes over the Branches service. */
export const branchRoutes = Effect.gen(function* () {
  const branches = yield* Branches
  const snapshots = yield* Snapshots
  const routes = yield* effectService<typeof BranchService, BranchError, never>(
    BranchService,
    {
      createBranch: (req) =>
        Effect.gen(function* () {
          const handle = yield* branches.create(yield* caller, {
            connectorId: req.connectorId,
            name: req.name,
            serviceType: req.serviceType,
            idempotencyKey: req.idempotencyKey,
            allowStale: req.allowStale,
            consistentWithSource: req.consistentWithSource,
            minSourceLsn: req.minSourceLsn,
            expiresAt: req.expiresAt === undefined ? undefined : timestampDate(req.expiresAt),
            ttlSeconds: req.ttlSeconds === undefined ? undefined : Number(req.ttlSeconds),
            snapshotId: req.snapshotId
          })
          return { operationId: handle.operationId, resourceId: handle.branchId, status: operationStatusOf(handle.status), replayed: handle.replayed }
        }),
      getBranch: (req) => Effect.map(Effect.flatMap(caller, (p) => branches.get(p, req.branchId)), (view) => ({ branch: branchToProto(view) })),
      listBranches: (req) => Effect.map(Effect.flatMap(caller, (p) => branches.list(p, req.connectorId)), (views) => ({ branches: views.map(branchToProto) })),
      deleteBranch: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => branches.delete(p, req.branchId)), (h) => ({ operationId: h.operationId, resourceId: h.branchId, status: operationStatusOf(h.status) })),
      updateBranch: (req) =>
        Effect.gen(function* () {
          if (req.clearExpiresAt && req.expiresAt !== undefined) {
            return yield* new InvalidArgument({ field: "expires_at", message: "Send an expiry or clear it, not both" })
          }
          const view = yield* branches.update(yield* caller, req.branchId, {
            name: req.name,
            protected: req.protected,
            expiresAt: req.clearExpiresAt ? null : req.expiresAt === undefined ? undefined : timestampDate(req.expiresAt)
          })
          return { branch: branchToProto(view) }
        }),
      getBranchSchemaDiff: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => branches.schemaDiff(p, req.branchId)), (changes) => ({
          changes: changes.map((c) => ({ kind: c.kind, schema: c.schema, ...(c.table !== null ? { table: c.table } : {}), name: c.name, sql: c.sql }))
        })),
      resetBranch: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => branches.reset(p, req.branchId)), (h) => ({ operationId: h.operationId, resourceId: h.branchId, status: operationStatusOf(h.status) })),
      deleteConnectorBranches: (req) => Effect.map(Effect.flatMap(caller, (p) => branches.removeConnectorBranches(p, req.connectorId)), (deleted) => ({ deleted })),
      getMaskingRules: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => branches.getMaskingRules(p, req.connectorId)), ({ rules, suggested, policy, safeColumns }) => ({
          rules: rules.map(ruleToProto),
          suggestedRules: suggested.map(ruleToProto),
          policy,
          safeColumns: safeColumns.map((c) => ({ ...c }))
        })),
      setMaskingRules: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => branches.setMaskingRules(p, req.connectorId, { rules: req.rules, policy: req.policy, safeColumns: req.safeColumns })),
          (config) => ({ rules: config.rules.map(ruleToProto), policy: config.policy, safeColumns: config.safeColumns.map((c) => ({ ...c })) })
        ),
      createSnapshot: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => snapshots.create(p, req.connectorId, req.name)), (h) => ({ operationId: h.operationId, resourceId: h.snapshotId, status: operationStatusOf(h.status) })),
      listSnapshots: (req) => Effect.map(Effect.flatMap(caller, (p) => snapshots.list(p, req.connectorId)), (rows) => ({ snapshots: rows.map(snapshotToProto) })),
      getSnapshot: (req) => Effect.map(Effect.flatMap(caller, (p) => snapshots.get(p, req.snapshotId)), (snapshot) => ({ snapshot: snapshotToProto(snapshot) })),
      deleteSnapshot: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => snapshots.delete(p, req.snapshotId)), (h) => ({ operationId: h.operationId, resourceId: h.snapshotId, status: operationStatusOf(h.status) }))
    },
    toWireError
  )
  return [routes] as ReadonlyArray<Routes>
})
