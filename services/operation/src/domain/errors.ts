import { Code, wireErrorFrom, type WireTable } from "@scion/kit"
import { Schema } from "effect"

export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {}) {
  override get message() {
    return "Authentication required: send a principal token issued by identity"
  }
}

/** Unknown, or of an org the caller does not belong to: the same answer for both. */
export class OperationNotFound extends Schema.TaggedError<OperationNotFound>()("OperationNotFound", { operationId: Schema.String }) {
  override get message() {
    return `Operation ${this.operationId} not found`
  }
}

export class OperationIdConflict extends Schema.TaggedError<OperationIdConflict>()("OperationIdConflict", { operationId: Schema.String }) {
  override get message() {
    return `Operation ${this.operationId} already exists with a different org, type or resource`
  }
}

export class OperationTerminal extends Schema.TaggedError<OperationTerminal>()("OperationTerminal", {
  operationId: Schema.String,
  status: Schema.String
}) {
  override get message() {
    return `Operation ${this.operationId} is ${this.status} and cannot change`
  }
}

export class InvalidTransition extends Schema.TaggedError<InvalidTransition>()("InvalidTransition", {
  operationId: Schema.String,
  from: Schema.String,
  to: Schema.String
}) {
  override get message() {
    return `Operation ${this.operationId} cannot move from ${this.from} to ${this.to}`
  }
}

/** Creating an operation in an org the caller does not belong to. */
export class NotAMember extends Schema.TaggedError<NotAMember>()("NotAMember", { orgId: Schema.String }) {
  override get message() {
    return `You are not a member of org ${this.orgId}`
  }
}

export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  field: Schema.String,
  message: Schema.String
}) {}

/** Identity could not answer an authorization question; safe to retry. */
export class IdentityUnavailable extends Schema.TaggedError<IdentityUnavailable>()("IdentityUnavailable", { cause: Schema.String }) {
  override get message() {
    return "Authorization is temporarily unavailable; retry shortly"
  }
}

export type OperationError =
  | Unauthenticated
  | OperationNotFound
  | OperationIdConflict
  | OperationTerminal
  | InvalidTransition
  | NotAMember
  | InvalidArgument
  | IdentityUnavailable

/** The one table from domain error to wire error. */
export const wireErrors = {
  Unauthenticated: { code: Code.Unauthenticated, reason: "UNAUTHENTICATED" },
  OperationNotFound: { code: Code.NotFound, reason: "OPERATION_NOT_FOUND", metadata: (e) => ({ operation_id: e.operationId }) },
  OperationIdConflict: { code: Code.AlreadyExists, reason: "OPERATION_ID_CONFLICT", metadata: (e) => ({ operation_id: e.operationId }) },
  OperationTerminal: { code: Code.FailedPrecondition, reason: "OPERATION_TERMINAL", metadata: (e) => ({ operation_id: e.operationId, status: e.status }) },
  InvalidTransition: {
    code: Code.FailedPrecondition,
    reason: "OPERATION_INVALID_TRANSITION",
    metadata: (e) => ({ operation_id: e.operationId, from: e.from, to: e.to })
  },
  NotAMember: { code: Code.PermissionDenied, reason: "NOT_A_MEMBER", metadata: (e) => ({ org_id: e.orgId }) },
  InvalidArgument: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: (e) => ({ field: e.field }) },
  IdentityUnavailable: { code: Code.Unavailable, reason: "IDENTITY_UNAVAILABLE" }
} satisfies WireTable<OperationError>

export const toWireError = wireErrorFrom<OperationError>(wireErrors)
