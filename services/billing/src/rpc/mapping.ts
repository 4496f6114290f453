import type { MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { type PlanSchema, Resource as PbResource, SubscriptionStatus as PbStatus, type SubscriptionSchema } from "@scion/proto/scion/billing/v1/billing_pb"
import type { SubscriptionStatus, SubscriptionView } from "../domain/models.js"
import type { Plan, Resource } from "../domain/plans.js"

/** Domain ↔ proto enums: one closed table each way. */
export const statusToProto = {
  active: PbStatus.ACTIVE,
  pending_checkout: PbStatus.PENDING_CHECKOUT,
  canceled: PbStatus.CANCELED
} as const satisfies Record<SubscriptionStatus, PbStatus>

export const resourceFromProto = {
  [PbResource.UNSPECIFIED]: undefined,
  [PbResource.PROJECTS]: "projects",
  [PbResource.CONNECTORS]: "connectors",
  [PbResource.BRANCHES]: "branches",
  [PbResource.ENVIRONMENTS]: "environments"
} as const satisfies Record<PbResource, Resource | undefined>

const limit = (value: number | null) => (value === null ? undefined : value)

export const planToProto = (plan: Plan): MessageInitShape<typeof PlanSchema> => ({
  id: plan.id,
  name: plan.name,
  description: plan.description,
  monthlyPriceCents: plan.monthlyPriceCents,
  currency: plan.currency,
  limits: {
    projects: limit(plan.limits.projects),
    connectors: limit(plan.limits.connectors),
    branches: limit(plan.limits.branches),
    environments: limit(plan.limits.environments),
    engineHours: limit(plan.limits.engine_hours)
  },
  includedCredits: plan.includedCredits
})

export const subscriptionToProto = (s: SubscriptionView): MessageInitShape<typeof SubscriptionSchema> => ({
  orgId: s.orgId,
  planId: s.planId,
  plan: planToProto(s.plan),
  status: statusToProto[s.status],
  currentPeriodStart: timestampFromDate(s.currentPeriodStart),
  currentPeriodEnd: timestampFromDate(s.currentPeriodEnd),
  cancelAtPeriodEnd: s.cancelAtPeriodEnd,
  ...(s.canceledAt !== null ? { canceledAt: timestampFromDate(s.canceledAt) } : {}),
  creditsBalance: BigInt(s.creditsBalance),
  ...(s.pendingPlanId !== null ? { pendingPlanId: s.pendingPlanId } : {}),
  ...(s.checkoutUrl !== null ? { checkoutUrl: s.checkoutUrl } : {})
})
