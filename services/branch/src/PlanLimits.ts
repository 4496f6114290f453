import type { Transport } from "@connectrpc/connect"
import { type BillingUnavailable, type PlanAllowance, planAllowance, ServiceIdentity } from "@scion/kit"
import { Context, Effect, Layer } from "effect"

/**
 * What the org's plan allows of branches (billing's CheckEntitlement), asked as this unit's service
 * principal: the caller's branches.create was checked already. Creates ask before they take the
 * org's limit lock and compare the count under it (kit `requireWithin`), so billing's round trip
 * is not part of the lock's hold.
 */
export class PlanLimits extends Context.Tag("@scion/branch/PlanLimits")<
  PlanLimits,
  { readonly branchAllowance: (orgId: string) => Effect.Effect<PlanAllowance, BillingUnavailable> }
>() {
  static readonly unlimited: Layer.Layer<PlanLimits> = Layer.succeed(
    PlanLimits,
    PlanLimits.of({ branchAllowance: (orgId) => Effect.succeed({ orgId, resource: "branches", limit: null, planId: "unlimited" }) })
  )

  static billing(transport: Transport): Layer.Layer<PlanLimits, never, ServiceIdentity> {
    return Layer.effect(
      PlanLimits,
      Effect.map(ServiceIdentity, (service) => {
        const allowance = planAllowance(transport, service.token)
        return PlanLimits.of({ branchAllowance: (orgId) => allowance(orgId, "branches") })
      })
    )
  }
}
