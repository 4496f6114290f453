import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const MembersLive = group(Api, "members", (handlers) =>
  handlers
    .handle("listMembers", ({ path }) => asCaller((u) => u.identity.listMembers({ orgId: path.org_id })).pipe(Effect.map((r) => r.members.map(present.member))))
    .handle("updateMemberRole", ({ path, payload }) =>
      asCaller((u) => u.identity.updateMemberRole({ orgId: path.org_id, userId: path.target_user_id, roleKey: payload.role_key })).pipe(
        Effect.map((r) => {
          const member = present.member(r.member)
          return { message: r.message || "Member role updated", user_id: member.user_id, role_key: member.role, member }
        })
      )
    )
    .handle("removeMember", ({ path }) => asCaller((u) => u.identity.removeMember({ orgId: path.org_id, userId: path.target_user_id })).pipe(Effect.asVoid))
    .handle("createInvite", ({ path, payload }) =>
      asCaller((u) => u.identity.createInvite({ orgId: path.org_id, email: payload.email, roleKey: payload.role_key })).pipe(
        Effect.map((r) => present.invite(r.invite))
      )
    )
    .handle("listInvites", ({ path }) => asCaller((u) => u.identity.listInvites({ orgId: path.org_id })).pipe(Effect.map((r) => r.invites.map(present.invite))))
    .handle("revokeInvite", ({ path }) => asCaller((u) => u.identity.revokeInvite({ orgId: path.org_id, inviteId: path.invite_id })).pipe(Effect.asVoid))
    .handle("listRoles", ({ path }) => asCaller((u) => u.identity.listRoles({ orgId: path.org_id })).pipe(Effect.map((r) => r.roles.map(present.role))))
)
