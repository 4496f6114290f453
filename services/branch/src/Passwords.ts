import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { Config, ConfigError, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SecretStoreFailure } from "./domain/errors.js"

/** A branch role's password as stored: AES-256-GCM under a master key named by key_id, bound to the branch id. */
export const PasswordEnvelope = Schema.Struct({
  v: Schema.Literal(1),
  key_id: Schema.String,
  iv: Schema.String,
  ciphertext: Schema.String,
  tag: Schema.String
})
export type PasswordEnvelope = typeof PasswordEnvelope.Type

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/

/** `k1:<base64 of 32 bytes>,k2:…` (the connector unit's SECRET_KEYS format). */
export const parseKeys = (raw: string): ReadonlyArray<{ readonly id: string; readonly key: Buffer }> | string => {
  const keys: Array<{ id: string; key: Buffer }> = []
  for (const part of raw.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const [id, material] = part.split(":", 2)
    if (id === undefined || material === undefined || !KEY_ID.test(id)) return "each key is <id>:<base64 of 32 bytes> with an id of 1..32 of [A-Za-z0-9_-]"
    const key = Buffer.from(material, "base64")
    if (key.length !== 32) return `key ${id} is not 32 bytes`
    keys.push({ id, key })
  }
  return keys.length === 0 ? "no key given" : keys
}

/**
 * Encrypts branch role passwords so GET /v1/branches/{id} can answer branch_url again without
 * the unit ever storing a password in clear. Rotation: add a key, make it SECRET_ACTIVE_KEY_ID;
 * old envelopes decrypt with the key they name.
 */
export class Passwords extends Context.Tag("@scion/branch/Passwords")<
  Passwords,
  {
    readonly seal: (password: Redacted.Redacted<string>, branchId: string) => Effect.Effect<PasswordEnvelope, SecretStoreFailure>
    readonly open: (envelope: PasswordEnvelope, branchId: string) => Effect.Effect<Redacted.Redacted<string>, SecretStoreFailure>
  }
>() {
  static make(keys: ReadonlyArray<{ readonly id: string; readonly key: Buffer }>, activeKeyId: string): Context.Tag.Service<Passwords> {
    const byId = new Map(keys.map((k) => [k.id, k.key] as const))
    const aad = (keyId: string, branchId: string) => Buffer.from(`scion.branch-password.v1|${keyId}|${branchId}`)
    return Passwords.of({
      seal: (password, branchId) =>
        Effect.try({
          try: (): PasswordEnvelope => {
            const key = byId.get(activeKeyId)!
            const iv = randomBytes(12)
            const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(aad(activeKeyId, branchId))
            const ciphertext = Buffer.concat([cipher.update(Redacted.value(password), "utf8"), cipher.final()])
            return { v: 1, key_id: activeKeyId, iv: iv.toString("base64"), ciphertext: ciphertext.toString("base64"), tag: cipher.getAuthTag().toString("base64") }
          },
          catch: () => new SecretStoreFailure({ reason: "encryption failed" })
        }),
      open: (envelope, branchId) =>
        Effect.try({
          try: () => {
            const key = byId.get(envelope.key_id)
            if (key === undefined) throw new Error("unknown key")
            const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(envelope.iv, "base64"))
              .setAAD(aad(envelope.key_id, branchId))
              .setAuthTag(Buffer.from(envelope.tag, "base64"))
            return Redacted.make(Buffer.concat([decipher.update(Buffer.from(envelope.ciphertext, "base64")), decipher.final()]).toString("utf8"))
          },
          catch: () => new SecretStoreFailure({ reason: `the branch password could not be decrypted (key ${envelope.key_id} unknown, or the envelope is not this branch's)` })
        })
    })
  }

  /** SECRET_KEYS (redacted) and SECRET_ACTIVE_KEY_ID (optional with one key), as the connector unit reads them. */
  static readonly layerConfig: Layer.Layer<Passwords, ConfigError.ConfigError> = Layer.effect(
    Passwords,
    Effect.gen(function* () {
      const raw = yield* Config.redacted("SECRET_KEYS")
      const keys = parseKeys(Redacted.value(raw))
      if (typeof keys === "string") return yield* Effect.fail(ConfigError.InvalidData(["SECRET_KEYS"], keys))
      const active = yield* Config.option(Config.string("SECRET_ACTIVE_KEY_ID"))
      const activeKeyId = Option.getOrElse(active, () => (keys.length === 1 ? keys[0]!.id : ""))
      if (!keys.some((k) => k.id === activeKeyId)) {
        return yield* Effect.fail(ConfigError.InvalidData(["SECRET_ACTIVE_KEY_ID"], "SECRET_ACTIVE_KEY_ID must name one of SECRET_KEYS (required with several keys)"))
      }
      return Passwords.make(keys, activeKeyId)
    })
  )
}

/** A fresh role password: 32 characters of base64url (192 bits). */
export const generatePassword = (): Redacted.Redacted<string> => Redacted.make(randomBytes(24).toString("base64url"))
