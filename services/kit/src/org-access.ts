import { Code } from "@connectrpc/connect"
import { Effect, Schema } from "effect"
import type { WireTable } from "./errors.js"
import { authorizeInOrg, type IdentityClient } from "./identity-client.js"
import type { Principal } from "./principal.js"

/**
 * The refusals every unit answers when identity does not grant a request, shared so that each
 * unit maps identity's answer the same way and puts the same reasons on the wire.
 */

export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {}) {
  override get message() {
    return "Authentication required: send a principal token issued by identity"
  }
}

/** Acting in an org the caller does not belong to (lists and creates; single resources are NOT_FOUND). */
export class NotAMember extends Schema.TaggedError<NotAMember>()("NotAMember", { orgId: Schema.String }) {
  override get message() {
    return `You are not a member of org ${this.orgId}`
  }
}

export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", { orgId: Schema.String, permission: Schema.String }) {
  override get message() {
    return `Permission ${this.permission} is required in org ${this.orgId}`
  }
}

/** Identity could not answer an authorization question; safe to retry. */
export class IdentityUnavailable extends Schema.TaggedError<IdentityUnavailable>()("IdentityUnavailable", { cause: Schema.String }) {
  override get message() {
    return "Authorization is temporarily unavailable; retry shortly"
  }
}

export type AccessError = Unauthenticated | NotAMember | PermissionDenied | IdentityUnavailable

/** The wire entries of the refusals, for a unit's error table. */
export const accessWireErrors = {
  Unauthenticated: { code: Code.Unauthenticated, reason: "UNAUTHENTICATED" },
  NotAMember: { code: Code.PermissionDenied, reason: "NOT_A_MEMBER", metadata: (e) => ({ org_id: e.orgId }) },
  PermissionDenied: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", metadata: (e) => ({ org_id: e.orgId, permission: e.permission }) },
  IdentityUnavailable: { code: Code.Unavailable, reason: "IDENTITY_UNAVAILABLE" }
} satisfies WireTable<AccessError>

/**
 * authorizeInOrg with identity's refusals as the shared access errors: the unit's OrgAccess
 * decides what service principals may do and otherwise asks this.
 */
export const requireInOrg = (principal: Principal, orgId: string, permission: string): Effect.Effect<void, AccessError, IdentityClient> =>
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
    })
  )
