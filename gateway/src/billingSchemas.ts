import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Billing: plans, the org's subscription, and the bodies of its endpoints. The interface leaves
// them unshown; these are ours (services/billing/README.md says why). Money is in US cents.
// ---------------------------------------------------------------------------------------------

const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })

const PlanId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)).annotations({
  description: "A plan id from GET /v1/billing/plans: free, pro or team. Any other id is 400."
})

const Limit = (what: string) => Schema.NullOr(Schema.Int).annotations({ description: `${what}; null means unlimited` })

export const PlanLimits = Schema.Struct({
  projects: Limit("Projects the org may hold"),
  connectors: Limit("Connectors the org may hold"),
  branches: Limit("Branches the org may hold at once"),
  environments: Limit("Environments the org may hold"),
  engine_hours: Limit("Engine hours included per monthly period")
}).annotations({ identifier: "PlanLimits", description: "What a plan allows. Creates past a limit are refused by the unit that owns the resource." })

export const Plan = Schema.Struct({
  plan_id: Schema.String.annotations({ description: "free, pro or team" }),
  name: Schema.String,
  description: Schema.String,
  monthly_price_cents: Schema.Int.annotations({ description: "Price per monthly period in US cents (0 for free)" }),
  currency: Schema.String.annotations({ description: "ISO 4217 currency code, lower case: usd" }),
  limits: PlanLimits,
  included_credits: Schema.Int.annotations({ description: "Credits granted when the plan starts (and each renewed period of a paid plan), in US cents" })
}).annotations({ identifier: "Plan", description: "A self-serve plan." })

export const PlanList = Schema.Struct({ plans: Schema.Array(Plan) }).annotations({ identifier: "PlanList", description: "The fixed self-serve plan list." })

export const SubscriptionStatus = Schema.Literal("active", "pending_checkout", "canceled").annotations({
  description:
    "active: the plan applies. pending_checkout: a paid plan awaits a hosted checkout (checkout_url); the previous plan applies until it completes. canceled: canceled now; the free plan's limits apply until a plan is selected again."
})

export const Subscription = Schema.Struct({
  org_id: Schema.String,
  plan_id: Schema.String.annotations({ description: "The plan the org is on (free after an immediate cancel)" }),
  plan: Plan,
  status: SubscriptionStatus,
  current_period_start: Timestamp,
  current_period_end: Timestamp.annotations({ description: "End of the current monthly period: renewal, or when a scheduled cancel takes effect" }),
  cancel_at_period_end: Schema.Boolean.annotations({ description: "The subscription is canceled at current_period_end" }),
  canceled_at: Schema.NullOr(Timestamp).annotations({ description: "When it was canceled; null unless status is canceled" }),
  credits_balance: Schema.Int.annotations({ description: "Sum of the org's credit ledger, in US cents (free-tier credits are granted when the org is created)" }),
  pending_plan_id: Schema.NullOr(Schema.String).annotations({ description: "The plan a pending checkout is for; null otherwise" }),
  checkout_url: Schema.NullOr(Schema.String).annotations({
    description: "Hosted checkout page to send the user to while status is pending_checkout; null when checkout completed at once (the default payment adapter)"
  })
}).annotations({ identifier: "Subscription", description: "The org's billing subscription." })

export const SelectPlanRequest = Schema.Struct({ plan_id: PlanId }).annotations({
  identifier: "SelectPlanRequest",
  description: "The plan to move the org to."
})

export const UpdateSubscriptionRequest = Schema.Struct({
  plan_id: Schema.optional(PlanId).annotations({ description: "Changes the plan (as POST …/billing/subscriptions); not with cancel_now" }),
  cancel_now: Schema.optional(Schema.Boolean).annotations({ description: "true cancels immediately (the org falls back to free); false asks for nothing" }),
  cancel_at_period_end: Schema.optional(Schema.Boolean).annotations({ description: "true schedules the cancel at the period end; false unschedules it. Not true together with cancel_now true" })
}).annotations({
  identifier: "UpdateSubscriptionRequest",
  description: "At least one field. Contradictions (cancel_now with cancel_at_period_end true, plan_id with cancel_now true) and requests that ask for nothing are 400."
})

/** `immediate`: exactly true or false as a query string (anything else is 422). */
export const CancelQuery = Schema.Struct({
  immediate: Schema.optional(
    Schema.BooleanFromString.annotations({
      description: "true cancels now; false (default) cancels at the end of the current period",
      jsonSchema: { type: "boolean", default: false, description: "true cancels now; false (default) cancels at the end of the current period" }
    })
  )
})
