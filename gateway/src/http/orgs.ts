import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const OrgsLive = group(Api, "orgs", (handlers) =>
  handlers
    .handle("list", () => asCaller((u) => u.identity.listMyOrgs({})).pipe(Effect.map((r) => r.orgs.map(present.membership))))
    .handle("create", ({ payload }) => asCaller((u) => u.identity.createOrg({ name: payload.name })).pipe(Effect.map((r) => present.orgDetails(r.org))))
    .handle("get", ({ path }) => asCaller((u) => u.identity.getOrg({ orgId: path.org_id })).pipe(Effect.map((r) => present.orgDetails(r.org))))
    .handle("update", ({ path, payload }) =>
      asCaller((u) => u.identity.updateOrg({ orgId: path.org_id, name: payload.name })).pipe(Effect.map((r) => present.orgDetails(r.org)))
    )
    .handle("delete", ({ path }) => asCaller((u) => u.identity.deleteOrg({ orgId: path.org_id })).pipe(Effect.asVoid))
)
