import type { Transport } from "@connectrpc/connect"
import { BillingService, Resource } from "@scion/proto/scion/billing/v1/billing_pb"
import { Duration, Effect, Schema } from "effect"
import { Code, type WireEntry } from "./errors.js"
import { makeEffectClient } from "./connect-client.js"
import type { RpcError } from "./errors.js"
import { withPrincipalToken } from "./principal.js"

/** The resources billing's plans limit (ARCHITECTURE: the plan's limits bite where they are created). */
export type PlanLimitedResource = "projects" | "connectors" | "branches" | "environments"

const resources = {
  projects: Resource.PROJECTS,
  connectors: Resource.CONNECTORS,
  branches: Resource.BRANCHES,
  environments: Resource.ENVIRONMENTS
} as const satisfies Record<PlanLimitedResource, Resource>

/** The org's plan has no room for one more. */
export class PlanLimitReached extends Schema.TaggedError<PlanLimitReached>()("PlanLimitReached", {
  orgId: Schema.String,
  resource: Schema.String,
  limit: Schema.Number,
  planId: Schema.String
}) {
  override get message() {
    return `The ${this.planId} plan allows ${this.limit} ${this.resource} per org; upgrade the plan or delete some first`
  }
}

/** Billing could not answer; safe to retry. */
export class BillingUnavailable extends Schema.TaggedError<BillingUnavailable>()("BillingUnavailable", { cause: Schema.String }) {
  override get message() {
    return "Plan limits cannot be checked right now; retry shortly"
  }
}

/** The rows every creating unit puts in its error table for these two. */
export const planLimitWireErrors = {
  PlanLimitReached: {
    code: Code.PermissionDenied,
    reason: "PLAN_LIMIT_REACHED",
    metadata: (e: PlanLimitReached) => ({ org_id: e.orgId, resource: e.resource, limit: String(e.limit), plan_id: e.planId })
  } satisfies WireEntry<PlanLimitReached>,
  BillingUnavailable: { code: Code.Unavailable, reason: "BILLING_UNAVAILABLE" } satisfies WireEntry<BillingUnavailable>
}

/** How long one entitlement check may take; a healthy one takes a few milliseconds. */
export const PLAN_CHECK_DEADLINE = Duration.seconds(5)

/** What an org's plan allows of one resource: `limit` null is unlimited. */
export interface PlanAllowance {
  readonly orgId: string
  readonly resource: PlanLimitedResource
  readonly limit: number | null
  readonly planId: string
}

/**
 * Billing's answer for an org and a resource (its limit and plan), asked as the service principal
 * `principalToken` gives. A unit may ask before it takes its lock, so the call overlaps its other
 * steps, and compare the count under the lock with `requireWithin`; a plan changed in between
 * applies from the next create. Creating units hold locks meanwhile (see their READMEs): a stuck
 * billing answers BillingUnavailable after PLAN_CHECK_DEADLINE.
 */
export const planAllowance = (transport: Transport, principalToken: Effect.Effect<string, RpcError>) => {
  const billing = makeEffectClient(BillingService, transport)
  return (orgId: string, resource: PlanLimitedResource): Effect.Effect<PlanAllowance, BillingUnavailable> =>
    Effect.flatMap(principalToken, (token) => billing.checkEntitlement({ orgId, resource: resources[resource], inUse: 0 }).pipe(withPrincipalToken(token))).pipe(
      Effect.timeoutFail({ duration: PLAN_CHECK_DEADLINE, onTimeout: () => new BillingUnavailable({ cause: `DEADLINE_EXCEEDED: no answer within ${Duration.format(PLAN_CHECK_DEADLINE)}` }) }),
      Effect.catchTag("RpcError", (error) =>
        Effect.zipRight(
          Effect.logWarning("billing could not answer a plan's allowance").pipe(Effect.annotateLogs({ code: error.codeName, reason: error.reason })),
          Effect.fail(new BillingUnavailable({ cause: `${error.codeName}: ${error.reason}` }))
        )
      ),
      Effect.map((answer): PlanAllowance => ({ orgId, resource, limit: answer.limit ?? null, planId: answer.planId })),
      Effect.withSpan("planAllowance", { attributes: { orgId, resource } })
    )
}

/** Room for one more, given `inUse` now, under the allowance billing gave. */
export const requireWithin = (allowance: PlanAllowance, inUse: number): Effect.Effect<void, PlanLimitReached> =>
  allowance.limit !== null && inUse >= allowance.limit
    ? Effect.fail(new PlanLimitReached({ orgId: allowance.orgId, resource: allowance.resource, limit: allowance.limit, planId: allowance.planId }))
    : Effect.void

/**
 * Billing's CheckEntitlement over a Connect transport: may the org hold one more `resource`,
 * given it holds `inUse` now? Asked with `principalToken` (the creating unit's own service
 * principal: the caller's permission was checked already, and a key scoped to projects only would
 * lack billing.read). The plan's allowance, then the count compared with it.
 */
export const planLimitCheck = (transport: Transport, principalToken: Effect.Effect<string, RpcError>) => {
  const allowance = planAllowance(transport, principalToken)
  return (orgId: string, resource: PlanLimitedResource, inUse: number): Effect.Effect<void, PlanLimitReached | BillingUnavailable> =>
    Effect.flatMap(allowance(orgId, resource), (allowed) => requireWithin(allowed, inUse)).pipe(Effect.withSpan("planLimitCheck", { attributes: { orgId, resource, inUse } }))
}
