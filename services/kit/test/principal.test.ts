import { generateKeyPairSync } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Principal, PrincipalSigner, PrincipalVerifier } from "../src/index.js"

const signer = PrincipalSigner.fromPrivateKey(generateKeyPairSync("ed25519").privateKey)
const verifier = () => PrincipalVerifier.fromPublicKeys([{ keyId: signer.keyId, publicKeyDer: signer.publicKeyDer }])
const principal = (exp: number) =>
  new Principal({ kind: "service", service: "worker", userId: null, sessionId: null, apiKeyId: null, orgId: null, roleKey: null, permissions: ["operations.write"], exp })

describe("principal tokens", () => {
  it.effect("verify with identity's key, again from the cache, and never when altered or from another key", () =>
    Effect.gen(function* () {
      const v = verifier()
      const token = signer.sign(principal(Math.floor(Date.now() / 1000) + 60))
      expect((yield* v.verify(token)).service).toBe("worker")
      expect((yield* v.verify(token)).permissions).toEqual(["operations.write"])
      const [version, keyId, payload, signature] = token.split(".")
      const forged = Buffer.from(Buffer.from(payload!, "base64url").toString().replace("operations.write", "operations.admin")).toString("base64url")
      expect((yield* Effect.flip(v.verify([version, keyId, forged, signature].join("."))))).toMatchObject({ reason: "bad_signature" })
      const other = PrincipalSigner.fromPrivateKey(generateKeyPairSync("ed25519").privateKey)
      expect(yield* Effect.flip(v.verify(other.sign(principal(Math.floor(Date.now() / 1000) + 60))))).toMatchObject({ reason: "unknown_key" })
      expect(yield* Effect.flip(v.verify("v1.nope"))).toMatchObject({ reason: "malformed" })
    })
  )

  it.live("expire even after they were verified and kept", () =>
    Effect.gen(function* () {
      const v = verifier()
      // exp has a resolution of seconds: at least one full second of life, whatever the clock's fraction.
      const token = signer.sign(principal(Math.floor(Date.now() / 1000) + 2))
      expect((yield* v.verify(token)).kind).toBe("service")
      yield* Effect.sleep("3100 millis")
      expect(yield* Effect.flip(v.verify(token))).toMatchObject({ reason: "expired" })
      expect(yield* Effect.flip(v.verify(token))).toMatchObject({ reason: "expired" })
    })
  )
})
