/**
 * BillingService over a real HTTP/2 port: proto mapping, the wire table (code + reason +
 * metadata), and the principal check, with identity's own principal tokens and answers (see
 * support.ts).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, serveHttp2 } from "@scion/kit"
import { BillingService, Resource, SubscriptionStatus } from "@scion/proto/scion/billing/v1/billing_pb"
import { Effect } from "effect"
import { billingRoutes, Subscriptions } from "../src/index.js"
import { as, billingTestLayer, newOrg, orgCreated } from "./support.js"

const client = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* billingRoutes })
  return makeEffectClient(BillingService, yield* grpcTransport(served.url))
})

describe("BillingService over a real port", () => {
  layer(billingTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("maps subscriptions, plans and errors to the wire", () =>
      Effect.gen(function* () {
        const billing = yield* client
        const { orgId, owner, member } = yield* newOrg()
        yield* (yield* Subscriptions).setUpOrg(orgCreated(orgId), `org.created.${orgId}`)

        const plans = yield* billing.listPlans({})
        expect(plans.plans.map((p) => p.id)).toEqual(["free", "pro", "team"])
        expect(plans.plans[2]?.limits?.projects).toBeUndefined()

        expect(yield* Effect.flip(billing.getSubscription({ orgId }))).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })
        const read = yield* as(member)(billing.getSubscription({ orgId }))
        expect(read.subscription).toMatchObject({ orgId, planId: "free", status: SubscriptionStatus.ACTIVE, creditsBalance: 1000n, cancelAtPeriodEnd: false })
        expect(read.subscription?.canceledAt).toBeUndefined()
        expect(read.subscription?.checkoutUrl).toBeUndefined()

        expect(yield* Effect.flip(as(member)(billing.selectPlan({ orgId, planId: "pro" })))).toMatchObject({
          code: Code.PermissionDenied,
          reason: "PERMISSION_DENIED",
          metadata: { org_id: orgId, permission: "billing.manage" }
        })
        expect(yield* Effect.flip(as(owner)(billing.selectPlan({ orgId, planId: "gold" })))).toMatchObject({
          code: Code.InvalidArgument,
          reason: "UNKNOWN_PLAN",
          metadata: { plan_id: "gold" }
        })
        expect(yield* Effect.flip(as(owner)(billing.updateSubscription({ orgId })))).toMatchObject({ code: Code.InvalidArgument, reason: "NO_FIELDS_TO_UPDATE" })
        expect(yield* Effect.flip(as(owner)(billing.updateSubscription({ orgId, cancelNow: true, cancelAtPeriodEnd: true })))).toMatchObject({
          code: Code.InvalidArgument,
          reason: "CONTRADICTORY_UPDATE"
        })
        const canceled = yield* as(owner)(billing.cancelSubscription({ orgId, immediate: true }))
        expect(canceled.subscription).toMatchObject({ status: SubscriptionStatus.CANCELED, planId: "free" })
        expect(canceled.subscription?.canceledAt).toBeDefined()

        const stranger = (yield* newOrg("Other")).owner
        expect(yield* Effect.flip(as(stranger)(billing.getSubscription({ orgId })))).toMatchObject({ code: Code.PermissionDenied, reason: "NOT_A_MEMBER" })
        const unknown = yield* newOrg("Not set up")
        expect(yield* Effect.flip(as(unknown.owner)(billing.getSubscription({ orgId: unknown.orgId })))).toMatchObject({
          code: Code.NotFound,
          reason: "SUBSCRIPTION_NOT_FOUND"
        })

        const entitled = yield* as(member)(billing.checkEntitlement({ orgId, resource: Resource.BRANCHES, inUse: 25 }))
        expect(entitled).toMatchObject({ allowed: false, limit: 25, planId: "free" })
        expect(yield* Effect.flip(as(member)(billing.checkEntitlement({ orgId, resource: Resource.UNSPECIFIED, inUse: 0 })))).toMatchObject({
          code: Code.InvalidArgument,
          reason: "INVALID_ARGUMENT",
          metadata: { field: "resource" }
        })
      })
    )
  })
})
