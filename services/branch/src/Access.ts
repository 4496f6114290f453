import { authorizeInOrg, IdentityClient, type Principal } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import { type AccessError, IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated } from "./domain/errors.js"

export type BranchPermission = "branches.read" | "branches.create" | "branches.delete" | "connectors.update"

/**
 * Whether a principal holds a permission in an org, asked of identity on every request (kit's
 * authorizeInOrg), so a revoked key or a removed member is refused at once. The org comes from
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
          authorizeInOrg(principal, orgId, permission).pipe(
            Effect.catchTags({
              AccessRefused: (refused): Effect.Effect<never, AccessError> =>
                Effect.fail(
                  refused.reason === "unauthenticated"
                    ? new Unauthenticated()
                    : refused.reason === "permission_denied"
                      ? new PermissionDenied({ orgId, permission })
                      : new NotAMember({ orgId })
                ),
              IdentityUnreachable: (unreachable) => Effect.fail(new IdentityUnavailable({ cause: unreachable.cause }))
            }),
            Effect.provideService(IdentityClient, identity)
          )
      })
    )
  )
}
