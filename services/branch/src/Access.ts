import { IdentityClient, requireInOrg, type Principal } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import type { AccessError } from "./domain/errors.js"

export type BranchPermission = "branches.read" | "branches.create" | "branches.delete" | "connectors.update"

/**
 * Whether a principal holds a permission in an org: identity's grant, cached by the kit's
 * authorizeInOrg until identity announces a change that touches it (the revocation bound the
 * README states). The org comes from
 * the connector (the connector unit's answer) or the branch row, never from the request.
 * Service principals hold no org role: refused as non-members.
 */
export class OrgAccess extends Context.Tag("@scion/branch/OrgAccess")<
  OrgAccess,
  { readonly require: (principal: Principal, orgId: string, permission: BranchPermission) => Effect.Effect<void, AccessError> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        require: (principal, orgId, permission) =>
          requireInOrg(principal, orgId, permission).pipe(
            Effect.provideService(IdentityClient, identity)
          )
      })
    )
  )
}
