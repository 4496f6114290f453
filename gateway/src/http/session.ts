import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const SessionLive = group(Api, "session", (handlers) =>
  handlers
    .handle("me", () =>
      asCaller((u) => u.identity.getMe({})).pipe(
        Effect.map((r) => ({ user: present.user(r.user), has_orgs: r.hasOrgs, default_org_id: r.defaultOrgId || null }))
      )
    )
    .handle("updateMe", ({ payload }) => asCaller((u) => u.identity.updateMe({ fullName: payload.full_name })).pipe(Effect.map((r) => present.user(r.user))))
    .handle("deleteMe", () => asCaller((u) => u.identity.deleteMe({})).pipe(Effect.asVoid))
    .handle("bootstrap", ({ headers }) =>
      asCaller((u) => u.identity.bootstrap({ orgId: headers["x-org-id"] })).pipe(
        Effect.map((r) => ({ user: present.user(r.user), orgs: r.orgs.map(present.membership), active_org: present.orgDetails(r.activeOrg) }))
      )
    )
    .handle("myOrgs", () => asCaller((u) => u.identity.listMyOrgs({})).pipe(Effect.map((r) => ({ orgs: r.orgs.map(present.membership) }))))
)
