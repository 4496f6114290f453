/**
 * Billing end to end: identity, operation, billing and the gateway as separate processes, org
 * events over the machine's NATS. Billing sets an org up when it consumes events.org.created,
 * so the tests wait (bounded) on the subscription read after creating an org.
 */
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect"
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { BillingService, Resource } from "@scion/proto/scion/billing/v1/billing_pb"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg } from "../support/flows.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

const FREE_CREDITS = 1_000
const PRO_CREDITS = 2_500
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const sessions: Array<Http2SessionManager> = []
const client = <S extends typeof BillingService | typeof AuthService>(service: S, baseUrl: string): Client<S> => {
  const sessionManager = new Http2SessionManager(baseUrl)
  sessions.push(sessionManager)
  return createClient(service, createGrpcTransport({ baseUrl, sessionManager }))
}

let scion: Scion
let db: pg.Client

/**
 * Polls the subscription until billing has set the org up (10 s at most); 404 until then. Any
 * other answer ends the wait and fails here with the response, not as a timeout.
 */
const subscriptionOnceSetUp = async (token: string, orgId: string) => {
  let last: { status: number; body: any } = { status: 0, body: null }
  await waitFor(
    `billing to set up ${orgId}`,
    async () => {
      last = await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`, { token })
      return last.status !== 404
    },
    10_000
  )
  expect(last.status, scion.explain(last)).toBe(200)
  return last.body
}

const orgWithBilling = async (token: string, name: string) => {
  const org = await createOrg(scion, token, name)
  return { orgId: org.org_id, subscription: await subscriptionOnceSetUp(token, org.org_id) }
}

const expectDetail = (response: { status: number; body: any }, status: number, pattern?: RegExp) => {
  expect(response.status, scion.explain(response)).toBe(status)
  expect(typeof response.body.detail, JSON.stringify(response.body)).toBe("string")
  if (pattern) expect(response.body.detail).toMatch(pattern)
}

const expect422 = (response: { status: number; body: any }, loc: ReadonlyArray<string>) => {
  expect(response.status, scion.explain(response)).toBe(422)
  expect(response.body.detail).toEqual(expect.arrayContaining([expect.objectContaining({ loc })]))
}

beforeAll(async () => {
  scion = await startScion()
  db = new pg.Client({ connectionString: scion.databaseUrl })
  await db.connect()
})
afterAll(async () => {
  sessions.forEach((s) => s.abort())
  await db?.end()
  await scion?.stop()
})

describe("billing", () => {
  let owner: { token: string; userId: string }
  let orgId: string
  let member: { token: string }
  let admin: { token: string }
  let stranger: { token: string }
  let memberKey: string

  beforeAll(async () => {
    owner = await signUp(scion, "billing-owner")
    ;({ orgId } = await orgWithBilling(owner.token, "Billed"))
    member = await addMember(scion, owner.token, orgId, "member")
    admin = await addMember(scion, owner.token, orgId, "admin")
    stranger = await signUp(scion, "stranger")
    await createOrg(scion, stranger.token, "Elsewhere")
    memberKey = (await createApiKey(scion, owner.token, orgId, { role_id: "role_org_member" })).secret
  })

  it("sets a new org up from events.org.created: free plan for a month, free-tier credits", async () => {
    const { token } = await signUp(scion, "fresh")
    const { orgId: fresh, subscription } = await orgWithBilling(token, "Fresh")
    expect(subscription).toMatchObject({
      org_id: fresh,
      plan_id: "free",
      status: "active",
      cancel_at_period_end: false,
      canceled_at: null,
      credits_balance: FREE_CREDITS,
      pending_plan_id: null,
      checkout_url: null,
      plan: { plan_id: "free", monthly_price_cents: 0, currency: "usd", included_credits: FREE_CREDITS }
    })
    expect(subscription.current_period_start).toMatch(ISO_Z)
    const days = (Date.parse(subscription.current_period_end) - Date.parse(subscription.current_period_start)) / 86_400_000
    expect(days).toBeGreaterThanOrEqual(28)
    expect(days).toBeLessThanOrEqual(31)
    // Exactly one customer and one ledger row, whatever redeliveries happened.
    const rows = await db.query("select (select count(*)::int from billing.customers where org_id = $1) as customers, (select count(*)::int from billing.credit_ledger where org_id = $1) as credits", [fresh])
    expect(rows.rows[0]).toEqual({ customers: 1, credits: 1 })
  })

  it("lists the plans publicly (extension), limits included", async () => {
    const response = await scion.request("GET", "/v1/billing/plans")
    expect(response.status).toBe(200)
    expect(response.body.plans.map((p: any) => p.plan_id)).toEqual(["free", "pro", "team"])
    const [free, pro, team] = response.body.plans
    expect(free).toMatchObject({ monthly_price_cents: 0, included_credits: FREE_CREDITS, limits: { projects: 10, connectors: 3, branches: 25, environments: 1, engine_hours: 100 } })
    expect(pro).toMatchObject({ monthly_price_cents: 2_500, included_credits: PRO_CREDITS, limits: { connectors: 10 } })
    expect(team.limits.projects).toBeNull()
  })

  it("reads need org membership: members and the org's API keys read, others are 403, no token is 401", async () => {
    for (const token of [owner.token, member.token, admin.token, memberKey]) {
      const response = await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`, { token })
      expect(response.status, scion.explain(response)).toBe(200)
      expect(response.body.org_id).toBe(orgId)
    }
    expectDetail(await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`, { token: stranger.token }), 403)
    expectDetail(await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`), 401)
    const { orgId: otherOrg } = await orgWithBilling(stranger.token, "Stranger's billed org")
    expectDetail(await scion.request("GET", `/v1/orgs/${otherOrg}/billing/subscription`, { token: memberKey }), 403)
  })

  it("changes need billing.manage: members, admins, a member-role API key and non-members are 403", async () => {
    for (const token of [member.token, admin.token, memberKey, stranger.token]) {
      expectDetail(await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions`, { token, body: { plan_id: "pro" } }), 403)
      expectDetail(await scion.request("DELETE", `/v1/orgs/${orgId}/billing/subscription?immediate=true`, { token }), 403)
      expectDetail(await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions:update`, { token, body: { cancel_now: true } }), 403)
    }
    for (const [method, path] of [["POST", "subscriptions"], ["DELETE", "subscription"], ["POST", "subscriptions:update"]] as const) {
      expectDetail(await scion.request(method, `/v1/orgs/${orgId}/billing/${path}`, method === "POST" ? { body: { plan_id: "pro" } } : {}), 401)
    }
    expect((await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`, { token: owner.token })).body.plan_id).toBe("free")
  })

  it("selects plans: unknown plan 400, malformed 422, pro active at once with its credits (local checkout)", async () => {
    const path = `/v1/orgs/${orgId}/billing/subscriptions`
    expectDetail(await scion.request("POST", path, { token: owner.token, body: { plan_id: "enterprise" } }), 400, /Unknown plan 'enterprise'/)
    expect422(await scion.request("POST", path, { token: owner.token, body: { plan_id: 5 } }), ["body", "plan_id"])
    expect422(await scion.request("POST", path, { token: owner.token, body: {} }), ["body", "plan_id"])
    expect422(await scion.request("POST", path, { token: owner.token, rawBody: "{nope" }), ["body"])
    const pro = await scion.request("POST", path, { token: owner.token, body: { plan_id: "pro" } })
    expect(pro.status, scion.explain(pro)).toBe(200)
    expect(pro.body).toMatchObject({ plan_id: "pro", status: "active", checkout_url: null, credits_balance: FREE_CREDITS + PRO_CREDITS, plan: { plan_id: "pro" } })
    const read = await scion.request("GET", `/v1/orgs/${orgId}/billing/subscription`, { token: member.token })
    expect(read.body).toEqual(pro.body)
  })

  it("cancels at the period end (default) or now; immediate must be a boolean; cancelling twice is 200", async () => {
    const path = `/v1/orgs/${orgId}/billing/subscription`
    expect422(await scion.request("DELETE", `${path}?immediate=maybe`, { token: owner.token }), ["query", "immediate"])
    expect422(await scion.request("DELETE", `${path}?immediate=1`, { token: owner.token }), ["query", "immediate"])
    const scheduled = await scion.request("DELETE", path, { token: owner.token })
    expect(scheduled.status).toBe(200)
    expect(scheduled.body).toMatchObject({ plan_id: "pro", status: "active", cancel_at_period_end: true, canceled_at: null })
    expect((await scion.request("DELETE", `${path}?immediate=false`, { token: owner.token })).body.cancel_at_period_end).toBe(true)
    const now = await scion.request("DELETE", `${path}?immediate=true`, { token: owner.token })
    expect(now.status).toBe(200)
    expect(now.body).toMatchObject({ plan_id: "free", status: "canceled", cancel_at_period_end: false })
    expect(now.body.canceled_at).toMatch(ISO_Z)
    const again = await scion.request("DELETE", `${path}?immediate=true`, { token: owner.token })
    expect(again.status).toBe(200)
    expect(again.body.canceled_at).toBe(now.body.canceled_at)
  })

  it("subscriptions:update: plan change, schedule and unschedule, cancel now; contradictions and empty bodies 400; wrong types 422", async () => {
    const path = `/v1/orgs/${orgId}/billing/subscriptions:update`
    const update = (body: unknown) => scion.request("POST", path, { token: owner.token, body })
    expectDetail(await update({}), 400, /No fields to update/)
    expectDetail(await update({ cancel_now: false }), 400, /No fields to update/)
    expectDetail(await update({ cancel_now: true, cancel_at_period_end: true }), 400, /cannot both be true/)
    expectDetail(await update({ plan_id: "pro", cancel_now: true }), 400, /plan_id cannot be combined with cancel_now/)
    expectDetail(await update({ plan_id: "gold" }), 400, /Unknown plan/)
    expect422(await update({ cancel_now: "yes" }), ["body", "cancel_now"])
    expect422(await update({ cancel_at_period_end: 1 }), ["body", "cancel_at_period_end"])
    expect422(await update({ plan_id: 7 }), ["body", "plan_id"])
    const team = await update({ plan_id: "team" })
    expect(team.status, scion.explain(team)).toBe(200)
    expect(team.body).toMatchObject({ plan_id: "team", status: "active", canceled_at: null, cancel_at_period_end: false })
    expect((await update({ cancel_at_period_end: true })).body).toMatchObject({ plan_id: "team", cancel_at_period_end: true })
    expect((await update({ cancel_at_period_end: false })).body).toMatchObject({ plan_id: "team", cancel_at_period_end: false })
    expect((await update({ plan_id: "pro", cancel_at_period_end: true })).body).toMatchObject({ plan_id: "pro", cancel_at_period_end: true })
    const canceled = await update({ cancel_now: true })
    expect(canceled.body).toMatchObject({ plan_id: "free", status: "canceled" })
    expect((await update({ cancel_now: true })).body.canceled_at).toBe(canceled.body.canceled_at)
  })

  it("CheckEntitlement (RPC): any member may ask; limits follow the plan; non-members are refused", async () => {
    const { orgId: limited } = await orgWithBilling(owner.token, "Limited")
    const memberOfLimited = await addMember(scion, owner.token, limited, "viewer", "viewer")
    const auth = client(AuthService, scion.identityUrl)
    const billing = client(BillingService, scion.billingUrl)
    const as = async (token: string) => ({ headers: { "x-scion-principal": (await auth.authenticate({ bearerToken: token })).principalToken } })
    const viewer = await as(memberOfLimited.token)
    expect(await billing.checkEntitlement({ orgId: limited, resource: Resource.CONNECTORS, inUse: 2 }, viewer)).toMatchObject({ allowed: true, limit: 3, planId: "free" })
    expect(await billing.checkEntitlement({ orgId: limited, resource: Resource.CONNECTORS, inUse: 3 }, viewer)).toMatchObject({ allowed: false, limit: 3, planId: "free" })
    expect(await billing.checkEntitlement({ orgId: limited, resource: Resource.PROJECTS, inUse: 0 }, viewer)).toMatchObject({ allowed: true, limit: 10 })
    await scion.request("POST", `/v1/orgs/${limited}/billing/subscriptions`, { token: owner.token, body: { plan_id: "team" } })
    const team = await billing.checkEntitlement({ orgId: limited, resource: Resource.PROJECTS, inUse: 1_000 }, viewer)
    expect(team).toMatchObject({ allowed: true, planId: "team" })
    expect(team.limit).toBeUndefined()
    const refused = await billing.checkEntitlement({ orgId: limited, resource: Resource.PROJECTS, inUse: 0 }, await as(stranger.token)).catch((e) => e)
    expect(ConnectError.from(refused).code).toBe(Code.PermissionDenied)
    const anonymous = await billing.checkEntitlement({ orgId: limited, resource: Resource.PROJECTS, inUse: 0 }).catch((e) => e)
    expect(ConnectError.from(anonymous).code).toBe(Code.Unauthenticated)
    const unspecified = await billing.checkEntitlement({ orgId: limited, resource: Resource.UNSPECIFIED, inUse: 0 }, viewer).catch((e) => e)
    expect(ConnectError.from(unspecified).code).toBe(Code.InvalidArgument)
  })

  it("answers 404 while billing has not set an org up", async () => {
    const { orgId: pending } = await orgWithBilling(owner.token, "Not yet")
    // As if events.org.created had not been consumed yet.
    await db.query("delete from billing.subscriptions where org_id = $1", [pending])
    expectDetail(await scion.request("GET", `/v1/orgs/${pending}/billing/subscription`, { token: owner.token }), 404, /not set up yet/)
    expectDetail(await scion.request("POST", `/v1/orgs/${pending}/billing/subscriptions`, { token: owner.token, body: { plan_id: "pro" } }), 404)
  })

  it("closes the customer when the org is deleted (events.org.deleted)", async () => {
    const { orgId: doomed } = await orgWithBilling(owner.token, "Doomed")
    const deleted = await scion.request("DELETE", `/v1/orgs/${doomed}`, { token: owner.token })
    expect(deleted.status, scion.explain(deleted)).toBe(204)
    await waitFor(
      "the customer to be closed",
      async () => (await db.query("select status from billing.customers where org_id = $1", [doomed])).rows[0]?.status === "closed",
      10_000
    )
    const row = await db.query("select s.status, s.plan_id from billing.subscriptions s where org_id = $1", [doomed])
    expect(row.rows[0]).toEqual({ status: "canceled", plan_id: "free" })
    // The org is gone: its billing is not readable any more.
    expect((await scion.request("GET", `/v1/orgs/${doomed}/billing/subscription`, { token: owner.token })).status).toBe(403)
  })
})
