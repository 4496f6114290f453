import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Schedule } from "effect"
import { ApiKeys, Auth, Orgs, ROLES } from "../src/index.js"
import { addMember, createKey, createOrg, identityTestLayer, signUp } from "./support.js"

describe("API keys", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("creates a key shown once, stored as a digest, that authenticates to an api_key principal", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const auth = yield* Auth
        const sql = yield* SqlClient.SqlClient
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const created = yield* apiKeys.createApiKey(owner.principal, {
          orgId: org.orgId,
          name: " CI ",
          roleId: ROLES.member.id,
          scopes: [],
          expiresAt: new Date(Date.now() + 86_400_000),
          mode: "live"
        })
        expect(created.secret).toMatch(/^sk-scion_live_[0-9A-Za-z]{38}$/)
        expect(created.apiKey).toMatchObject({
          name: "CI",
          orgId: org.orgId,
          mode: "live",
          keyPrefix: created.secret.slice(0, 18),
          roleId: ROLES.member.id,
          roleKey: "member",
          status: "active",
          createdBy: owner.userId,
          revokedAt: null,
          lastUsedAt: null
        })
        const rows = yield* sql<{ secret_digest: string }>`select secret_digest from api_keys where id = ${created.apiKey.id}`
        expect(rows[0]?.secret_digest).toMatch(/^[0-9a-f]{64}$/)
        expect(JSON.stringify(yield* apiKeys.listApiKeys(owner.principal, org.orgId))).not.toContain(created.secret)

        const result = yield* auth.authenticate(created.secret)
        expect(result.principal).toMatchObject({
          kind: "api_key",
          apiKeyId: created.apiKey.id,
          orgId: org.orgId,
          roleKey: "member",
          userId: owner.userId,
          sessionId: null,
          permissions: ROLES.member.permissions
        })
        // Use is recorded off the request path, shortly after.
        const lastUsed = sql<{ last_used_at: Date | null }>`select last_used_at from api_keys where id = ${created.apiKey.id}`.pipe(
          Effect.flatMap((rows) => Effect.fromNullable(rows[0]?.last_used_at)),
          Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("2 seconds")))
        )
        const firstUse = yield* lastUsed
        yield* auth.authenticate(created.secret)
        // Within the minute, a second use writes nothing: the value stays put for two seconds of looking.
        for (let i = 0; i < 20; i++) {
          yield* Effect.sleep("100 millis")
          expect((yield* lastUsed).getTime()).toBe(firstUse.getTime())
        }

        const test = yield* apiKeys.createApiKey(owner.principal, { orgId: org.orgId, name: "t", roleId: ROLES.viewer.id, scopes: ["org.read"], expiresAt: null, mode: "test" })
        expect(test.secret).toMatch(/^sk-scion_test_/)
        expect((yield* auth.authenticate(test.secret)).principal.permissions).toEqual(["org.read"])
      })
    )

    it.effect("validates role ids, scopes, names and expiration", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const create = (roleId: string, scopes: ReadonlyArray<string> = [], extra: { name?: string; expiresAt?: Date } = {}) =>
          apiKeys.createApiKey(owner.principal, { orgId: org.orgId, name: extra.name ?? "k", roleId, scopes, expiresAt: extra.expiresAt ?? null, mode: "live" })
        expect(yield* Effect.flip(create("role_platform_admin"))).toMatchObject({ _tag: "NonOrgRole", roleId: "role_platform_admin" })
        expect(yield* Effect.flip(create("admin"))).toMatchObject({ _tag: "NonOrgRole" })
        expect(yield* Effect.flip(create("role_org_superuser"))).toMatchObject({ _tag: "UnknownRole", role: "role_org_superuser" })
        expect(yield* Effect.flip(create(ROLES.viewer.id, ["org.read", "connectors.create"]))).toMatchObject({
          _tag: "ScopeOutsideRole",
          scope: "connectors.create",
          roleId: ROLES.viewer.id
        })
        expect(yield* Effect.flip(create(ROLES.member.id, ["made.up"]))).toMatchObject({ _tag: "ScopeOutsideRole", scope: "made.up" })
        expect(yield* Effect.flip(create(ROLES.member.id, [], { expiresAt: new Date(Date.now() - 1000) }))).toMatchObject({
          _tag: "InvalidArgument",
          field: "expiration"
        })
        expect(yield* Effect.flip(create(ROLES.member.id, [], { name: "  " }))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
        expect(yield* Effect.flip(create(ROLES.member.id, [], { name: "x".repeat(101) }))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
      })
    )

    it.effect("never grants more than the caller holds", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const viewer = yield* addMember(owner.principal, org.orgId, "viewer")
        const create = (principal: typeof owner.principal, roleId: string, scopes: ReadonlyArray<string> = []) =>
          apiKeys.createApiKey(principal, { orgId: org.orgId, name: "k", roleId, scopes, expiresAt: null, mode: "live" })
        expect(yield* Effect.flip(create(member.principal, ROLES.admin.id))).toMatchObject({ _tag: "RoleEscalation", role: "admin", callerRole: "member" })
        expect((yield* create(member.principal, ROLES.member.id)).apiKey.roleKey).toBe("member")
        expect(yield* Effect.flip(create(viewer.principal, ROLES.viewer.id))).toMatchObject({ _tag: "PermissionDenied", permission: "api_keys.create" })
        expect(yield* Effect.flip(apiKeys.listApiKeys(viewer.principal, org.orgId))).toMatchObject({ _tag: "PermissionDenied", permission: "api_keys.read" })

        // A key acts with its own role: a member key cannot mint an owner key; a scoped key cannot widen itself.
        const memberKey = yield* createKey(owner.principal, org.orgId, ROLES.member.id)
        expect(yield* Effect.flip(create(memberKey.principal, ROLES.owner.id))).toMatchObject({ _tag: "RoleEscalation" })
        const scoped = yield* createKey(owner.principal, org.orgId, ROLES.member.id, ["api_keys.create", "org.read"])
        expect(yield* Effect.flip(create(scoped.principal, ROLES.member.id))).toMatchObject({ _tag: "RoleEscalation" })
        expect((yield* create(scoped.principal, ROLES.member.id, ["org.read"])).apiKey.scopes).toEqual(["org.read"])
        // Scopes limit what the key may do.
        expect(yield* Effect.flip(apiKeys.listApiKeys(scoped.principal, org.orgId))).toMatchObject({ _tag: "PermissionDenied", permission: "api_keys.read" })
        const details = yield* (yield* Orgs).getOrg(scoped.principal, org.orgId)
        expect(details).toMatchObject({ myRole: "member", myPermissions: ["api_keys.create", "org.read"] })
      })
    )

    it.effect("lists active keys newest first, then revoked keys most recently revoked first", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const make = (name: string) => apiKeys.createApiKey(owner.principal, { orgId: org.orgId, name, roleId: ROLES.viewer.id, scopes: [], expiresAt: null, mode: "live" })
        const k1 = yield* make("k1")
        const k2 = yield* make("k2")
        const k3 = yield* make("k3")
        const k4 = yield* make("k4")
        yield* apiKeys.revokeApiKey(owner.principal, { orgId: org.orgId, apiKeyId: k3.apiKey.id })
        yield* apiKeys.revokeApiKey(owner.principal, { orgId: org.orgId, apiKeyId: k1.apiKey.id })
        const list = yield* apiKeys.listApiKeys(owner.principal, org.orgId)
        expect(list.map((k) => [k.name, k.status])).toEqual([
          ["k4", "active"],
          ["k2", "active"],
          ["k1", "revoked"],
          ["k3", "revoked"]
        ])
        expect(list.every((k) => k.keyPrefix.length === 18 && !("secret" in k))).toBe(true)
        expect(list[2]?.revokedAt).toBeInstanceOf(Date)
        expect(k2.apiKey.id).toMatch(/^key_/)
        expect(list[0]?.id).toBe(k4.apiKey.id)
      })
    )

    it.effect("revokes once: the key stops working at once; unknown, other-org and repeated revokes are not found", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const auth = yield* Auth
        const orgs = yield* Orgs
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const other = yield* createOrg(owner.principal, "Other")
        const key = yield* createKey(owner.principal, org.orgId, ROLES.admin.id)
        expect(yield* Effect.flip(orgs.getOrg(key.principal, other.orgId))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(apiKeys.revokeApiKey(owner.principal, { orgId: other.orgId, apiKeyId: key.apiKey.id }))).toMatchObject({
          _tag: "ApiKeyNotFound"
        })
        yield* apiKeys.revokeApiKey(owner.principal, { orgId: org.orgId, apiKeyId: key.apiKey.id })
        expect(yield* Effect.flip(apiKeys.revokeApiKey(owner.principal, { orgId: org.orgId, apiKeyId: key.apiKey.id }))).toMatchObject({
          _tag: "ApiKeyNotFound",
          apiKeyId: key.apiKey.id
        })
        expect(yield* Effect.flip(apiKeys.revokeApiKey(owner.principal, { orgId: org.orgId, apiKeyId: "key_nope" }))).toMatchObject({ _tag: "ApiKeyNotFound" })
        expect(yield* Effect.flip(auth.authenticate(key.secret))).toMatchObject({ _tag: "Unauthenticated" })
        // A principal token issued before the revoke no longer acts either.
        expect(yield* Effect.flip(orgs.getOrg(key.principal, org.orgId))).toMatchObject({ _tag: "Unauthenticated" })
      })
    )

    it.effect("an expired key does not authenticate", () =>
      Effect.gen(function* () {
        const apiKeys = yield* ApiKeys
        const auth = yield* Auth
        const sql = yield* SqlClient.SqlClient
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const key = yield* createKey(owner.principal, org.orgId, ROLES.viewer.id)
        yield* sql`update api_keys set expires_at = now() - interval '1 second' where id = ${key.apiKey.id}`
        expect(yield* Effect.flip(auth.authenticate(key.secret))).toMatchObject({ _tag: "Unauthenticated" })
        expect((yield* apiKeys.listApiKeys(owner.principal, org.orgId)).map((k) => k.id)).toContain(key.apiKey.id)
      })
    )
  })
})
