import { Caller, effectService, type Routes } from "@scion/kit"
import { BillingService } from "@scion/proto/scion/billing/v1/billing_pb"
import { Effect, Option } from "effect"
import { type BillingError, InvalidArgument, toWireError, Unauthenticated } from "../domain/errors.js"
import { Subscriptions } from "../Subscriptions.js"
import { planToProto, resourceFromProto, subscriptionToProto } from "./mapping.js"

/** The verified principal of the request; none means UNAUTHENTICATED. */
const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

/** BillingService as Connect routes over the Subscriptions service. */
export const billingRoutes = Effect.gen(function* () {
  const subscriptions = yield* Subscriptions
  const answer = Effect.map(subscriptionToProto)

  const routes = yield* effectService<typeof BillingService, BillingError, never>(
    BillingService,
    {
      listPlans: () => Effect.map(subscriptions.listPlans(), (plans) => ({ plans: plans.map(planToProto) })),
      getSubscription: (req) => Effect.flatMap(caller, (p) => subscriptions.get(p, req.orgId)).pipe(answer, Effect.map((subscription) => ({ subscription }))),
      selectPlan: (req) => Effect.flatMap(caller, (p) => subscriptions.selectPlan(p, req.orgId, req.planId)).pipe(answer, Effect.map((subscription) => ({ subscription }))),
      cancelSubscription: (req) =>
        Effect.flatMap(caller, (p) => subscriptions.cancel(p, req.orgId, req.immediate)).pipe(answer, Effect.map((subscription) => ({ subscription }))),
      updateSubscription: (req) =>
        Effect.flatMap(caller, (p) =>
          subscriptions.update(p, req.orgId, { planId: req.planId, cancelNow: req.cancelNow, cancelAtPeriodEnd: req.cancelAtPeriodEnd })
        ).pipe(answer, Effect.map((subscription) => ({ subscription }))),
      checkEntitlement: (req) =>
        Effect.gen(function* () {
          const principal = yield* caller
          const resource = resourceFromProto[req.resource]
          if (resource === undefined) return yield* new InvalidArgument({ field: "resource", message: "resource is required: projects, connectors, branches or environments" })
          const result = yield* subscriptions.checkEntitlement(principal, req.orgId, resource, req.inUse)
          return { allowed: result.allowed, planId: result.planId, ...(result.limit !== null ? { limit: result.limit } : {}) }
        })
    },
    toWireError
  )
  return [routes] as ReadonlyArray<Routes>
})
