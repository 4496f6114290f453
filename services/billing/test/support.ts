import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { answeredForCaller, asCaller, IdentityOverTheWire, IdentityUnit, IdentityWireLive, join, newOrg as orgOf, newUser } from "../../../test/support/units.js"
import { BillingServices, OrgAccess, PaymentProvider } from "../src/index.js"

export { newUser }

/**
 * OrgAccess.live as billing's RPC handlers run it: with the caller's principal token (the request's)
 * in the fiber, so the identity unit answers for that caller.
 */
const AccessAsHandled = Layer.effect(
  OrgAccess,
  Effect.map(OrgAccess, (live) => OrgAccess.of({ require: answeredForCaller(live.require) }))
).pipe(Layer.provide(OrgAccess.live), Layer.provide(IdentityOverTheWire))

/**
 * The billing services on a fresh database with the given payment provider, and the real identity
 * unit answering who may read and manage billing. Identity's services stay in the context, so
 * tests make users and orgs the way the product does.
 */
export const billingTestLayer = (provider: Layer.Layer<PaymentProvider> = PaymentProvider.local, config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("billing_test"), (url) =>
      BillingServices.pipe(Layer.provideMerge(Layer.merge(AccessAsHandled, provider)), Layer.provide(withConfig({ DATABASE_URL: url, ...config })))
    )
  ).pipe(Layer.provideMerge(IdentityWireLive), Layer.provideMerge(IdentityUnit), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

/** An org id identity never made: billing's events and set-up need no member. */
export const newOrgId = () => `org_${unique()}`

/** A new org at identity: its owner (who made it) and a plain member (invited, accepted). */
export const newOrg = (name = "Acme") =>
  Effect.gen(function* () {
    const org = yield* orgOf(name)
    const member = yield* newUser("member")
    yield* join(org, member, "member")
    return { orgId: org.orgId, owner: org.owner, member: member.principal }
  })

/** Runs `self` with the caller's principal token, as a unit calling billing over the wire would. */
export const as = asCaller

export const orgCreated = (orgId: string) => ({ org_id: orgId, name: "Acme", owner_user_id: "usr_x", created_at: new Date().toISOString() })
