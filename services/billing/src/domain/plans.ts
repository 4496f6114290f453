/**
 * The fixed self-serve plan list. Plans are data, not rows: changing a price or a limit is a
 * code change reviewed like any other, and every replica answers the same list.
 */

/** The resources whose count a plan limits; other units ask before creating one. */
export const RESOURCES = ["projects", "connectors", "branches", "environments"] as const
export type Resource = (typeof RESOURCES)[number]

export interface PlanLimits {
  /** null: unlimited. */
  readonly projects: number | null
  readonly connectors: number | null
  readonly branches: number | null
  readonly environments: number | null
  /** Engine hours included per monthly period. */
  readonly engine_hours: number | null
}

export const PLAN_IDS = ["free", "pro", "team"] as const
export type PlanId = (typeof PLAN_IDS)[number]

export interface Plan {
  readonly id: PlanId
  readonly name: string
  readonly description: string
  /** Per monthly period, in US cents. */
  readonly monthlyPriceCents: number
  readonly currency: "usd"
  readonly limits: PlanLimits
  /** Credits granted when the plan starts (free: when the org is set up), in US cents. */
  readonly includedCredits: number
}

export const PLANS: { readonly [K in PlanId]: Plan & { readonly id: K } } = {
  free: {
    id: "free",
    name: "Free",
    description: "For trying Scion: a few connectors and branches, no card needed.",
    monthlyPriceCents: 0,
    currency: "usd",
    limits: { projects: 10, connectors: 3, branches: 25, environments: 1, engine_hours: 100 },
    includedCredits: 1_000
  },
  pro: {
    id: "pro",
    name: "Pro",
    description: "For teams shipping with branches every day.",
    monthlyPriceCents: 2_500,
    currency: "usd",
    limits: { projects: 50, connectors: 10, branches: 250, environments: 3, engine_hours: 1_000 },
    includedCredits: 2_500
  },
  team: {
    id: "team",
    name: "Team",
    description: "For organisations running many sources and environments.",
    monthlyPriceCents: 9_900,
    currency: "usd",
    limits: { projects: null, connectors: 50, branches: 2_500, environments: 10, engine_hours: 5_000 },
    includedCredits: 10_000
  }
}

/** The plan every org starts on and falls back to when a subscription is canceled. */
export const FREE_PLAN = PLANS.free

export const planList: ReadonlyArray<Plan> = PLAN_IDS.map((id) => PLANS[id])

export const isPlanId = (id: string): id is PlanId => (PLAN_IDS as ReadonlyArray<string>).includes(id)

export const isPaid = (plan: Plan): boolean => plan.monthlyPriceCents > 0

/** Whether an org holding `inUse` of a resource may create one more under this plan. */
export const entitlement = (plan: Plan, resource: Resource, inUse: number): { readonly allowed: boolean; readonly limit: number | null } => {
  const limit = plan.limits[resource]
  return { allowed: limit === null || inUse < limit, limit }
}
