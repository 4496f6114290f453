import { makeUnitOperations, type OperationClient, type OperationState as KitOperationState, type ServiceIdentity, type UnitOperations } from "@scion/kit"
import { Context, Layer } from "effect"
import { OperationsUnavailable } from "./domain/errors.js"

export type OperationState = KitOperationState

/**
 * The operation unit as the branch unit uses it, with this unit's service principal: the job
 * reports long after the user's request, whose permission was checked when the work started.
 */
export class BranchOperations extends Context.Tag("@scion/branch/BranchOperations")<
  BranchOperations,
  UnitOperations<"branch_create" | "branch_delete" | "branch_reset" | "snapshot_create" | "snapshot_delete", OperationsUnavailable>
>() {
  static readonly live: Layer.Layer<BranchOperations, never, OperationClient | ServiceIdentity> = Layer.effect(
    BranchOperations,
    makeUnitOperations<"branch_create" | "branch_delete" | "branch_reset" | "snapshot_create" | "snapshot_delete", OperationsUnavailable>((cause) => new OperationsUnavailable({ cause }))
  )
}
