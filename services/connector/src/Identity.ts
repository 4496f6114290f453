import { IdentityClient, requireInOrg, type Principal } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import { type AccessError, NotAMember } from "./domain/errors.js"

/** The identity calls this unit makes (kit's, shared by every unit). */
export { IdentityClient, VerifierFromIdentity } from "@scion/kit"

export type EnvironmentPermission = "environments.read" | "environments.manage"

/** ARCHITECTURE.md's connector permissions (admin: selection and decisions; delete joins with deletion). */
export type ConnectorPermission = "connectors.read" | "connectors.create" | "connectors.update" | "connectors.delete" | "connectors.admin"

export type { AccessError }

/**
 * Whether a principal holds a permission in an org: identity answers (kit's authorizeInOrg) for
 * the caller whose token the request carried, re-reading sessions and keys, so a revoked key or a
 * removed member is refused on the very next request. The unit never trusts an org id a request
 * claims. Service principals act for the platform and hold no org role here: refused as
 * non-members (this unit's own workers never come through this door).
 */
export class OrgAccess extends Context.Tag("@scion/connector/OrgAccess")<
  OrgAccess,
  { readonly require: (principal: Principal, orgId: string, permission: EnvironmentPermission | ConnectorPermission) => Effect.Effect<void, AccessError> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        require: (principal, orgId, permission) => {
          if (principal.kind === "service") return Effect.fail(new NotAMember({ orgId }))
          return requireInOrg(principal, orgId, permission).pipe(
            Effect.provideService(IdentityClient, identity)
          )
        }
      })
    )
  )
}
