import { describe, expect, layer } from "@effect/vitest"
import { PrincipalSigner, PrincipalVerifier } from "@scion/kit"
import { Effect } from "effect"
import { Auth, Orgs } from "../src/index.js"
import { createOrg, identityTestLayer, signUp } from "./support.js"

const CREDENTIAL = "a-deployment-secret-of-some-length"

describe("service principals", () => {
  layer(identityTestLayer({ SERVICE_CREDENTIAL: CREDENTIAL }), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("signs a service principal for the deployment's credential, with only the operation permissions", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const signer = yield* PrincipalSigner
        const issued = yield* auth.issueServiceToken("connector", CREDENTIAL)
        const verified = yield* PrincipalVerifier.fromPublicKeys([{ keyId: signer.keyId, publicKeyDer: signer.publicKeyDer }]).verify(issued.token)
        expect(verified).toMatchObject({ kind: "service", service: "connector", userId: null, apiKeyId: null, orgId: null, roleKey: null })
        expect(verified.permissions).toEqual(["operations.read", "operations.write"])
        expect(issued.expiresAt.getTime()).toBeGreaterThan(Date.now())
      })
    )

    it.effect("refuses a wrong credential, including a prefix of the right one, and a malformed service name", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        expect((yield* Effect.flip(auth.issueServiceToken("connector", "wrong")))._tag).toBe("ServiceCredentialInvalid")
        expect((yield* Effect.flip(auth.issueServiceToken("connector", CREDENTIAL.slice(0, -1))))._tag).toBe("ServiceCredentialInvalid")
        expect((yield* Effect.flip(auth.issueServiceToken("connector", "")))._tag).toBe("ServiceCredentialInvalid")
        expect((yield* Effect.flip(auth.issueServiceToken("Bad Name", CREDENTIAL)))._tag).toBe("InvalidArgument")
      })
    )

    it.effect("gives a service no role in any org: identity's org calls answer NOT_A_MEMBER", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const { principal } = yield* auth.issueServiceToken("connector", CREDENTIAL)
        expect((yield* Effect.flip(auth.authorize(principal, org.orgId, "operations.read")))._tag).toBe("NotAMember")
        expect((yield* Effect.flip((yield* Orgs).getOrg(principal, org.orgId)))._tag).toBe("NotAMember")
      })
    )
  })
})

describe("service principals without a configured credential", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("are refused as not configured", () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip((yield* Auth).issueServiceToken("connector", "anything"))
        expect(error._tag).toBe("ServiceCredentialNotConfigured")
      })
    )
  })
})
