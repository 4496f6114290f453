import type { Plan, PlanId } from "./plans.js"

export type SubscriptionStatus = "active" | "pending_checkout" | "canceled"
export type CustomerStatus = "active" | "closed"

/** One row per org: the subscription as stored. */
export interface SubscriptionRecord {
  readonly orgId: string
  readonly planId: PlanId
  readonly status: SubscriptionStatus
  readonly currentPeriodStart: Date
  readonly currentPeriodEnd: Date
  readonly cancelAtPeriodEnd: boolean
  readonly canceledAt: Date | null
  readonly pendingPlanId: PlanId | null
  readonly checkoutSessionId: string | null
  readonly checkoutUrl: string | null
  readonly customerStatus: CustomerStatus
}

/** What callers read: the record with its plan and the ledger's balance. */
export interface SubscriptionView extends SubscriptionRecord {
  readonly plan: Plan
  /** Sum of the credit ledger, in US cents. */
  readonly creditsBalance: number
}

/** The payload identity publishes on events.org.created (extra fields are ignored). */
export interface OrgCreated {
  readonly org_id: string
  readonly created_at: string
}

/** The payload identity publishes on events.org.deleted. */
export interface OrgDeleted {
  readonly org_id: string
  readonly deleted_at: string
}

/** A requested change through POST …/billing/subscriptions:update. */
export interface SubscriptionUpdate {
  readonly planId?: string | undefined
  readonly cancelNow?: boolean | undefined
  readonly cancelAtPeriodEnd?: boolean | undefined
}
