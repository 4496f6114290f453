import { asService, OperationClient, type RpcError, ServiceIdentity } from "@scion/kit"
import { OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { Context, Effect, Layer, Option } from "effect"
import { OperationsUnavailable } from "./domain/errors.js"

export type OperationState = "pending" | "running" | "completed" | "failed"

const states: Partial<Record<OperationStatus, OperationState>> = {
  [OperationStatus.PENDING]: "pending",
  [OperationStatus.RUNNING]: "running",
  [OperationStatus.COMPLETED]: "completed",
  [OperationStatus.FAILED]: "failed"
}

/**
 * The operation unit as the branch unit uses it, with this unit's service principal: the job
 * reports long after the user's request, whose permission was checked when the work started.
 */
export class BranchOperations extends Context.Tag("@scion/branch/BranchOperations")<
  BranchOperations,
  {
    readonly create: (input: { readonly id: string; readonly orgId: string; readonly branchId: string; readonly type: "branch_create" | "branch_delete" }) => Effect.Effect<void, OperationsUnavailable>
    /** None when the operation unit does not know it. */
    readonly status: (operationId: string) => Effect.Effect<Option.Option<OperationState>, OperationsUnavailable>
  }
>() {
  static readonly live: Layer.Layer<BranchOperations, never, OperationClient | ServiceIdentity> = Layer.effect(
    BranchOperations,
    Effect.gen(function* () {
      const client = yield* OperationClient
      const service = yield* ServiceIdentity
      const unavailable = (error: RpcError) => new OperationsUnavailable({ cause: `${error.codeName}: ${error.reason}` })
      return BranchOperations.of({
        create: ({ id, orgId, branchId, type }) =>
          asService(client.createOperation({ id, orgId, type: type === "branch_create" ? OperationType.BRANCH_CREATE : OperationType.BRANCH_DELETE, resourceId: branchId })).pipe(
            Effect.asVoid,
            Effect.mapError(unavailable),
            Effect.provideService(ServiceIdentity, service)
          ),
        status: (operationId) =>
          asService(client.getOperation({ id: operationId, waitSeconds: 0 })).pipe(
            Effect.map((r) => Option.fromNullable(r.operation === undefined ? undefined : states[r.operation.status])),
            Effect.catchIf((e) => e.reason === "OPERATION_NOT_FOUND", () => Effect.succeed(Option.none<OperationState>())),
            Effect.mapError(unavailable),
            Effect.provideService(ServiceIdentity, service)
          )
      })
    })
  )
}
