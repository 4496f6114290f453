import { IdentityClient, requireInOrg, type Principal } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import { type AccessError, PermissionDenied } from "./domain/errors.js"

/** The identity calls this unit makes (kit's, shared by every unit). */
export { IdentityClient, VerifierFromIdentity } from "@scion/kit"

/** Every role holds it: reading billing amounts to membership. */
export const BILLING_READ = "billing.read"
/** Owners only: selecting plans and cancelling. */
export const BILLING_MANAGE = "billing.manage"

export type BillingPermission = typeof BILLING_READ | typeof BILLING_MANAGE

/**
 * Whether a principal holds a billing permission in an org. Identity answers for the caller whose
 * token the request carried (API keys too: identity re-reads the key, so a revoked key is refused
 * on the next request). A service principal is one of our own units asking on behalf of a request
 * it already checked (an entitlement before a create): it may read, never manage.
 */
export class OrgAccess extends Context.Tag("@scion/billing/OrgAccess")<
  OrgAccess,
  { readonly require: (principal: Principal, orgId: string, permission: BillingPermission) => Effect.Effect<void, AccessError> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        require: (principal, orgId, permission) => {
          if (principal.kind === "service") return permission === BILLING_READ ? Effect.void : Effect.fail(new PermissionDenied({ orgId, permission }))
          return requireInOrg(principal, orgId, permission).pipe(
            Effect.provideService(IdentityClient, identity)
          )
        }
      })
    )
  )
}
