import { addResponseHeader } from "../serve/EdgeRequest.js"
import { group } from "../serve/handlers.js"
import { timestampFromMs } from "@bufbuild/protobuf/wkt"
import type * as pb from "@scion/proto/scion/branch/v1/branch_pb"
import { branchJson, hasReason, type RpcError, snapshotJson } from "@scion/kit"
import type { OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { type Context, Effect, Either } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import type { Upstreams } from "../Upstreams.js"
import * as Br from "../branchSchemas.js"
import { acceptedStatus, requiredFrom } from "./present.js"

const required = requiredFrom("branch")

const statusOf = (status: OperationStatus) => acceptedStatus("branch", status, ["pending", "running", "completed", "failed"] as const)

/** The interface's Branch: the kit's presenter, the same one the branch_create result is made with. */
export const branch = (b: pb.Branch | undefined): typeof Br.Branch.Type => branchJson(required(b, "branch"))

/** The Snapshot JSON: the kit's presenter, the same one the snapshot_create result is made with. */
const snapshot = (s: pb.Snapshot | undefined): typeof Br.Snapshot.Type => snapshotJson(required(s, "snapshot"))

const schemaDiffKinds = new Set<string>(Br.SchemaDiffChange.fields.kind.literals)
const schemaDiffKind = (kind: string) => required(schemaDiffKinds.has(kind) ? (kind as typeof Br.SchemaDiffChange.Type.kind) : undefined, "a known schema change kind")

const maskingPolicies = { permissive: "permissive", strict: "strict" } as const
const maskingPolicyOf = (policy: string) => required(maskingPolicies[policy as keyof typeof maskingPolicies], "a known masking policy")

/**
 * An operation a branch endpoint starts (reset, snapshot create): its handle, or the interface's
 * 422 {detail} when the connector's engine is not ready; every other refusal through the table.
 */
const startedUnlessEngineNotReady = <T extends "branch_reset" | "snapshot_create">(
  call: (u: Context.Tag.Service<Upstreams>) => Effect.Effect<{ readonly operationId: string; readonly resourceId: string; readonly status: OperationStatus }, RpcError>,
  type: T
) =>
  asCaller((u) =>
    call(u).pipe(
      Effect.map(Either.right),
      Effect.catchIf(
        (e) => hasReason(e, "ENGINE_NOT_READY"),
        (e) => Effect.succeed(Either.left(e))
      )
    )
  ).pipe(
    Effect.flatMap((outcome) =>
      Either.match(outcome, {
        onLeft: (e): Effect.Effect<never, Br.EngineNotReady> => Effect.fail(new Br.EngineNotReady({ detail: e.message })),
        onRight: (r) => Effect.succeed({ operation_id: r.operationId, resource_id: r.resourceId, status: statusOf(r.status), type })
      })
    )
  )

/** A replayed create carries X-Idempotency-Replay: true. */
const markReplay = addResponseHeader("x-idempotency-replay", "true")

export const BranchesLive = group(Api, "branches", (handlers) =>
  handlers
    .handle("create", ({ payload, headers }) =>
      asCaller((u) =>
        u.branches
          .createBranch({
            connectorId: payload.connector_id ?? "",
            name: payload.name ?? "",
            serviceType: payload.service_type ?? "",
            allowStale: payload.allow_stale === true,
            consistentWithSource: payload.consistent_with_source === true,
            ...(payload.min_source_lsn !== undefined ? { minSourceLsn: payload.min_source_lsn } : {}),
            ...(payload.expires_at !== undefined ? { expiresAt: timestampFromMs(payload.expires_at.epochMillis) } : {}),
            ...(payload.ttl_seconds !== undefined ? { ttlSeconds: BigInt(payload.ttl_seconds) } : {}),
            ...(payload.snapshot_id !== undefined ? { snapshotId: payload.snapshot_id } : {}),
            ...((headers["x-idempotency-key"] ?? headers["idempotency-key"]) !== undefined
              ? { idempotencyKey: headers["x-idempotency-key"] ?? headers["idempotency-key"] }
              : {})
          })
          .pipe(
            Effect.map(Either.right),
            Effect.catchIf(
              (e) => hasReason(e, "ENGINE_NOT_READY") || hasReason(e, "MASKING_INCOMPLETE"),
              (e) => Effect.succeed(Either.left(e))
            )
          )
      ).pipe(
        Effect.flatMap((outcome) =>
          Either.match(outcome, {
            onLeft: (e): Effect.Effect<never, Br.EngineNotReady | Br.MaskingIncomplete> =>
              Effect.fail(
                hasReason(e, "MASKING_INCOMPLETE")
                  ? new Br.MaskingIncomplete({ detail: e.message, columns: (e.metadata.columns ?? "").split(",").filter((c) => c !== "") })
                  : new Br.EngineNotReady({ detail: e.message })
              ),
            onRight: (r) =>
              Effect.as(r.replayed ? markReplay : Effect.void, {
                operation_id: r.operationId,
                resource_id: r.resourceId,
                status: statusOf(r.status),
                type: "branch_create" as const
              })
          })
        )
      )
    )
    .handle("list", ({ urlParams }) =>
      asCaller((u) => u.branches.listBranches({ connectorId: urlParams.connector_id })).pipe(Effect.map((r) => ({ branches: r.branches.map(branch) })))
    )
    .handle("get", ({ path }) => asCaller((u) => u.branches.getBranch({ branchId: path.branch_id })).pipe(Effect.map((r) => branch(r.branch))))
    .handle("delete", ({ path }) =>
      asCaller((u) => u.branches.deleteBranch({ branchId: path.branch_id })).pipe(
        Effect.map((r) => ({ operation_id: r.operationId, resource_id: r.resourceId, status: statusOf(r.status), type: "branch_delete" as const }))
      )
    )
    .handle("schemaDiff", ({ path }) =>
      asCaller((u) => u.branches.getBranchSchemaDiff({ branchId: path.branch_id })).pipe(
        Effect.map((r) => ({
          branch_id: path.branch_id,
          sql: r.changes.map((c) => c.sql).join("\n"),
          changes: r.changes.map((c) => ({ kind: schemaDiffKind(c.kind), schema: c.schema, table: c.table ?? null, name: c.name, sql: c.sql }))
        }))
      )
    )
    .handle("reset", ({ path }) =>
      startedUnlessEngineNotReady((u) => u.branches.resetBranch({ branchId: path.branch_id }), "branch_reset")
    )
    .handle("update", ({ path, payload }) =>
      asCaller((u) =>
        u.branches.updateBranch({
          branchId: path.branch_id,
          ...(payload.name !== undefined ? { name: payload.name } : {}),
          ...(payload.protected !== undefined ? { protected: payload.protected } : {}),
          ...(payload.expires_at === null ? { clearExpiresAt: true } : payload.expires_at !== undefined ? { expiresAt: timestampFromMs(payload.expires_at.epochMillis) } : {})
        })
      ).pipe(Effect.map((r) => branch(r.branch)))
    )
    .handle("createSnapshot", ({ path, payload }) =>
      startedUnlessEngineNotReady((u) => u.branches.createSnapshot({ connectorId: path.connector_id, name: payload.name }), "snapshot_create")
    )
    .handle("listSnapshots", ({ path }) =>
      asCaller((u) => u.branches.listSnapshots({ connectorId: path.connector_id })).pipe(Effect.map((r) => ({ snapshots: r.snapshots.map(snapshot) })))
    )
    .handle("getSnapshot", ({ path }) => asCaller((u) => u.branches.getSnapshot({ snapshotId: path.snapshot_id })).pipe(Effect.map((r) => snapshot(r.snapshot))))
    .handle("deleteSnapshot", ({ path }) =>
      asCaller((u) => u.branches.deleteSnapshot({ snapshotId: path.snapshot_id })).pipe(
        Effect.map((r) => ({ operation_id: r.operationId, resource_id: r.resourceId, status: statusOf(r.status), type: "snapshot_delete" as const }))
      )
    )
    .handle("getMaskingRules", ({ path }) =>
      asCaller((u) => u.branches.getMaskingRules({ connectorId: path.connector_id })).pipe(
        Effect.map((r) => ({
          rules: r.rules.map((x) => ({ schema: x.schema, table: x.table, column: x.column, method: x.method as typeof Br.MaskingRule.Type.method })),
          policy: maskingPolicyOf(r.policy),
          safe_columns: r.safeColumns.map((c) => ({ schema: c.schema, table: c.table, column: c.column })),
          suggested_rules: r.suggestedRules.map((x) => ({ schema: x.schema, table: x.table, column: x.column, method: x.method as typeof Br.MaskingRule.Type.method }))
        }))
      )
    )
    .handle("setMaskingRules", ({ path, payload }) =>
      asCaller((u) =>
        u.branches.setMaskingRules({
          connectorId: path.connector_id,
          rules: payload.rules.map((x) => ({ ...x })),
          ...(payload.policy !== undefined ? { policy: payload.policy } : {}),
          safeColumns: (payload.safe_columns ?? []).map((c) => ({ ...c }))
        })
      ).pipe(
        Effect.map((r) => ({
          rules: r.rules.map((x) => ({ schema: x.schema, table: x.table, column: x.column, method: x.method as typeof Br.MaskingRule.Type.method })),
          policy: maskingPolicyOf(r.policy),
          safe_columns: r.safeColumns.map((c) => ({ schema: c.schema, table: c.table, column: c.column }))
        }))
      )
    )
)
