import { createHash } from "node:crypto"
import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { PrincipalSigner, PrincipalVerifier } from "@scion/kit"
import { Effect } from "effect"
import { ALL_ROLES, Auth, hasValidChecksum, newApiKeySecret, Orgs } from "../src/index.js"
import { createOrg, identityTestLayer, PASSWORD, signUp } from "./support.js"

describe("API key format", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("has the documented shape and a CRC32 checksum that catches any change", () =>
      Effect.gen(function* () {
        const live = yield* newApiKeySecret("live")
        const test = yield* newApiKeySecret("test")
        expect(live).toMatch(/^sk-scion_live_[0-9A-Za-z]{38}$/)
        expect(test).toMatch(/^sk-scion_test_[0-9A-Za-z]{38}$/)
        expect(hasValidChecksum(live)).toBe(true)
        const last = live.at(-1) === "A" ? "B" : "A"
        expect(hasValidChecksum(live.slice(0, -1) + last)).toBe(false)
        const bodyChar = live[20] === "x" ? "y" : "x"
        expect(hasValidChecksum(live.slice(0, 20) + bodyChar + live.slice(21))).toBe(false)
        expect(hasValidChecksum("sk-scion_live_" + "A".repeat(38))).toBe(false)
      })
    )
  })
})

describe("sessions and authentication", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("signs up with a lower-cased email, a scrypt hash and a session stored as a digest", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const sql = yield* SqlClient.SqlClient
        const email = `Alice-${Date.now()}@Example.COM`
        const grant = yield* auth.signUp({ email, password: PASSWORD, fullName: "  Alice  " })
        expect(grant.user).toMatchObject({ email: email.toLowerCase(), fullName: "Alice", emailVerified: true })
        expect(grant.user.id).toMatch(/^usr_/)
        expect(grant.sessionToken).toMatch(/^scion_sess_[A-Za-z0-9_-]{43}$/)
        const days = (grant.expiresAt.getTime() - Date.now()) / 86_400_000
        expect(days).toBeGreaterThan(29.9)
        expect(days).toBeLessThan(30.1)
        const [user] = yield* sql<{ password_hash: string }>`select password_hash from users where id = ${grant.user.id}`
        expect(user?.password_hash).toMatch(/^scrypt\$16384\$8\$1\$/)
        expect(user?.password_hash).not.toContain(PASSWORD)
        const sessions = yield* sql<{ token_digest: string }>`select token_digest from sessions where user_id = ${grant.user.id}`
        expect(sessions.map((s) => s.token_digest)).toEqual([createHash("sha256").update(grant.sessionToken).digest("hex")])
      })
    )

    it.effect("refuses a second account for the same email in any case", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const { email } = yield* signUp("dup")
        const error = yield* Effect.flip(auth.signUp({ email: email.toUpperCase(), password: PASSWORD, fullName: "Dup" }))
        expect(error._tag).toBe("EmailTaken")
      })
    )

    it.effect("validates sign-up input", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const bad = [
          [{ email: "nope", password: PASSWORD, fullName: "X" }, "email"],
          [{ email: "a@example.com", password: "short", fullName: "X" }, "password"],
          [{ email: "a@example.com", password: PASSWORD, fullName: "   " }, "full_name"],
          [{ email: "a@example.com", password: PASSWORD, fullName: "x".repeat(101) }, "full_name"]
        ] as const
        for (const [input, field] of bad) {
          const error = yield* Effect.flip(auth.signUp(input))
          expect(error).toMatchObject({ _tag: "InvalidArgument", field })
        }
      })
    )

    it.effect("logs in, and answers a wrong password and an unknown email the same way", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const { email, userId } = yield* signUp("login")
        const grant = yield* auth.logIn({ email: ` ${email.toUpperCase()} `, password: PASSWORD })
        expect(grant.user.id).toBe(userId)
        const wrong = yield* Effect.flip(auth.logIn({ email, password: "wrong-password" }))
        const unknown = yield* Effect.flip(auth.logIn({ email: `nobody-${Date.now()}@example.com`, password: "wrong-password" }))
        expect(wrong._tag).toBe("InvalidCredentials")
        expect(unknown._tag).toBe("InvalidCredentials")
        expect(wrong.message).toBe(unknown.message)
      })
    )

    it.effect("logout ends the session at once, even for a principal token already issued", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const orgs = yield* Orgs
        const { sessionToken, principal } = yield* signUp("logout")
        const org = yield* createOrg(principal)
        yield* auth.logOut(principal)
        expect((yield* Effect.flip(auth.authenticate(sessionToken)))._tag).toBe("Unauthenticated")
        expect((yield* Effect.flip(orgs.getOrg(principal, org.orgId)))._tag).toBe("Unauthenticated")
        expect((yield* Effect.flip(auth.logOut(principal)))._tag).toBe("Unauthenticated")
      })
    )

    it.effect("authenticates a session to a signed user_session principal that verifies", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const verifier = yield* PrincipalVerifier
        const { sessionToken, userId } = yield* signUp("principal")
        const result = yield* auth.authenticate(sessionToken)
        expect(result.principal).toMatchObject({ kind: "user_session", userId, apiKeyId: null, orgId: null, roleKey: null, permissions: [] })
        expect(result.principal.sessionId).toMatch(/^ses_/)
        expect(result.principal.exp * 1000 - Date.now()).toBeGreaterThan(295_000)
        expect(result.principal.exp * 1000 - Date.now()).toBeLessThanOrEqual(300_000)
        const verified = yield* verifier.verify(result.token)
        expect(verified.userId).toBe(userId)
      })
    )

    it.effect("refuses missing, malformed, unknown and forged tokens", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        for (const token of ["", "Basic dXNlcjpwYXNz", "scion_sess_not-a-real-session-token", "sk-scion_live_" + "A".repeat(38), "sk-scion_prod_x"]) {
          const error = yield* Effect.flip(auth.authenticate(token))
          expect(error._tag).toBe("Unauthenticated")
        }
        // A well-formed key with a valid checksum that was never issued.
        const error = yield* Effect.flip(auth.authenticate(yield* newApiKeySecret("live")))
        expect(error._tag).toBe("Unauthenticated")
      })
    )

    it.effect("publishes the signer's key for verifiers", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const signer = yield* PrincipalSigner
        const keys = yield* auth.verificationKeys
        expect(keys).toEqual([{ keyId: signer.keyId, publicKey: signer.publicKeyDer.toString("base64") }])
      })
    )

    it.effect("authorizes by named permission in an org", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const { principal } = yield* signUp("authorize")
        const other = yield* signUp("outsider")
        const org = yield* createOrg(principal)
        const granted = yield* auth.authorize(principal, org.orgId, "org.delete")
        expect(granted.roleKey).toBe("owner")
        expect(granted.permissions).toContain("billing.manage")
        const denied = yield* Effect.flip(auth.authorize(other.principal, org.orgId, "org.read"))
        expect(denied).toMatchObject({ _tag: "NotAMember", orgId: org.orgId })
      })
    )

    it.effect("seeds the roles table exactly as the domain permission table", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ id: string; role_key: string; name: string; description: string; permissions: Array<string>; rank: number }>`
          select id, role_key, name, description, permissions, rank from roles order by rank`
        expect(rows.map((r) => ({ id: r.id, key: r.role_key, name: r.name, description: r.description, permissions: r.permissions, rank: r.rank }))).toEqual(
          ALL_ROLES.map((r) => ({ ...r, permissions: [...r.permissions] }))
        )
      })
    )
  })
})
