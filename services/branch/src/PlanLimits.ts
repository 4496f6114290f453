import type { Transport } from "@connectrpc/connect"
import { type BillingUnavailable, type PlanLimitReached, planLimitCheck, ServiceIdentity } from "@scion/kit"
import { Context, Effect, Layer } from "effect"

/**
 * Whether the org's plan has room for one more branch (billing's CheckEntitlement), asked as this
 * unit's service principal: the caller's branches.create was checked already.
 */
export class PlanLimits extends Context.Tag("@scion/branch/PlanLimits")<
  PlanLimits,
  { readonly requireBranchRoom: (orgId: string, inUse: number) => Effect.Effect<void, PlanLimitReached | BillingUnavailable> }
>() {
  static readonly unlimited: Layer.Layer<PlanLimits> = Layer.succeed(PlanLimits, PlanLimits.of({ requireBranchRoom: () => Effect.void }))

  static billing(transport: Transport): Layer.Layer<PlanLimits, never, ServiceIdentity> {
    return Layer.effect(
      PlanLimits,
      Effect.map(ServiceIdentity, (service) => {
        const check = planLimitCheck(transport, service.token)
        return PlanLimits.of({ requireBranchRoom: (orgId, inUse) => check(orgId, "branches", inUse) })
      })
    )
  }
}
