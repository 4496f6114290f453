import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const InvitesLive = group(Api, "invites", (handlers) =>
  handlers
    .handle("pending", () => asCaller((u) => u.identity.listPendingInvites({})).pipe(Effect.map((r) => ({ invites: r.invites.map(present.invite) }))))
    .handle("accept", ({ path }) =>
      asCaller((u) => u.identity.acceptInvite({ inviteToken: path.invite_token })).pipe(
        Effect.map((r) => ({ message: r.message || "Invite accepted", org: present.orgDetails(r.org) }))
      )
    )
)
