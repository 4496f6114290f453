/**
 * The real OrgAccess policy over the identity unit itself: how identity's answers become billing's
 * errors, and what service principals and API keys of other orgs may do without asking it.
 */
import { describe, expect, layer } from "@effect/vitest"
import { ApiKeys, Auth, ROLES } from "@scion/identity"
import { grpcTransport, InMemoryBus, Principal, withPrincipalToken } from "@scion/kit"
import { Effect, Layer } from "effect"
import { IdentityClient, OrgAccess } from "../src/index.js"
import { billingTestLayer, newOrg, newUser } from "./support.js"

/** OrgAccess.live with identity unreachable: what it decides without asking shows here. */
const withIdentityDown = <A, E, R>(self: Effect.Effect<A, E, R | OrgAccess>) =>
  Effect.scoped(
    Effect.gen(function* () {
      // A port nothing listens on: any question to identity fails as unavailable.
      const transport = yield* grpcTransport("http://127.0.0.1:9")
      const access = OrgAccess.live.pipe(Layer.provide(IdentityClient.fromTransport(transport)), Layer.provide(InMemoryBus.layer))
      return yield* Effect.provide(self, access)
    })
  )

const service = (permissions: ReadonlyArray<string>) =>
  new Principal({ kind: "service", userId: null, sessionId: null, apiKeyId: null, orgId: null, roleKey: null, permissions, exp: 4_000_000_000 })

describe("OrgAccess.live", () => {
  layer(billingTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("maps identity's answers: granted, PERMISSION_DENIED, NOT_A_MEMBER, UNAUTHENTICATED", () =>
      Effect.gen(function* () {
        const access = yield* OrgAccess
        const { orgId, owner, member } = yield* newOrg()
        yield* access.require(member, orgId, "billing.read")
        yield* access.require(owner, orgId, "billing.manage")
        expect(yield* Effect.flip(access.require(member, orgId, "billing.manage"))).toMatchObject({ _tag: "PermissionDenied", permission: "billing.manage" })
        const stranger = (yield* newOrg("Other")).owner
        expect(yield* Effect.flip(access.require(stranger, orgId, "billing.read"))).toMatchObject({ _tag: "NotAMember", orgId })
        // A session that ended: its token still verifies, identity refuses it.
        const leaving = yield* newUser("leaving")
        yield* (yield* Auth).logOut(leaving.principal)
        expect(yield* Effect.flip(access.require(leaving.principal, orgId, "billing.read"))).toMatchObject({ _tag: "Unauthenticated" })
      })
    )

    it.effect("an API key acts in its own org; identity unreachable is IdentityUnavailable", () =>
      Effect.gen(function* () {
        const { orgId, owner } = yield* newOrg()
        const created = yield* (yield* ApiKeys).createApiKey(owner, { orgId, name: "ci", roleId: ROLES.member.id, scopes: [], expiresAt: null, mode: "live" })
        const key = yield* (yield* Auth).authenticate(created.secret)
        yield* withPrincipalToken(key.token)(Effect.flatMap(OrgAccess, (access) => access.require(key.principal, orgId, "billing.read")))
        const down = yield* Effect.flip(withIdentityDown(withPrincipalToken(key.token)(Effect.flatMap(OrgAccess, (access) => access.require(key.principal, orgId, "billing.read")))))
        expect(down).toMatchObject({ _tag: "IdentityUnavailable" })
      })
    )

    it.effect("service principals may read but never manage, and an API key of another org is not a member: decided without identity", () =>
      withIdentityDown(
        Effect.gen(function* () {
          const access = yield* OrgAccess
          yield* access.require(service(["billing.read"]), "org_1", "billing.read")
          expect(yield* Effect.flip(access.require(service(["billing.read"]), "org_1", "billing.manage"))).toMatchObject({ _tag: "PermissionDenied" })
          const foreignKey = new Principal({ kind: "api_key", userId: null, sessionId: null, apiKeyId: "key_1", orgId: "org_2", roleKey: "owner", permissions: [], exp: 4_000_000_000 })
          expect(yield* Effect.flip(access.require(foreignKey, "org_1", "billing.read"))).toMatchObject({ _tag: "NotAMember", orgId: "org_1" })
        })
      )
    )
  })
})
