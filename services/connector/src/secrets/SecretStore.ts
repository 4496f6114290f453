import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import { SecretStoreFailure } from "../domain/errors.js"

/**
 * An encrypted secret as stored: AES-256-GCM envelope encryption. The value is encrypted with a
 * fresh random data key; the data key is encrypted ("wrapped") with the master key named by
 * key_id. Both encryptions are bound to the caller's associated data (for example the id of the
 * environment the secret belongs to), so an envelope copied onto another row does not decrypt.
 * Everything is base64; nothing here is secret without a master key.
 */
export const Envelope = Schema.Struct({
  v: Schema.Literal(1),
  key_id: Schema.String,
  /** iv (12) | tag (16) | encrypted data key (32) */
  wrapped_key: Schema.String,
  iv: Schema.String,
  ciphertext: Schema.String,
  tag: Schema.String
})
export type Envelope = typeof Envelope.Type

const ALGORITHM = "aes-256-gcm"
const KEY_BYTES = 32
const IV_BYTES = 12
const TAG_BYTES = 16
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/

/** A master key: 32 bytes, named by an id that travels in every envelope it wraps. */
export interface MasterKey {
  readonly id: string
  readonly key: Redacted.Redacted<Buffer>
}

const seal = (key: Buffer, plaintext: Buffer, aad: Buffer) => {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv(ALGORITHM, key, iv).setAAD(aad)
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return { iv, ciphertext, tag: cipher.getAuthTag() }
}

const open = (key: Buffer, parts: { iv: Buffer; ciphertext: Buffer; tag: Buffer }, aad: Buffer) => {
  if (parts.iv.length !== IV_BYTES || parts.tag.length !== TAG_BYTES) throw new Error("malformed envelope")
  const decipher = createDecipheriv(ALGORITHM, key, parts.iv).setAAD(aad).setAuthTag(parts.tag)
  return Buffer.concat([decipher.update(parts.ciphertext), decipher.final()])
}

// The data key's own associated data names the master key and the caller's context: a wrapped
// key cannot be moved to another envelope or presented under another key id.
const wrapAad = (keyId: string, aad: string) => Buffer.from(`scion.dek.v1|${keyId}|${aad}`)

/**
 * Encrypts and decrypts secrets with the configured master keys. Rotation: add a key to
 * SECRET_KEYS and make it SECRET_ACTIVE_KEY_ID; new secrets use it, old envelopes still decrypt
 * with the key their key_id names, and `rewrap` moves one onto the active key. A key may leave
 * SECRET_KEYS only once no envelope names it.
 */
export class SecretStore extends Context.Tag("@scion/connector/SecretStore")<
  SecretStore,
  {
    readonly activeKeyId: string
    readonly encrypt: (plaintext: Redacted.Redacted<string>, aad: string) => Effect.Effect<Envelope, SecretStoreFailure>
    readonly decrypt: (envelope: Envelope, aad: string) => Effect.Effect<Redacted.Redacted<string>, SecretStoreFailure>
    /** Whether the envelope is under another key than the active one. */
    readonly needsRewrap: (envelope: Envelope) => boolean
    /** Decrypts with whichever configured key the envelope names, encrypts with the active key. */
    readonly rewrap: (envelope: Envelope, aad: string) => Effect.Effect<Envelope, SecretStoreFailure>
  }
>() {
  static make(keys: ReadonlyArray<MasterKey>, activeKeyId: string): Effect.Effect<Context.Tag.Service<SecretStore>, SecretStoreFailure> {
    return Effect.gen(function* () {
      const byId = new Map(keys.map((k) => [k.id, k.key] as const))
      const active = byId.get(activeKeyId)
      if (active === undefined) return yield* new SecretStoreFailure({ reason: `the active key id ${activeKeyId} is not among the configured keys` })

      const encrypt = (plaintext: Redacted.Redacted<string>, aad: string) =>
        Effect.try({
          try: (): Envelope => {
            const dataKey = randomBytes(KEY_BYTES)
            try {
              const wrapped = seal(Redacted.value(active), dataKey, wrapAad(activeKeyId, aad))
              const sealed = seal(dataKey, Buffer.from(Redacted.value(plaintext), "utf8"), Buffer.from(aad))
              return {
                v: 1,
                key_id: activeKeyId,
                wrapped_key: Buffer.concat([wrapped.iv, wrapped.tag, wrapped.ciphertext]).toString("base64"),
                iv: sealed.iv.toString("base64"),
                ciphertext: sealed.ciphertext.toString("base64"),
                tag: sealed.tag.toString("base64")
              }
            } finally {
              dataKey.fill(0)
            }
          },
          catch: () => new SecretStoreFailure({ reason: "encryption failed" })
        }).pipe(Effect.withSpan("SecretStore.encrypt", { attributes: { keyId: activeKeyId } }))

      const decrypt = (envelope: Envelope, aad: string) =>
        Effect.gen(function* () {
          const master = byId.get(envelope.key_id)
          if (master === undefined) return yield* new SecretStoreFailure({ reason: `no configured key has the id ${envelope.key_id}` })
          return yield* Effect.try({
            try: () => {
              const wrapped = Buffer.from(envelope.wrapped_key, "base64")
              const dataKey = open(
                Redacted.value(master),
                { iv: wrapped.subarray(0, IV_BYTES), tag: wrapped.subarray(IV_BYTES, IV_BYTES + TAG_BYTES), ciphertext: wrapped.subarray(IV_BYTES + TAG_BYTES) },
                wrapAad(envelope.key_id, aad)
              )
              try {
                const plaintext = open(
                  dataKey,
                  { iv: Buffer.from(envelope.iv, "base64"), ciphertext: Buffer.from(envelope.ciphertext, "base64"), tag: Buffer.from(envelope.tag, "base64") },
                  Buffer.from(aad)
                )
                return Redacted.make(plaintext.toString("utf8"))
              } finally {
                dataKey.fill(0)
              }
            },
            // GCM authentication failed: tampered, wrong key, or the envelope of another owner.
            catch: () => new SecretStoreFailure({ reason: "the secret could not be decrypted (tampered, or bound to another owner)" })
          })
        }).pipe(Effect.withSpan("SecretStore.decrypt", { attributes: { keyId: envelope.key_id } }))

      return SecretStore.of({
        activeKeyId,
        encrypt,
        decrypt,
        needsRewrap: (envelope) => envelope.key_id !== activeKeyId,
        rewrap: (envelope, aad) => Effect.flatMap(decrypt(envelope, aad), (plaintext) => encrypt(plaintext, aad))
      })
    })
  }

  /**
   * SECRET_KEYS (`k1:<base64 of 32 bytes>,k2:…`, redacted) and SECRET_ACTIVE_KEY_ID (optional
   * when there is one key). Missing or malformed configuration fails the layer: a connector unit
   * cannot store secrets without keys.
   */
  static readonly layerConfig: Layer.Layer<SecretStore, ConfigError.ConfigError | SecretStoreFailure> = Layer.effect(
    SecretStore,
    Effect.gen(function* () {
      const raw = yield* Config.redacted("SECRET_KEYS")
      const keys = yield* parseSecretKeys(Redacted.value(raw)).pipe(Either.mapLeft((message) => ConfigError.InvalidData(["SECRET_KEYS"], message)))
      const active = yield* Config.option(Config.string("SECRET_ACTIVE_KEY_ID"))
      const activeKeyId = Option.getOrElse(active, () => (keys.length === 1 ? keys[0]!.id : ""))
      if (activeKeyId === "") return yield* Effect.fail(ConfigError.MissingData(["SECRET_ACTIVE_KEY_ID"], "SECRET_ACTIVE_KEY_ID is required when SECRET_KEYS has several keys"))
      return yield* SecretStore.make(keys, activeKeyId)
    })
  )
}

/** Parses `id:<base64 32 bytes>,…`. Messages name key ids, never key material. */
export const parseSecretKeys = (value: string): Either.Either<ReadonlyArray<MasterKey>, string> => {
  const keys: Array<MasterKey> = []
  for (const entry of value.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
    const colon = entry.indexOf(":")
    const id = colon < 0 ? "" : entry.slice(0, colon)
    if (!KEY_ID.test(id)) return Either.left("each SECRET_KEYS entry must be <key id>:<base64 key>, the id 1..32 of A-Z a-z 0-9 _ -")
    const key = Buffer.from(entry.slice(colon + 1), "base64")
    if (key.length !== KEY_BYTES) return Either.left(`key ${id} must be ${KEY_BYTES} bytes, base64-encoded`)
    if (keys.some((k) => k.id === id)) return Either.left(`key id ${id} appears twice`)
    keys.push({ id, key: Redacted.make(key) })
  }
  return keys.length > 0 ? Either.right(keys) : Either.left("SECRET_KEYS must hold at least one key")
}

/** A new key entry for SECRET_KEYS: `id:<base64 of 32 random bytes>`. */
export const generateSecretKey = (id: string): string => `${id}:${randomBytes(KEY_BYTES).toString("base64")}`
