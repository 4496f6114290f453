import { group } from "../serve/handlers.js"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const ApiKeysLive = group(Api, "apiKeys", (handlers) =>
  handlers
    .handle("list", ({ path }) => asCaller((u) => u.identity.listApiKeys({ orgId: path.org_id })).pipe(Effect.map((r) => r.apiKeys.map(present.apiKey))))
    .handle("create", ({ path, payload }) =>
      asCaller((u) =>
        u.identity.createApiKey({
          orgId: path.org_id,
          name: payload.name,
          roleId: payload.role_id,
          scopes: [...payload.scopes],
          mode: present.modeToProto[payload.mode],
          ...(payload.expiration === null ? {} : { expiresAt: timestampFromDate(new Date(payload.expiration)) })
        })
      ).pipe(Effect.map((r) => ({ ...present.apiKey(r.apiKey), secret: r.secret })))
    )
    .handle("revoke", ({ path }) => asCaller((u) => u.identity.revokeApiKey({ orgId: path.org_id, apiKeyId: path.api_key_id })).pipe(Effect.asVoid))
)
