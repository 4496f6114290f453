import { describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, serveHttp2, withPrincipalToken } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { IdentityService } from "@scion/proto/scion/identity/v1/identity_pb"
import { Effect } from "effect"
import { identityRoutes } from "../src/index.js"
import { identityTestLayer } from "./support.js"

/** identityRoutes served over HTTP/2 on a free port, with typed clients for both services. */
const clients = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
  const transport = yield* grpcTransport(served.url)
  return { auth: makeEffectClient(AuthService, transport), identity: makeEffectClient(IdentityService, transport) }
})

describe("RPC over a real port", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("carries typed errors with their reason and metadata, and the principal header", () =>
      Effect.gen(function* () {
        const { auth, identity } = yield* clients
        const email = `rpc-${Date.now()}@example.com`
        const signedUp = yield* auth.signUp({ email, password: "correct-horse-battery", fullName: "Rpc" })
        expect(signedUp.session?.user?.email).toBe(email)
        expect(signedUp.session?.user?.userId).toMatch(/^usr_/)

        const wrong = yield* Effect.flip(auth.logIn({ email, password: "not-the-password" }))
        expect(wrong).toMatchObject({ code: Code.Unauthenticated, reason: "INVALID_CREDENTIALS" })

        const noCaller = yield* Effect.flip(identity.getMe({}))
        expect(noCaller).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })

        const authenticated = yield* auth.authenticate({ bearerToken: signedUp.session?.sessionToken ?? "" })
        expect(authenticated.principal?.userId).toBe(signedUp.session?.user?.userId)
        const asUser = withPrincipalToken(authenticated.principalToken)

        const me = yield* asUser(identity.getMe({}))
        expect(me).toMatchObject({ hasOrgs: false, user: { email } })
        expect(me.defaultOrgId).toBeUndefined()

        const invalid = yield* Effect.flip(asUser(identity.createOrg({ name: "   " })))
        expect(invalid).toMatchObject({ code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: { field: "name" } })

        const created = yield* asUser(identity.createOrg({ name: "Rpc Org" }))
        expect(created.org).toMatchObject({ name: "Rpc Org", myRole: "owner", memberCount: 1 })
        const orgId = created.org?.orgId ?? ""

        const lastOrg = yield* Effect.flip(asUser(identity.deleteOrg({ orgId })))
        expect(lastOrg).toMatchObject({ code: Code.FailedPrecondition, reason: "LAST_ORG" })
        const soleOwner = yield* Effect.flip(asUser(identity.deleteMe({})))
        expect(soleOwner).toMatchObject({ code: Code.FailedPrecondition, reason: "SOLE_OWNER", metadata: { org_ids: orgId } })
        expect(soleOwner.message).toContain(`Rpc Org (${orgId})`)

        const key = yield* asUser(identity.createApiKey({ orgId, name: "ci", roleId: "role_org_viewer", scopes: ["connectors.create"] }))
          .pipe(Effect.flip)
        expect(key).toMatchObject({ code: Code.InvalidArgument, reason: "SCOPE_OUTSIDE_ROLE", metadata: { scope: "connectors.create" } })

        const viewerKey = yield* asUser(identity.createApiKey({ orgId, name: "ci", roleId: "role_org_viewer" }))
        expect(viewerKey.secret).toMatch(/^sk-scion_live_/)
        const keyPrincipal = yield* auth.authenticate({ bearerToken: viewerKey.secret })
        const asKey = withPrincipalToken(keyPrincipal.principalToken)
        expect(yield* Effect.flip(asKey(identity.listMyOrgs({})))).toMatchObject({ code: Code.Unauthenticated, reason: "SESSION_REQUIRED" })
        expect(yield* Effect.flip(asKey(identity.updateOrg({ orgId, name: "X" })))).toMatchObject({
          code: Code.PermissionDenied,
          reason: "PERMISSION_DENIED",
          metadata: { permission: "org.update" }
        })
        const authorized = yield* asKey(auth.authorize({ orgId, permission: "org.read" }))
        expect(authorized.roleKey).toBe("viewer")

        const keys = yield* auth.getVerificationKeys({})
        expect(keys.keys).toHaveLength(1)
        const forged = yield* Effect.flip(withPrincipalToken(`v1.${keys.keys[0]?.keyId}.e30.AAAA`)(identity.getMe({})))
        expect(forged).toMatchObject({ code: Code.Unauthenticated, reason: "INVALID_PRINCIPAL" })

        yield* asUser(auth.logOut({}))
        expect(yield* Effect.flip(asUser(identity.getMe({})))).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })
      })
    )
  })
})
