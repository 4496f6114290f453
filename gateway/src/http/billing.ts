import { group } from "../serve/handlers.js"
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import * as pb from "@scion/proto/scion/billing/v1/billing_pb"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { anonymously, asCaller } from "../Authentication.js"
import type * as B from "../billingSchemas.js"
import { requiredFrom } from "./present.js"

/**
 * Billing proto → the JSON of billingSchemas. Billing breaking its own contract (a required
 * message or timestamp missing) is a bug, not a client error: it throws, and the edge answers 500.
 */
const required = requiredFrom("billing")
const iso = (ts: Timestamp | undefined, what: string) => timestampDate(required(ts, what)).toISOString()
const limit = (value: number | undefined) => value ?? null

const statusName = {
  [pb.SubscriptionStatus.ACTIVE]: "active",
  [pb.SubscriptionStatus.PENDING_CHECKOUT]: "pending_checkout",
  [pb.SubscriptionStatus.CANCELED]: "canceled",
  [pb.SubscriptionStatus.UNSPECIFIED]: undefined
} as const satisfies Record<pb.SubscriptionStatus, typeof B.SubscriptionStatus.Type | undefined>

const plan = (p: pb.Plan | undefined): typeof B.Plan.Type => {
  const v = required(p, "plan")
  const limits = required(v.limits, "plan limits")
  return {
    plan_id: v.id,
    name: v.name,
    description: v.description,
    monthly_price_cents: v.monthlyPriceCents,
    currency: v.currency,
    limits: {
      projects: limit(limits.projects),
      connectors: limit(limits.connectors),
      branches: limit(limits.branches),
      environments: limit(limits.environments),
      engine_hours: limit(limits.engineHours)
    },
    included_credits: v.includedCredits
  }
}

const subscription = (s: pb.Subscription | undefined): typeof B.Subscription.Type => {
  const v = required(s, "subscription")
  return {
    org_id: v.orgId,
    plan_id: v.planId,
    plan: plan(v.plan),
    status: required(statusName[v.status], "a subscription status"),
    current_period_start: iso(v.currentPeriodStart, "current_period_start"),
    current_period_end: iso(v.currentPeriodEnd, "current_period_end"),
    cancel_at_period_end: v.cancelAtPeriodEnd,
    canceled_at: v.canceledAt === undefined ? null : timestampDate(v.canceledAt).toISOString(),
    credits_balance: Number(v.creditsBalance),
    pending_plan_id: v.pendingPlanId ?? null,
    checkout_url: v.checkoutUrl ?? null
  }
}

export const BillingPlansLive = group(Api, "billingPlans", (handlers) =>
  handlers.handle("list", () => anonymously((u) => u.billing.listPlans({})).pipe(Effect.map((r) => ({ plans: r.plans.map(plan) }))))
)

export const BillingLive = group(Api, "billing", (handlers) =>
  handlers
    .handle("selectPlan", ({ path, payload }) =>
      asCaller((u) => u.billing.selectPlan({ orgId: path.org_id, planId: payload.plan_id })).pipe(Effect.map((r) => subscription(r.subscription)))
    )
    .handle("getSubscription", ({ path }) =>
      asCaller((u) => u.billing.getSubscription({ orgId: path.org_id })).pipe(Effect.map((r) => subscription(r.subscription)))
    )
    .handle("cancelSubscription", ({ path, urlParams }) =>
      asCaller((u) => u.billing.cancelSubscription({ orgId: path.org_id, immediate: urlParams.immediate ?? false })).pipe(
        Effect.map((r) => subscription(r.subscription))
      )
    )
    .handle("updateSubscription", ({ path, payload }) =>
      asCaller((u) =>
        u.billing.updateSubscription({
          orgId: path.org_id,
          ...(payload.plan_id !== undefined ? { planId: payload.plan_id } : {}),
          ...(payload.cancel_now !== undefined ? { cancelNow: payload.cancel_now } : {}),
          ...(payload.cancel_at_period_end !== undefined ? { cancelAtPeriodEnd: payload.cancel_at_period_end } : {})
        })
      ).pipe(Effect.map((r) => subscription(r.subscription)))
    )
)
