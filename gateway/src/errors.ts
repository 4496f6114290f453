import { Code, type ReasonName, type RpcError } from "@scion/kit"
import { Effect } from "effect"

export {
  BadRequest,
  Conflict,
  errorByStatus,
  Forbidden,
  httpErrors,
  type HttpError,
  type HttpStatus,
  InternalError,
  NotFound,
  TooManyRequests,
  Unauthorized,
  Unavailable,
  ValidationError,
  ValidationIssue
} from "./httpErrors.js"
import { errorByStatus, type HttpError, type HttpStatus, InternalError, Unavailable } from "./httpErrors.js"

// ---------------------------------------------------------------------------------------------
// Upstream RpcError (Connect code + reason) → HTTP status: the one table.
// ---------------------------------------------------------------------------------------------

/** Default status per Connect code. */
const statusByCode = {
  // The gateway never cancels a call it still answers: a cancel here means the upstream went away
  // mid-call (its HTTP/2 session was reset), so the client may retry.
  [Code.Canceled]: 503,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 503,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 500,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401
} as const satisfies Record<Code, HttpStatus>

/**
 * Reasons the handlers answer themselves, with a body of their own, before the status table is
 * asked (the prerequisite checks, the preflight report, the 422s of engines and masking).
 */
export const reasonsAnsweredByHandlers = [
  "PREFLIGHT_FAILED",
  "DISCOVERY_PREREQUISITES_FAILED",
  "GRANT_SCRIPT_PREREQUISITES_FAILED",
  "ENGINE_SETUP_PREREQUISITES_FAILED",
  "ENGINE_NOT_SET_UP",
  "ROLLBACK_UNAVAILABLE",
  "ENGINE_NOT_READY",
  "MASKING_INCOMPLETE"
] as const satisfies ReadonlyArray<ReasonName>

/**
 * Every other reason of `scion.errors.v1.Reason` with the status the interface gives it. Wins over
 * the Connect code. The type asks for every one: a reason added to the proto has no default.
 */
export const statusByReason = {
  UNAUTHENTICATED: 401,
  // Between units only (IssueServiceToken): reaching a user means a misconfigured deployment.
  SERVICE_CREDENTIAL_INVALID: 500,
  SERVICE_CREDENTIAL_NOT_CONFIGURED: 500,
  SESSION_REQUIRED: 401,
  INVALID_CREDENTIALS: 401,
  INVALID_PRINCIPAL: 401,
  NOT_A_MEMBER: 403,
  PERMISSION_DENIED: 403,
  ROLE_ESCALATION: 403,
  INVITE_EMAIL_MISMATCH: 403,
  EMAIL_NOT_VERIFIED: 403,
  MEMBER_NOT_FOUND: 404,
  INVITE_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  LAST_OWNER: 400,
  SOLE_OWNER: 400,
  LAST_ORG: 400,
  UNKNOWN_ROLE: 400,
  NON_ORG_ROLE: 400,
  SCOPE_OUTSIDE_ROLE: 400,
  INVALID_ARGUMENT: 400,
  INVALID_VERIFICATION_TOKEN: 400,
  ALREADY_MEMBER: 409,
  EMAIL_TAKEN: 409,
  // Operations: another org's operation is as unknown as a missing one (never 403).
  OPERATION_NOT_FOUND: 404,
  OPERATION_ID_CONFLICT: 409,
  OPERATION_TERMINAL: 409,
  OPERATION_INVALID_TRANSITION: 409,
  IDENTITY_UNAVAILABLE: 503,
  // Billing: bad plan or flags are the interface's 400 with a string detail; an org billing has
  // not set up yet (moments after creation) is 404, retry.
  UNKNOWN_PLAN: 400,
  CONTRADICTORY_UPDATE: 400,
  NO_FIELDS_TO_UPDATE: 400,
  SUBSCRIPTION_NOT_FOUND: 404,
  CUSTOMER_CLOSED: 400,
  PAYMENT_PROVIDER_UNAVAILABLE: 503,
  // Projects: another org's project is as unknown as a missing one (never 403); a plan limit is
  // a refusal of the caller's org (403, the detail names limit and plan).
  PROJECT_NOT_FOUND: 404,
  PROJECT_NAME_TAKEN: 409,
  PLAN_LIMIT_REACHED: 403,
  BILLING_UNAVAILABLE: 503,
  // Environments (connector unit).
  ENVIRONMENT_NOT_FOUND: 404,
  ENVIRONMENT_NAME_TAKEN: 409,
  AWS_ACCOUNT_CONNECTION_NOT_FOUND: 404,
  INVALID_ROLE_ARN: 400,
  AWS_ACCOUNT_MISMATCH: 400,
  EXTERNAL_ID_MISMATCH: 400,
  SECRET_STORE_FAILURE: 500,
  // Connectors (connector unit): another org's connector is as unknown as a missing one.
  CONNECTOR_NOT_FOUND: 404,
  UNSUPPORTED_SERVICE: 400,
  INVALID_CONNECTION_DETAILS: 400,
  PRIVATE_LINK_REQUIRED: 400,
  // The discovery operation could not be created: nothing started, safe to retry.
  OPERATIONS_UNAVAILABLE: 503,
  // Another decisions write or a discovery landed first: re-read and retry.
  REPLICA_IDENTITY_DECISIONS_CONFLICT: 409,
  // DELETE of a connector whose deletion lock is on.
  CONNECTOR_DELETION_LOCKED: 409,
  // Another delete, or a lock/unlock, while a delete of the connector is pending or running.
  CONNECTOR_DELETE_IN_PROGRESS: 409,
  // Engine setup on a connector that cannot have an engine (not PostgreSQL), or index with nothing selected.
  CONNECTOR_STATE_INVALID: 400,
  // Another engine setup or rollout of the connector is pending or running.
  ENGINE_SETUP_IN_PROGRESS: 409,
  QUARANTINE_ENTRY_NOT_FOUND: 404,
  ENGINE_UNAVAILABLE: 503,
  // The source could not be asked its WAL position (read-your-writes branches): retry.
  SOURCE_UNAVAILABLE: 503,
  // GET /v1/engines/ca-certificate where each engine's certificate is its own.
  ENGINE_CA_NOT_CONFIGURED: 404,
  ENGINE_CA_UNAVAILABLE: 503,
  // Branches (branch unit): another org's branch is as unknown as a missing one.
  BRANCH_NOT_FOUND: 404,
  // An idempotency key sent again with another connector, service type or name.
  IDEMPOTENCY_KEY_REUSED: 409,
  // The same create (connector and name) is still pending or running.
  BRANCH_CREATE_IN_PROGRESS: 409,
  BRANCH_NAME_TAKEN: 409,
  BRANCH_DELETE_IN_PROGRESS: 409,
  BRANCH_PROTECTED: 409,
  BRANCH_RESET_IN_PROGRESS: 409,
  BRANCH_NOT_ACTIVE: 409,
  // Snapshots (branch unit): another org's snapshot is as unknown as a missing one.
  SNAPSHOT_NOT_FOUND: 404,
  SNAPSHOT_NAME_TAKEN: 409,
  SNAPSHOT_NOT_READY: 409,
  SNAPSHOT_IN_USE: 409,
  // The connector unit could not say where the engine is: nothing started, safe to retry.
  ENGINE_ACCESS_UNAVAILABLE: 503
} as const satisfies Record<Exclude<ReasonName, (typeof reasonsAnsweredByHandlers)[number]>, HttpStatus>

type UpstreamReason = keyof typeof statusByReason
const isUpstreamReason = (reason: string): reason is UpstreamReason => Object.hasOwn(statusByReason, reason)

export const statusOf = (error: Pick<RpcError, "code" | "reason">): HttpStatus =>
  isUpstreamReason(error.reason) ? statusByReason[error.reason] : (statusByCode[error.code as Code] ?? 500)

/**
 * An upstream failure as the HTTP error the client sees. 4xx carry identity's message (written for
 * users); 500 and 503 say nothing about internals and log the cause instead.
 */
export const fromRpcError = (error: RpcError): Effect.Effect<HttpError> => {
  const code = statusOf(error)
  const log = { code: error.codeName, reason: error.reason, message: error.message }
  switch (code) {
    case 500:
      return Effect.as(Effect.logError("upstream call failed").pipe(Effect.annotateLogs(log)), new InternalError({ detail: "Internal Server Error" }))
    case 503:
      return Effect.as(
        Effect.logWarning("upstream unavailable").pipe(Effect.annotateLogs(log)),
        new Unavailable({ detail: "Service temporarily unavailable; retry shortly" })
      )
    default:
      return Effect.succeed(new errorByStatus[code]({ detail: error.message || defaultDetail[code] }))
  }
}

const defaultDetail: Record<HttpStatus, string> = {
  400: "Bad Request",
  401: "Not authenticated",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable"
}
