import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { addMonth, FREE_PLAN, PLANS, settle, Subscriptions, type SubscriptionRecord } from "../src/index.js"
import { billingTestLayer, newOrg, newOrgId, orgCreated } from "./support.js"

/** An org identity made and billing has set up, with its owner and a plain member. */
const setUp = Effect.gen(function* () {
  const subscriptions = yield* Subscriptions
  const { orgId, owner, member } = yield* newOrg()
  yield* subscriptions.setUpOrg(orgCreated(orgId), `org.created.${orgId}`)
  return { subscriptions, orgId, owner, member }
})

describe("subscriptions", () => {
  layer(billingTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("sets an org up once: customer, free plan for a month, free-tier credits", () =>
      Effect.gen(function* () {
        const subscriptions = yield* Subscriptions
        const sql = yield* SqlClient.SqlClient
        const { orgId, member } = yield* newOrg()
        expect(yield* subscriptions.setUpOrg(orgCreated(orgId), `org.created.${orgId}`)).toBe(true)
        // The same event again, and the same org under another message id: nothing changes.
        expect(yield* subscriptions.setUpOrg(orgCreated(orgId), `org.created.${orgId}`)).toBe(false)
        expect(yield* subscriptions.setUpOrg(orgCreated(orgId), `other-${orgId}`)).toBe(false)
        const customers = yield* sql<{ n: number }>`select count(*)::int as n from customers where org_id = ${orgId}`
        const credits = yield* sql<{ n: number; sum: number }>`select count(*)::int as n, sum(amount_cents)::int as sum from credit_ledger where org_id = ${orgId}`
        expect(customers[0]?.n).toBe(1)
        expect(credits[0]).toEqual({ n: 1, sum: FREE_PLAN.includedCredits })
        const view = yield* subscriptions.get(member, orgId)
        expect(view).toMatchObject({ orgId, planId: "free", status: "active", cancelAtPeriodEnd: false, canceledAt: null, creditsBalance: 1_000, checkoutUrl: null })
        expect(view.currentPeriodEnd.getTime()).toBe(addMonth(view.currentPeriodStart).getTime())
      })
    )

    it.effect("the credit ledger is append-only", () =>
      Effect.gen(function* () {
        const { orgId } = yield* setUp
        const sql = yield* SqlClient.SqlClient
        const update = yield* Effect.flip(sql`update credit_ledger set amount_cents = 1 where org_id = ${orgId}`)
        expect(String(update.cause)).toMatch(/append-only/)
        const remove = yield* Effect.flip(sql`delete from credit_ledger where org_id = ${orgId}`)
        expect(String(remove.cause)).toMatch(/append-only/)
      })
    )

    it.effect("reads need membership, changes need billing.manage; unknown orgs are not set up", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, member } = yield* setUp
        const stranger = (yield* newOrg("Other")).owner
        expect(yield* Effect.flip(subscriptions.get(stranger, orgId))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(subscriptions.selectPlan(member, orgId, "pro"))).toMatchObject({ _tag: "PermissionDenied", permission: "billing.manage" })
        expect(yield* Effect.flip(subscriptions.cancel(member, orgId, true))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(subscriptions.update(member, orgId, { cancelNow: true }))).toMatchObject({ _tag: "PermissionDenied" })
        const notYet = yield* newOrg("Not yet")
        expect(yield* Effect.flip(subscriptions.get(notYet.owner, notYet.orgId))).toMatchObject({ _tag: "SubscriptionNotFound", orgId: notYet.orgId })
      })
    )

    it.effect("selects plans: local checkout completes at once and grants the plan's credits; unknown plans are refused", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, owner } = yield* setUp
        expect(yield* Effect.flip(subscriptions.selectPlan(owner, orgId, "enterprise"))).toMatchObject({ _tag: "UnknownPlan", planId: "enterprise" })
        const pro = yield* subscriptions.selectPlan(owner, orgId, "pro")
        expect(pro).toMatchObject({ planId: "pro", status: "active", checkoutUrl: null, pendingPlanId: null, creditsBalance: 1_000 + PLANS.pro.includedCredits })
        expect(pro.plan.limits.connectors).toBe(10)
        // Selecting the same plan again changes nothing.
        const again = yield* subscriptions.selectPlan(owner, orgId, "pro")
        expect(again.currentPeriodStart).toEqual(pro.currentPeriodStart)
        expect(again.creditsBalance).toBe(pro.creditsBalance)
        const free = yield* subscriptions.selectPlan(owner, orgId, "free")
        expect(free).toMatchObject({ planId: "free", status: "active", creditsBalance: pro.creditsBalance })
      })
    )

    it.effect("cancels at period end or now; a canceled subscription stays canceled (idempotent)", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, owner } = yield* setUp
        yield* subscriptions.selectPlan(owner, orgId, "team")
        const scheduled = yield* subscriptions.cancel(owner, orgId, false)
        expect(scheduled).toMatchObject({ planId: "team", status: "active", cancelAtPeriodEnd: true, canceledAt: null })
        const now = yield* subscriptions.cancel(owner, orgId, true)
        expect(now).toMatchObject({ planId: "free", status: "canceled", cancelAtPeriodEnd: false })
        expect(now.canceledAt).toBeInstanceOf(Date)
        const again = yield* subscriptions.cancel(owner, orgId, true)
        expect(again.canceledAt).toEqual(now.canceledAt)
        expect((yield* subscriptions.cancel(owner, orgId, false)).status).toBe("canceled")
        // Selecting a plan again starts a new subscription.
        expect(yield* subscriptions.selectPlan(owner, orgId, "pro")).toMatchObject({ planId: "pro", status: "active", canceledAt: null })
      })
    )

    it.effect("update: plan changes, cancel flags, contradictions and empty requests", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, owner } = yield* setUp
        expect(yield* Effect.flip(subscriptions.update(owner, orgId, {}))).toMatchObject({ _tag: "NoFieldsToUpdate" })
        expect(yield* Effect.flip(subscriptions.update(owner, orgId, { cancelNow: false }))).toMatchObject({ _tag: "NoFieldsToUpdate" })
        expect(yield* Effect.flip(subscriptions.update(owner, orgId, { cancelNow: true, cancelAtPeriodEnd: true }))).toMatchObject({ _tag: "ContradictoryUpdate" })
        expect(yield* Effect.flip(subscriptions.update(owner, orgId, { cancelNow: true, planId: "pro" }))).toMatchObject({ _tag: "ContradictoryUpdate" })
        expect(yield* Effect.flip(subscriptions.update(owner, orgId, { planId: "gold" }))).toMatchObject({ _tag: "UnknownPlan" })
        expect(yield* subscriptions.update(owner, orgId, { planId: "pro", cancelAtPeriodEnd: true })).toMatchObject({ planId: "pro", cancelAtPeriodEnd: true })
        expect(yield* subscriptions.update(owner, orgId, { cancelAtPeriodEnd: false })).toMatchObject({ planId: "pro", cancelAtPeriodEnd: false })
        expect(yield* subscriptions.update(owner, orgId, { cancelNow: true, cancelAtPeriodEnd: false })).toMatchObject({ planId: "free", status: "canceled" })
      })
    )

    it.effect("entitlements follow the effective plan; an org not set up yet is on free", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, owner, member } = yield* setUp
        expect(yield* subscriptions.checkEntitlement(member, orgId, "connectors", 2)).toEqual({ allowed: true, limit: 3, planId: "free" })
        expect(yield* subscriptions.checkEntitlement(member, orgId, "connectors", 3)).toEqual({ allowed: false, limit: 3, planId: "free" })
        yield* subscriptions.selectPlan(owner, orgId, "team")
        expect(yield* subscriptions.checkEntitlement(member, orgId, "projects", 10_000)).toEqual({ allowed: true, limit: null, planId: "team" })
        yield* subscriptions.cancel(owner, orgId, true)
        expect((yield* subscriptions.checkEntitlement(member, orgId, "connectors", 3)).planId).toBe("free")
        const fresh = yield* newOrg("Fresh")
        expect(yield* subscriptions.checkEntitlement(fresh.member, fresh.orgId, "projects", 0)).toEqual({ allowed: true, limit: 10, planId: "free" })
        expect(yield* Effect.flip(subscriptions.checkEntitlement(member, orgId, "projects", -1))).toMatchObject({ _tag: "InvalidArgument", field: "in_use" })
      })
    )

    it.effect("org deleted: the customer is closed and the subscription canceled; later changes are refused", () =>
      Effect.gen(function* () {
        const { subscriptions, orgId, owner } = yield* setUp
        const sql = yield* SqlClient.SqlClient
        yield* subscriptions.selectPlan(owner, orgId, "pro")
        const deleted = { org_id: orgId, deleted_at: new Date().toISOString() }
        yield* subscriptions.closeOrg(deleted)
        yield* subscriptions.closeOrg(deleted)
        const rows = yield* sql<{ status: string; sub: string; plan: string }>`
          select c.status, s.status as sub, s.plan_id as plan from customers c join subscriptions s using (org_id) where org_id = ${orgId}`
        expect(rows).toEqual([{ status: "closed", sub: "canceled", plan: "free" }])
        expect(yield* Effect.flip(subscriptions.selectPlan(owner, orgId, "team"))).toMatchObject({ _tag: "CustomerClosed" })
        // A delete that arrives before its create leaves a closed customer the create cannot reopen.
        const early = newOrgId()
        yield* subscriptions.closeOrg({ org_id: early, deleted_at: new Date().toISOString() })
        expect(yield* subscriptions.setUpOrg(orgCreated(early), `org.created.${early}`)).toBe(false)
      })
    )
  })
})

describe("periods", () => {
  const record = (over: Partial<SubscriptionRecord> = {}): SubscriptionRecord => ({
    orgId: "org_1",
    planId: "pro",
    status: "active",
    currentPeriodStart: new Date("2026-01-31T10:00:00Z"),
    currentPeriodEnd: new Date("2026-02-28T10:00:00Z"),
    cancelAtPeriodEnd: false,
    canceledAt: null,
    pendingPlanId: null,
    checkoutSessionId: null,
    checkoutUrl: null,
    customerStatus: "active",
    ...over
  })

  it("adds a calendar month in UTC, clamped to the month's end", () => {
    expect(addMonth(new Date("2026-01-31T10:00:00Z")).toISOString()).toBe("2026-02-28T10:00:00.000Z")
    expect(addMonth(new Date("2026-12-15T00:00:00Z")).toISOString()).toBe("2027-01-15T00:00:00.000Z")
  })

  it("renews lapsed periods, or applies the scheduled cancel at the period end", () => {
    const current = record()
    expect(settle(current, new Date("2026-02-01T00:00:00Z"))).toBe(current)
    expect(settle(current, new Date("2026-04-01T00:00:00Z"))).toMatchObject({
      currentPeriodStart: new Date("2026-03-28T10:00:00Z"),
      currentPeriodEnd: new Date("2026-04-28T10:00:00Z"),
      status: "active"
    })
    expect(settle(record({ cancelAtPeriodEnd: true }), new Date("2026-03-01T00:00:00Z"))).toMatchObject({
      status: "canceled",
      planId: "free",
      canceledAt: new Date("2026-02-28T10:00:00Z"),
      cancelAtPeriodEnd: false
    })
  })
})
