import { AccessChange, type Principal, tracedFn } from "@scion/kit"
import { Clock, Effect } from "effect"
import { Access, noEscalation } from "./Access.js"
import { ApiKeysRepo } from "./ApiKeysRepo.js"
import { Database } from "./Database.js"
import { ApiKeyNotFound, InvalidArgument, NonOrgRole, RoleEscalation, ScopeOutsideRole, UnknownRole } from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { ApiKey } from "./domain/models.js"
import { effectivePermissions, ORG_ROLE_ID_PREFIX, roleById } from "./domain/roles.js"
import { type ApiKeyMode, digest, KEY_PREFIX_LENGTH, newApiKeySecret } from "./domain/secrets.js"
import { boundedText } from "./domain/validation.js"

export interface CreateApiKeyInput {
  readonly orgId: string
  readonly name: string
  readonly roleId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresAt: Date | null
  readonly mode: ApiKeyMode
}

/** Org API keys: created with a role and optional scopes inside it, listed without secrets, revoked. */
export class ApiKeys extends Effect.Service<ApiKeys>()("@scion/identity/ApiKeys", {
  effect: Effect.gen(function* () {
    const access = yield* Access
    const db = yield* Database
    const repo = yield* ApiKeysRepo

    const listApiKeys = tracedFn("ApiKeys.listApiKeys")(function* (principal: Principal, orgId: string) {
      yield* access.require(principal, orgId, "api_keys.read")
      return yield* repo.list(orgId)
    })

    /** Returns the key and its secret; the secret is never shown again. */
    const createApiKey = tracedFn("ApiKeys.createApiKey")(function* (principal: Principal, input: CreateApiKeyInput) {
      const granted = yield* access.require(principal, input.orgId, "api_keys.create")
      const name = yield* boundedText("name", input.name)
      if (input.roleId.trim() === "") return yield* new InvalidArgument({ field: "role_id", message: "role_id is required" })
      if (!input.roleId.startsWith(ORG_ROLE_ID_PREFIX)) return yield* new NonOrgRole({ roleId: input.roleId })
      const role = roleById(input.roleId)
      if (!role) return yield* new UnknownRole({ role: input.roleId })
      const scopes = [...new Set(input.scopes)]
      for (const scope of scopes) {
        if (!role.permissions.includes(scope as never)) return yield* new ScopeOutsideRole({ scope, roleId: role.id })
      }
      if (input.expiresAt !== null && input.expiresAt.getTime() <= (yield* Clock.currentTimeMillis)) {
        return yield* new InvalidArgument({ field: "expiration", message: "expiration must be in the future" })
      }
      yield* noEscalation(granted, role)
      // A scoped key as caller may not mint a key that can do more than it can.
      const beyond = effectivePermissions(role, scopes).find((p) => !granted.permissions.includes(p))
      if (beyond !== undefined) return yield* new RoleEscalation({ role: role.key, callerRole: granted.role.key })
      const secret = yield* newApiKeySecret(input.mode)
      const apiKey: ApiKey = yield* repo.insert({
        id: yield* Ids.apiKey,
        orgId: input.orgId,
        name,
        mode: input.mode,
        keyPrefix: secret.slice(0, KEY_PREFIX_LENGTH),
        secretDigest: digest(secret),
        roleId: role.id,
        scopes,
        createdBy: granted.userId,
        expiresAt: input.expiresAt,
        grantId: yield* Ids.roleGrant
      })
      yield* Effect.logInfo("api key created").pipe(Effect.annotateLogs({ org_id: input.orgId, api_key_id: apiKey.id }))
      return { apiKey, secret }
    })

    const revokeApiKey = tracedFn("ApiKeys.revokeApiKey")(function* (principal: Principal, input: { orgId: string; apiKeyId: string }) {
      yield* access.require(principal, input.orgId, "api_keys.delete")
      const change = new AccessChange({ api_key_id: input.apiKeyId })
      yield* db.transaction(
        Effect.gen(function* () {
          if (!(yield* repo.revoke(input.orgId, input.apiKeyId))) return yield* new ApiKeyNotFound({ apiKeyId: input.apiKeyId })
          yield* access.announce(change)
        })
      )
      yield* access.forget(change)
      yield* Effect.logInfo("api key revoked").pipe(Effect.annotateLogs({ org_id: input.orgId, api_key_id: input.apiKeyId }))
    })

    return { listApiKeys, createApiKey, revokeApiKey } as const
  })
}) {}
