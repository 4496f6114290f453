import type { Transport } from "@connectrpc/connect"
import { type BillingUnavailable, type PlanAllowance, planAllowance, requireWithin, ServiceIdentity } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import type { BranchesRepo } from "./BranchesRepo.js"

/**
 * What the org's plan allows of branches (billing's CheckEntitlement), asked as this unit's service
 * principal: the caller's branches.create was checked already. Creates ask before they take the
 * org's limit lock and compare the count under it (`requireRoomForInserted`), so billing's round
 * trip is not part of the lock's hold.
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

/**
 * Whether the branch or snapshot this transaction has just inserted fits the org's plan, decided
 * as the create's last step before its commit: under the org's limit lock (held to commit) the
 * live count holds the new row and every row of the creates that committed before. Taken last,
 * the lock is held for one count and the commit rather than for the whole create: ten creates at
 * once in one org queued behind it, their 202s spread over ~300 ms.
 */
export const requireRoomForInserted = (repo: BranchesRepo, allowance: PlanAllowance) =>
  Effect.zipRight(
    repo.lockOrgLimit(allowance.orgId),
    Effect.flatMap(repo.liveAgainstPlan(allowance.orgId), (live) => requireWithin(allowance, live - 1))
  ).pipe(Effect.withSpan("requireRoomForInserted", { attributes: { orgId: allowance.orgId } }))
