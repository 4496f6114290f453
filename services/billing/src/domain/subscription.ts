import type { SubscriptionRecord } from "./models.js"
import { FREE_PLAN, type Plan } from "./plans.js"

/**
 * Pure subscription transitions. Periods are monthly and computed lazily: whoever touches a
 * subscription first settles the periods that lapsed since (renewal, or the scheduled cancel),
 * so no sweeper is needed for correctness.
 */

/** The same day next month in UTC, clamped to the month's last day (Jan 31 → Feb 28/29). */
export const addMonth = (date: Date): Date => {
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth() + 1
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate()
  return new Date(Date.UTC(year, month, Math.min(date.getUTCDate(), lastDay), date.getUTCHours(), date.getUTCMinutes(), date.getUTCSeconds(), date.getUTCMilliseconds()))
}

const clearedCheckout = { pendingPlanId: null, checkoutSessionId: null, checkoutUrl: null } as const

/** Applies the periods that ended before `now`: a scheduled cancel takes effect, otherwise the period renews. */
export const settle = (record: SubscriptionRecord, now: Date): SubscriptionRecord => {
  if (record.status === "canceled" || record.customerStatus === "closed") return record
  let current = record
  while (now.getTime() >= current.currentPeriodEnd.getTime()) {
    if (current.cancelAtPeriodEnd) {
      return { ...current, ...clearedCheckout, planId: FREE_PLAN.id, status: "canceled", canceledAt: current.currentPeriodEnd, cancelAtPeriodEnd: false }
    }
    current = { ...current, currentPeriodStart: current.currentPeriodEnd, currentPeriodEnd: addMonth(current.currentPeriodEnd) }
  }
  return current
}

/** The org on `plan` from now: a fresh period, nothing scheduled, no checkout pending. */
export const activate = (record: SubscriptionRecord, plan: Plan, now: Date): SubscriptionRecord => ({
  ...record,
  ...clearedCheckout,
  planId: plan.id,
  status: "active",
  currentPeriodStart: now,
  currentPeriodEnd: addMonth(now),
  cancelAtPeriodEnd: false,
  canceledAt: null
})

/** A hosted checkout for `plan` is open; the current plan applies until it completes. */
export const awaitCheckout = (record: SubscriptionRecord, plan: Plan, checkout: { readonly sessionId: string; readonly url: string }): SubscriptionRecord => ({
  ...record,
  status: "pending_checkout",
  pendingPlanId: plan.id,
  checkoutSessionId: checkout.sessionId,
  checkoutUrl: checkout.url
})

/** The checkout was abandoned or expired: back to the plan the org was on. */
export const abandonCheckout = (record: SubscriptionRecord): SubscriptionRecord =>
  record.status === "pending_checkout" ? { ...record, ...clearedCheckout, status: record.canceledAt === null ? "active" : "canceled" } : record

/**
 * Immediate cancel: the subscription ends now and the org falls back to the free plan's limits
 * (status canceled until a plan is selected again). Cancelling a canceled subscription changes nothing.
 */
export const cancelNow = (record: SubscriptionRecord, now: Date): SubscriptionRecord =>
  record.status === "canceled"
    ? record
    : { ...record, ...clearedCheckout, planId: FREE_PLAN.id, status: "canceled", canceledAt: now, cancelAtPeriodEnd: false }

/** Schedules (true) or unschedules (false) the cancel at the period end; a canceled subscription stays as it is. */
export const scheduleCancel = (record: SubscriptionRecord, atPeriodEnd: boolean): SubscriptionRecord =>
  record.status === "canceled" ? record : { ...record, cancelAtPeriodEnd: atPeriodEnd }

/** The plan whose limits apply now: the subscription's, or free when it is canceled or the customer closed. */
export const effectivePlanId = (record: SubscriptionRecord) =>
  record.status === "canceled" || record.customerStatus === "closed" ? FREE_PLAN.id : record.planId
