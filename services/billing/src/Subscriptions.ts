import { transactional, tracedFn } from "@scion/kit"
import { SqlClient } from "@effect/sql"
import type { Principal } from "@scion/kit"
import { Clock, Effect, Option } from "effect"
import { BillingRepo } from "./BillingRepo.js"
import { ContradictoryUpdate, CustomerClosed, InvalidArgument, NoFieldsToUpdate, SubscriptionNotFound, UnknownPlan } from "./domain/errors.js"
import type { OrgCreated, OrgDeleted, SubscriptionRecord, SubscriptionUpdate, SubscriptionView } from "./domain/models.js"
import { entitlement, FREE_PLAN, isPaid, isPlanId, PLAN_IDS, PLANS, type Plan, planList, type Resource } from "./domain/plans.js"
import { abandonCheckout, activate, addMonth, awaitCheckout, cancelNow, effectivePlanId, scheduleCancel, settle } from "./domain/subscription.js"
import { BILLING_MANAGE, BILLING_READ, OrgAccess } from "./Identity.js"
import { PaymentProvider } from "./PaymentProvider.js"

const MAX_ORG_ID = 200

/** Plans, subscriptions and the ledger, org-scoped for the calling principal. */
export class Subscriptions extends Effect.Service<Subscriptions>()("@scion/billing/Subscriptions", {
  effect: Effect.gen(function* () {
    const repo = yield* BillingRepo
    const access = yield* OrgAccess
    const provider = yield* PaymentProvider
    const sql = yield* SqlClient.SqlClient

    const transaction = transactional(sql)

    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const checkOrgId = (orgId: string) =>
      orgId === "" || orgId.length > MAX_ORG_ID ? Effect.fail(new InvalidArgument({ field: "org_id", message: "org_id is required" })) : Effect.void

    const planOf = (planId: string) =>
      isPlanId(planId) ? Effect.succeed(PLANS[planId]) : Effect.fail(new UnknownPlan({ planId, known: [...PLAN_IDS] }))

    /** Grants a plan's included credits once per plan period (the source key says which). */
    const grantPlanCredits = (record: SubscriptionRecord) => {
      const plan = PLANS[record.planId]
      if (!isPaid(plan) || plan.includedCredits === 0 || record.status !== "active") return Effect.void
      return repo.appendCredit({
        orgId: record.orgId,
        amountCents: plan.includedCredits,
        kind: "plan_grant",
        sourceKey: `plan_grant:${record.orgId}:${plan.id}:${record.currentPeriodStart.toISOString()}`
      })
    }

    const view = (record: SubscriptionRecord) =>
      Effect.map(repo.balance(record.orgId), (creditsBalance): SubscriptionView => ({ ...record, plan: PLANS[record.planId], creditsBalance }))

    /**
     * Locks the org's subscription, settles lapsed periods, applies `change` and saves, in one
     * transaction. The payment provider is called inside it: the row lock keeps two concurrent
     * plan selections from opening two checkouts.
     */
    const mutate = <E>(orgId: string, change: (record: SubscriptionRecord, at: Date) => Effect.Effect<SubscriptionRecord, E>) =>
      transaction(
        Effect.gen(function* () {
          const found = yield* repo.findForUpdate(orgId)
          if (Option.isNone(found)) return yield* new SubscriptionNotFound({ orgId })
          if (found.value.customerStatus === "closed") return yield* new CustomerClosed({ orgId })
          const at = yield* now
          const next = yield* change(settle(found.value, at), at)
          if (next !== found.value) yield* repo.save(next)
          if (next.planId !== found.value.planId || next.currentPeriodStart.getTime() !== found.value.currentPeriodStart.getTime()) yield* grantPlanCredits(next)
          return yield* view(next)
        })
      )

    /** A pending hosted checkout, asked about: completed → the new plan; expired → back as before. */
    const reconcileCheckout = (record: SubscriptionRecord) =>
      Effect.gen(function* () {
        if (record.status !== "pending_checkout" || record.checkoutSessionId === null) return Option.none()
        const sessionId = record.checkoutSessionId
        const state = yield* provider.checkoutState(sessionId).pipe(
          Effect.catchTag("PaymentProviderUnavailable", () => Effect.succeed("open" as const))
        )
        if (state === "open") return Option.none()
        return Option.some(
          yield* mutate(record.orgId, (current, at) => {
            // Another request may have moved on since the read.
            if (current.status !== "pending_checkout" || current.checkoutSessionId !== sessionId || current.pendingPlanId === null) return Effect.succeed(current)
            return Effect.succeed(state === "complete" ? activate(current, PLANS[current.pendingPlanId], at) : abandonCheckout(current))
          })
        )
      })

    const selectPlanOn = (record: SubscriptionRecord, plan: Plan, at: Date) =>
      Effect.gen(function* () {
        // Re-selecting the plan the org is on keeps its period and clears a scheduled cancel.
        if (record.status === "active" && record.planId === plan.id) return scheduleCancel(record, false)
        if (!isPaid(plan)) return activate(record, plan, at)
        const checkout = yield* provider.startCheckout({ orgId: record.orgId, plan })
        return checkout._tag === "Completed" ? activate(record, plan, at) : awaitCheckout(record, plan, checkout)
      })

    const listPlans = tracedFn("Subscriptions.listPlans")(function* () {
      return planList
    })

    const get = tracedFn("Subscriptions.get")(function* (principal: Principal, orgId: string) {
      yield* checkOrgId(orgId)
      yield* access.require(principal, orgId, BILLING_READ)
      const found = yield* repo.find(orgId)
      if (Option.isNone(found)) return yield* new SubscriptionNotFound({ orgId })
      const reconciled = yield* reconcileCheckout(found.value).pipe(Effect.catchTag("CustomerClosed", () => Effect.succeedNone))
      if (Option.isSome(reconciled)) return reconciled.value
      const at = yield* now
      const settled = settle(found.value, at)
      // A read that finds lapsed periods writes them back (under the row lock, re-settled there).
      if (settled !== found.value) return yield* mutate(orgId, (current) => Effect.succeed(current)).pipe(Effect.catchTag("CustomerClosed", () => view(settled)))
      return yield* view(settled)
    })

    const selectPlan = tracedFn("Subscriptions.selectPlan")(function* (principal: Principal, orgId: string, planId: string) {
      yield* checkOrgId(orgId)
      yield* access.require(principal, orgId, BILLING_MANAGE)
      const plan = yield* planOf(planId)
      return yield* mutate(orgId, (record, at) => selectPlanOn(record, plan, at))
    })

    const cancel = tracedFn("Subscriptions.cancel")(function* (principal: Principal, orgId: string, immediate: boolean) {
      yield* checkOrgId(orgId)
      yield* access.require(principal, orgId, BILLING_MANAGE)
      return yield* mutate(orgId, (record, at) => Effect.succeed(immediate ? cancelNow(record, at) : scheduleCancel(record, true)))
    })

    /**
     * The update endpoint: a plan change, cancel now, or (un)scheduling the cancel at period end.
     * cancel_now false and absent fields ask for nothing; contradictions are refused before any change.
     */
    const update = tracedFn("Subscriptions.update")(function* (principal: Principal, orgId: string, input: SubscriptionUpdate) {
      yield* checkOrgId(orgId)
      yield* access.require(principal, orgId, BILLING_MANAGE)
      const { planId, cancelNow: now_, cancelAtPeriodEnd } = input
      if (planId === undefined && now_ === undefined && cancelAtPeriodEnd === undefined) return yield* new NoFieldsToUpdate()
      if (now_ === true && cancelAtPeriodEnd === true) {
        return yield* new ContradictoryUpdate({ message: "cancel_now and cancel_at_period_end cannot both be true: cancel now, or at the period end" })
      }
      if (now_ === true && planId !== undefined) {
        return yield* new ContradictoryUpdate({ message: "plan_id cannot be combined with cancel_now: a plan change keeps the subscription" })
      }
      if (planId === undefined && now_ === false && cancelAtPeriodEnd === undefined) return yield* new NoFieldsToUpdate()
      const plan = planId === undefined ? undefined : yield* planOf(planId)
      return yield* mutate(orgId, (record, at) =>
        Effect.gen(function* () {
          if (now_ === true) return cancelNow(record, at)
          const changed = plan === undefined ? record : yield* selectPlanOn(record, plan, at)
          return cancelAtPeriodEnd === undefined ? changed : scheduleCancel(changed, cancelAtPeriodEnd)
        })
      )
    })

    /**
     * Whether the org may hold one more of `resource`. An org billing has not set up yet is on the
     * free plan (where every org starts), so creates right after the org was made are not refused.
     */
    const checkEntitlement = tracedFn("Subscriptions.checkEntitlement")(function* (principal: Principal, orgId: string, resource: Resource, inUse: number) {
      yield* checkOrgId(orgId)
      if (!Number.isInteger(inUse) || inUse < 0) return yield* new InvalidArgument({ field: "in_use", message: "in_use must be a non-negative integer" })
      yield* access.require(principal, orgId, BILLING_READ)
      const found = yield* repo.find(orgId)
      const at = yield* now
      const plan = Option.match(found, { onNone: () => FREE_PLAN, onSome: (record) => PLANS[effectivePlanId(settle(record, at))] })
      return { ...entitlement(plan, resource, inUse), planId: plan.id }
    })

    // ---- events ----

    /**
     * events.org.created: customer, free subscription for one month from now, free-tier credits,
     * in one transaction. A repeat (same org) changes nothing: the customer insert says so first.
     */
    const setUpOrg = tracedFn("Subscriptions.setUpOrg")(function* (event: OrgCreated, eventId: string) {
      return yield* transaction(
        Effect.gen(function* () {
          if (!(yield* repo.insertCustomer(event.org_id, eventId))) return false
          const at = yield* now
          yield* repo.insertSubscription({
            orgId: event.org_id,
            planId: FREE_PLAN.id,
            status: "active",
            currentPeriodStart: at,
            currentPeriodEnd: addMonth(at),
            cancelAtPeriodEnd: false,
            canceledAt: null,
            pendingPlanId: null,
            checkoutSessionId: null,
            checkoutUrl: null,
            customerStatus: "active"
          })
          yield* repo.appendCredit({ orgId: event.org_id, amountCents: FREE_PLAN.includedCredits, kind: "free_tier_grant", sourceKey: `free_tier_grant:${event.org_id}` })
          return true
        })
      )
    })

    /** events.org.deleted: the customer is closed and the subscription canceled now. Repeats are no-ops. */
    const closeOrg = tracedFn("Subscriptions.closeOrg")(function* (event: OrgDeleted) {
      yield* transaction(
        Effect.gen(function* () {
          const at = yield* now
          const found = yield* repo.findForUpdate(event.org_id)
          yield* repo.closeCustomer(event.org_id, at)
          if (Option.isSome(found) && found.value.status !== "canceled") yield* repo.save(cancelNow(found.value, at))
        })
      )
    })

    return { listPlans, get, selectPlan, cancel, update, checkEntitlement, setUpOrg, closeOrg }
  })
}) {}
