import { authorizeInOrg, IdentityClient, type Principal } from "@scion/kit"
import { Context, Effect, Layer } from "effect"
import { IdentityUnavailable, Unauthenticated } from "./domain/errors.js"

/** The identity calls this unit makes (kit's, shared by every unit). */
export { IdentityClient, VerifierFromIdentity } from "@scion/kit"

/** The permission that makes a session caller a reader of an org's operations. */
export const OPERATIONS_READ = "operations.read"

/** The platform permission of service principals that create and report operations in any org. */
export const OPERATIONS_WRITE = "operations.write"

/**
 * Whether a principal may act on an org's operations: identity answers (Authorize with
 * operations.read, which every role holds, so it amounts to membership) for the caller whose token
 * the request carried. API keys ask too, although their token names their org: identity re-reads
 * the key, so a revoked key is refused on the very next request rather than when its signed
 * principal expires.
 */
export class OrgAccess extends Context.Tag("@scion/operation/OrgAccess")<
  OrgAccess,
  { readonly isMember: (principal: Principal, orgId: string) => Effect.Effect<boolean, Unauthenticated | IdentityUnavailable> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        isMember: (principal, orgId) => {
          // A service principal is one of our own workers, signed by identity for the platform:
          // the unit that started the work checked the user's permission when it did.
          if (principal.kind === "service") return Effect.succeed(principal.permissions.includes(OPERATIONS_WRITE))
          return authorizeInOrg(principal, orgId, OPERATIONS_READ).pipe(
            Effect.as(true),
            Effect.catchTags({
              AccessRefused: (refused) => (refused.reason === "unauthenticated" ? Effect.fail(new Unauthenticated()) : Effect.succeed(false)),
              IdentityUnreachable: (unreachable) => Effect.fail(new IdentityUnavailable({ cause: unreachable.cause }))
            }),
            Effect.provideService(IdentityClient, identity)
          )
        }
      })
    )
  )
}
