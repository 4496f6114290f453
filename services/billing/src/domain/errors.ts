import { Code, wireErrorFrom, type WireTable } from "@scion/kit"
import { Schema } from "effect"

// The refusals of identity, shared by every unit (kit/org-access.ts).
import { accessWireErrors, type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated } from "@scion/kit"
export { type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated }

export class UnknownPlan extends Schema.TaggedError<UnknownPlan>()("UnknownPlan", { planId: Schema.String, known: Schema.Array(Schema.String) }) {
  override get message() {
    return `Unknown plan '${this.planId}'; choose one of: ${this.known.join(", ")}`
  }
}

export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", { field: Schema.String, message: Schema.String }) {}

/** Update flags that cannot all hold (cancel now and at period end; a new plan and cancel now). */
export class ContradictoryUpdate extends Schema.TaggedError<ContradictoryUpdate>()("ContradictoryUpdate", { message: Schema.String }) {}

export class NoFieldsToUpdate extends Schema.TaggedError<NoFieldsToUpdate>()("NoFieldsToUpdate", {}) {
  override get message() {
    return "No fields to update: give plan_id, cancel_now or cancel_at_period_end"
  }
}

/** Billing has not set the org up yet (events.org.created not consumed), or never will. */
export class SubscriptionNotFound extends Schema.TaggedError<SubscriptionNotFound>()("SubscriptionNotFound", { orgId: Schema.String }) {
  override get message() {
    return `Billing for org ${this.orgId} is not set up yet; retry shortly`
  }
}

/** The org was deleted: its customer record is closed and takes no more changes. */
export class CustomerClosed extends Schema.TaggedError<CustomerClosed>()("CustomerClosed", { orgId: Schema.String }) {
  override get message() {
    return `Billing for org ${this.orgId} is closed`
  }
}

/** The payment provider did not answer or refused; nothing changed, safe to retry. */
export class PaymentProviderUnavailable extends Schema.TaggedError<PaymentProviderUnavailable>()("PaymentProviderUnavailable", { cause: Schema.String }) {
  override get message() {
    return "The payment provider is unavailable; retry shortly"
  }
}


export type BillingError =
  | AccessError
  | UnknownPlan
  | InvalidArgument
  | ContradictoryUpdate
  | NoFieldsToUpdate
  | SubscriptionNotFound
  | CustomerClosed
  | PaymentProviderUnavailable

/** The one table from domain error to wire error. */
export const wireErrors = {
  ...accessWireErrors,
  UnknownPlan: { code: Code.InvalidArgument, reason: "UNKNOWN_PLAN", metadata: (e) => ({ plan_id: e.planId }) },
  InvalidArgument: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: (e) => ({ field: e.field }) },
  ContradictoryUpdate: { code: Code.InvalidArgument, reason: "CONTRADICTORY_UPDATE" },
  NoFieldsToUpdate: { code: Code.InvalidArgument, reason: "NO_FIELDS_TO_UPDATE" },
  SubscriptionNotFound: { code: Code.NotFound, reason: "SUBSCRIPTION_NOT_FOUND", metadata: (e) => ({ org_id: e.orgId }) },
  CustomerClosed: { code: Code.FailedPrecondition, reason: "CUSTOMER_CLOSED", metadata: (e) => ({ org_id: e.orgId }) },
  PaymentProviderUnavailable: { code: Code.Unavailable, reason: "PAYMENT_PROVIDER_UNAVAILABLE" }
} satisfies WireTable<BillingError>

export const toWireError = wireErrorFrom<BillingError>(wireErrors)
