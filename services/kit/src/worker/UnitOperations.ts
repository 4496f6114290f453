import { OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { randomBytes } from "node:crypto"
import { Duration, Effect, Option } from "effect"
import { hasReason, RpcError } from "../errors.js"
import { undoOnRollback } from "../rollback-undo.js"
import { asService, ServiceIdentity } from "../service-identity.js"
import { OperationClient } from "./Worker.js"

/** The interface's operation types, as the units name them. */
export type OperationTypeName =
  | "connector_engine_setup"
  | "connector_reset"
  | "connector_deep_reset"
  | "connector_discovery"
  | "connector_delete"
  | "connector_secret_purge"
  | "connector_rollout"
  | "connector_replication_rollback"
  | "connector_cdc_cutover"
  | "connector_cdc_shadow_cleanup"
  | "environment_deploy"
  | "environment_destroy"
  | "branch_create"
  | "branch_delete"
  | "branch_reset"
  | "snapshot_create"
  | "snapshot_delete"

/** The one closed table from a type's name to the contract's enum: a new type must be added here. */
const operationTypes = {
  connector_engine_setup: OperationType.CONNECTOR_ENGINE_SETUP,
  connector_reset: OperationType.CONNECTOR_RESET,
  connector_deep_reset: OperationType.CONNECTOR_DEEP_RESET,
  connector_discovery: OperationType.CONNECTOR_DISCOVERY,
  connector_delete: OperationType.CONNECTOR_DELETE,
  connector_secret_purge: OperationType.CONNECTOR_SECRET_PURGE,
  connector_rollout: OperationType.CONNECTOR_ROLLOUT,
  connector_replication_rollback: OperationType.CONNECTOR_REPLICATION_ROLLBACK,
  connector_cdc_cutover: OperationType.CONNECTOR_CDC_CUTOVER,
  connector_cdc_shadow_cleanup: OperationType.CONNECTOR_CDC_SHADOW_CLEANUP,
  environment_deploy: OperationType.ENVIRONMENT_DEPLOY,
  environment_destroy: OperationType.ENVIRONMENT_DESTROY,
  branch_create: OperationType.BRANCH_CREATE,
  branch_delete: OperationType.BRANCH_DELETE,
  branch_reset: OperationType.BRANCH_RESET,
  snapshot_create: OperationType.SNAPSHOT_CREATE,
  snapshot_delete: OperationType.SNAPSHOT_DELETE
} as const satisfies Record<OperationTypeName, OperationType>

export type OperationState = "pending" | "running" | "completed" | "failed"

const states = {
  [OperationStatus.PENDING]: "pending",
  [OperationStatus.RUNNING]: "running",
  [OperationStatus.COMPLETED]: "completed",
  [OperationStatus.FAILED]: "failed"
} as const satisfies Partial<Record<OperationStatus, OperationState>>

const statusOfState = {
  pending: OperationStatus.PENDING,
  running: OperationStatus.RUNNING,
  completed: OperationStatus.COMPLETED,
  failed: OperationStatus.FAILED
} as const satisfies Record<OperationState, OperationStatus>

/** An operation's state on the wire, in the handles units answer when they accept work. */
export const operationStatusOf = (state: OperationState): OperationStatus => statusOfState[state]

/** The error of an operation whose start rolled back after it was created. */
export const ABANDONED = "The request that started this work failed before it was recorded; nothing was started. Send the request again."

/** An operation id chosen by the unit that starts the work (a retry cannot create two). */
export const newOperationId = (prefix: string) => `op_${prefix}${Date.now().toString(36)}${randomBytes(8).toString("hex")}`

/** The operation unit as a unit starting work of types `T` uses it, with its service principal. */
export interface UnitOperations<T extends OperationTypeName, E> {
  readonly create: (input: { readonly id: string; readonly orgId: string; readonly resourceId: string; readonly type: T }) => Effect.Effect<void, E>
  /** None when the operation unit does not know it. */
  readonly status: (operationId: string) => Effect.Effect<Option.Option<OperationState>, E>
}

/**
 * How long one call may take. Units make these calls while they hold the row lock of the resource
 * they start work on (see their READMEs): the deadline bounds how long a stuck operation unit can
 * hold that lock and a pooled connection. A healthy call takes a few milliseconds.
 */
export const OPERATION_CALL_DEADLINE = Duration.seconds(5)

/**
 * The client: creates operations of the unit's types and reads their state. The user's
 * permission was checked when the work started, so the unit's service principal asks; the
 * operation unit being unavailable becomes the unit's own error through `unavailable`.
 */
export const makeUnitOperations = <T extends OperationTypeName, E>(unavailable: (cause: string) => E) =>
  Effect.gen(function* () {
    const client = yield* OperationClient
    const service = yield* ServiceIdentity
    const failure = (error: RpcError) => unavailable(`${error.codeName}: ${error.reason}`)
    const deadline = Effect.timeoutFail({
      duration: OPERATION_CALL_DEADLINE,
      onTimeout: () => unavailable(`DEADLINE_EXCEEDED: no answer within ${Duration.format(OPERATION_CALL_DEADLINE)}`)
    })
    // Created inside a transaction that then rolled back: nothing points at the operation and no
    // job will run it, so it is failed rather than left pending forever. Registered before the
    // create is sent: a create that timed out may still have landed. One that never did is not found.
    const neverCreated = (error: unknown) => error instanceof RpcError && hasReason(error, "OPERATION_NOT_FOUND")
    const abandon = (id: string) =>
      asService(client.reportOperation({ id, status: OperationStatus.FAILED, error: ABANDONED })).pipe(
        Effect.timeout(OPERATION_CALL_DEADLINE),
        Effect.retry({ times: 2, while: (error) => !neverCreated(error) }),
        Effect.catchAll((error) =>
          neverCreated(error)
            ? Effect.void
            : Effect.logWarning("an operation whose start rolled back could not be failed; it stays pending", error).pipe(Effect.annotateLogs({ operation_id: id }))
        ),
        Effect.provideService(ServiceIdentity, service)
      )
    return {
      create: ({ id, orgId, resourceId, type }) =>
        undoOnRollback(abandon(id)).pipe(
          Effect.zipRight(asService(client.createOperation({ id, orgId, type: operationTypes[type], resourceId }))),
          Effect.asVoid,
          Effect.mapError(failure),
          deadline,
          Effect.provideService(ServiceIdentity, service)
        ),
      status: (operationId) =>
        asService(client.getOperation({ id: operationId, waitSeconds: 0 })).pipe(
          Effect.map((r) => Option.fromNullable(r.operation === undefined ? undefined : (states as Partial<Record<OperationStatus, OperationState>>)[r.operation.status])),
          Effect.catchIf((e) => hasReason(e, "OPERATION_NOT_FOUND"), () => Effect.succeed(Option.none<OperationState>())),
          Effect.mapError(failure),
          deadline,
          Effect.provideService(ServiceIdentity, service)
        )
    } satisfies UnitOperations<T, E>
  })
