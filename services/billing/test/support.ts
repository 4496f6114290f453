import { Principal } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { BILLING_MANAGE, BillingServices, NotAMember, OrgAccess, PaymentProvider, PermissionDenied } from "../src/index.js"

/** Roles as the fake identity knows them: userId → orgId → role key. */
export const memberships = new Map<string, Map<string, "owner" | "member">>()

/** OrgAccess without identity: owners hold billing.manage, every member billing.read. */
const FakeOrgAccess = Layer.succeed(
  OrgAccess,
  OrgAccess.of({
    require: (principal, orgId, permission) => {
      const role = memberships.get(principal.userId ?? "")?.get(orgId)
      if (role === undefined) return Effect.fail(new NotAMember({ orgId }))
      return permission === BILLING_MANAGE && role !== "owner" ? Effect.fail(new PermissionDenied({ orgId, permission })) : Effect.void
    }
  })
)

/** The billing services on a fresh database with a fake identity and the given payment provider. */
export const billingTestLayer = (provider: Layer.Layer<PaymentProvider> = PaymentProvider.local, config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("billing_test"), (url) =>
      BillingServices.pipe(Layer.provideMerge(Layer.merge(FakeOrgAccess, provider)), Layer.provide(withConfig({ DATABASE_URL: url, ...config })))
    )
  ).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

export const newOrgId = () => `org_${unique()}`

export const userIn = (orgId: string, role: "owner" | "member") => {
  const userId = `usr_${unique()}`
  memberships.set(userId, new Map([[orgId, role]]))
  return new Principal({ kind: "user_session", userId, sessionId: `ses_${unique()}`, apiKeyId: null, orgId: null, roleKey: null, permissions: [], exp: 4_000_000_000 })
}

export const orgCreated = (orgId: string) => ({ org_id: orgId, name: "Acme", owner_user_id: "usr_x", created_at: new Date().toISOString() })
