import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import type * as pb from "@scion/proto/scion/branch/v1/branch_pb"
import { Effect, Either } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as Br from "../branchSchemas.js"
import { requiredFrom } from "./present.js"

const required = requiredFrom("branch")
const iso = (ts: Timestamp | undefined) => timestampDate(required(ts, "a timestamp")).toISOString()
const isoOrNull = (ts: Timestamp | undefined) => (ts === undefined ? null : timestampDate(ts).toISOString())

const statuses = ["pending", "running", "completed", "failed"] as const
const statusOf = (s: string) => required(statuses.find((k) => k === s), "a known operation status")
const branchStatuses = ["creating", "active", "deleting", "deleted", "failed"] as const

export const branch = (b: pb.Branch | undefined): typeof Br.Branch.Type => {
  const v = required(b, "branch")
  return {
    branch_id: v.branchId,
    name: v.name,
    connector_id: v.connectorId,
    service_type: "postgres",
    status: required(branchStatuses.find((s) => s === v.status), "a known branch status"),
    branch_url: v.branchUrl ?? null,
    pooled_branch_url: v.pooledBranchUrl ?? null,
    pooled_branch_prisma_url: v.pooledBranchPrismaUrl ?? null,
    created_at: iso(v.createdAt),
    read_ready_at: isoOrNull(v.readReadyAt),
    write_ready_at: isoOrNull(v.writeReadyAt),
    masked_ready_at: isoOrNull(v.maskedReadyAt),
    error: v.error ?? null,
    data_as_of: isoOrNull(v.dataAsOf),
    source_lsn: v.sourceLsn ?? null
  }
}

const maskingPolicies = { permissive: "permissive", strict: "strict" } as const
const maskingPolicyOf = (policy: string) => required(maskingPolicies[policy as keyof typeof maskingPolicies], "a known masking policy")

/** A replayed create carries X-Idempotency-Replay: true. */
const markReplay = HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, "x-idempotency-replay", "true")))

export const BranchesLive = HttpApiBuilder.group(Api, "branches", (handlers) =>
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
            ...((headers["x-idempotency-key"] ?? headers["idempotency-key"]) !== undefined
              ? { idempotencyKey: headers["x-idempotency-key"] ?? headers["idempotency-key"] }
              : {})
          })
          .pipe(
            Effect.map(Either.right),
            Effect.catchIf(
              (e) => e.reason === "ENGINE_NOT_READY" || e.reason === "MASKING_INCOMPLETE",
              (e) => Effect.succeed(Either.left(e))
            )
          )
      ).pipe(
        Effect.flatMap((outcome) =>
          Either.match(outcome, {
            onLeft: (e): Effect.Effect<never, Br.EngineNotReady | Br.MaskingIncomplete> =>
              Effect.fail(
                e.reason === "MASKING_INCOMPLETE"
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
