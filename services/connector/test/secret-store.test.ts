import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Either, Layer, Redacted } from "effect"
import { generateSecretKey, parseSecretKeys, SecretStore, type Envelope } from "../src/index.js"

const keysOf = (spec: string) => Either.getOrThrow(parseSecretKeys(spec))
const k1 = generateSecretKey("k1")
const k2 = generateSecretKey("k2")

const store = (spec: string, active: string) => SecretStore.make(keysOf(spec), active)
const secret = Redacted.make("dbp_live_0123456789abcdef")

/** Flips one bit of a base64 field. */
const flip = (field: string) => {
  const bytes = Buffer.from(field, "base64")
  bytes[0] = bytes[0]! ^ 1
  return bytes.toString("base64")
}

describe("SecretStore", () => {
  it.effect("round-trips a secret; the envelope carries the key id and no plaintext", () =>
    Effect.gen(function* () {
      const secrets = yield* store(k1, "k1")
      const envelope = yield* secrets.encrypt(secret, "environment:env_1:db_provider_api_key")
      expect(envelope.key_id).toBe("k1")
      expect(JSON.stringify(envelope)).not.toContain("dbp_live")
      expect(Buffer.from(envelope.wrapped_key, "base64")).toHaveLength(12 + 16 + 32)
      expect(Redacted.value(yield* secrets.decrypt(envelope, "environment:env_1:db_provider_api_key"))).toBe(Redacted.value(secret))
      // A fresh data key and IV each time: the same value never encrypts the same way twice.
      const again = yield* secrets.encrypt(secret, "environment:env_1:db_provider_api_key")
      expect(again.ciphertext).not.toBe(envelope.ciphertext)
      expect(again.wrapped_key).not.toBe(envelope.wrapped_key)
    })
  )

  it.effect("a tampered envelope fails to decrypt", () =>
    Effect.gen(function* () {
      const secrets = yield* store(k1, "k1")
      const aad = "environment:env_1:x"
      const envelope = yield* secrets.encrypt(secret, aad)
      const tampered: ReadonlyArray<Envelope> = [
        { ...envelope, ciphertext: flip(envelope.ciphertext) },
        { ...envelope, tag: flip(envelope.tag) },
        { ...envelope, iv: flip(envelope.iv) },
        { ...envelope, wrapped_key: flip(envelope.wrapped_key) },
        { ...envelope, tag: "" }
      ]
      for (const bad of tampered) {
        const failure = yield* Effect.flip(secrets.decrypt(bad, aad))
        expect(failure._tag).toBe("SecretStoreFailure")
        expect(failure.message).not.toContain("dbp_live")
      }
    })
  )

  it.effect("wrong associated data fails: an envelope moved to another owner does not decrypt", () =>
    Effect.gen(function* () {
      const secrets = yield* store(k1, "k1")
      const envelope = yield* secrets.encrypt(secret, "environment:env_1:db_provider_api_key")
      expect((yield* Effect.flip(secrets.decrypt(envelope, "environment:env_2:db_provider_api_key")))._tag).toBe("SecretStoreFailure")
      expect((yield* Effect.flip(secrets.decrypt(envelope, "environment:env_1:other")))._tag).toBe("SecretStoreFailure")
    })
  )

  it.effect("rotation: old envelopes decrypt with their key, new ones use the active key, rewrap moves them", () =>
    Effect.gen(function* () {
      const aad = "environment:env_9:db_provider_api_key"
      const before = yield* store(k1, "k1")
      const old = yield* before.encrypt(secret, aad)

      const after = yield* store(`${k1},${k2}`, "k2")
      expect(after.activeKeyId).toBe("k2")
      expect(Redacted.value(yield* after.decrypt(old, aad))).toBe(Redacted.value(secret))
      expect(after.needsRewrap(old)).toBe(true)
      const fresh = yield* after.encrypt(secret, aad)
      expect(fresh.key_id).toBe("k2")
      const rewrapped = yield* after.rewrap(old, aad)
      expect(rewrapped.key_id).toBe("k2")
      expect(after.needsRewrap(rewrapped)).toBe(false)

      // Once k1 is retired, only envelopes under k2 decrypt.
      const retired = yield* store(k2, "k2")
      expect(Redacted.value(yield* retired.decrypt(rewrapped, aad))).toBe(Redacted.value(secret))
      const failure = yield* Effect.flip(retired.decrypt(old, aad))
      expect(failure.message).toContain("k1")
      // A key id pointing at another key's material fails authentication.
      expect((yield* Effect.flip(retired.decrypt({ ...old, key_id: "k2" }, aad)))._tag).toBe("SecretStoreFailure")
    })
  )

  it("parses SECRET_KEYS and refuses malformed entries without echoing key material", () => {
    expect(keysOf(`${k1}, ${k2}`).map((k) => k.id)).toEqual(["k1", "k2"])
    const short = `k1:${Buffer.alloc(16).toString("base64")}`
    for (const bad of ["", "nokey", short, `bad id:${k1.split(":")[1]}`, `${k1},${k1}`]) {
      const result = parseSecretKeys(bad)
      expect(Either.isLeft(result), bad).toBe(true)
      if (Either.isLeft(result)) expect(result.left).not.toContain(k1.split(":")[1])
    }
  })

  it.effect("layerConfig: one key is active by default; several need SECRET_ACTIVE_KEY_ID; an unknown active id fails", () =>
    Effect.gen(function* () {
      const build = (values: Record<string, string>) =>
        Effect.scoped(Layer.build(SecretStore.layerConfig)).pipe(
          Effect.map((ctx) => Context.get(ctx, SecretStore)),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(values))))
        )
      expect((yield* build({ SECRET_KEYS: k1 })).activeKeyId).toBe("k1")
      expect((yield* build({ SECRET_KEYS: `${k1},${k2}`, SECRET_ACTIVE_KEY_ID: "k2" })).activeKeyId).toBe("k2")
      yield* Effect.flip(build({ SECRET_KEYS: `${k1},${k2}` }))
      yield* Effect.flip(build({ SECRET_KEYS: k1, SECRET_ACTIVE_KEY_ID: "k3" }))
      yield* Effect.flip(build({}))
    })
  )
})
