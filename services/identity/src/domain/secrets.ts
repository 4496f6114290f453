import { createHash, randomBytes, scrypt, timingSafeEqual } from "node:crypto"
import { Effect, Option } from "effect"

/** SHA-256 hex digest: how session tokens, verification tokens and API keys are stored. */
export const digest = (secret: string): string => createHash("sha256").update(secret).digest("hex")

const randomToken = (prefix: string): Effect.Effect<string> => Effect.sync(() => `${prefix}${randomBytes(32).toString("base64url")}`)

/** Dashboard session token: 256 random bits. */
export const newSessionToken = randomToken("scion_sess_")
/** Email verification token: 256 random bits. */
export const newVerificationToken = randomToken("scion_ver_")
/** Invite token: 256 random bits, kept in clear (the invitee's verified email must match too). */
export const newInviteToken = randomToken("inv_tok_")

// ---------------------------------------------------------------------------------------------
// API keys: `sk-scion_<mode>_<32 base62 body><6 base62 CRC32 of everything before it>`.

export type ApiKeyMode = "live" | "test"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const BODY_LENGTH = 32
const CHECKSUM_LENGTH = 6
/** What lists show of a key: `sk-scion_live_` plus the first four characters of the body. */
export const KEY_PREFIX_LENGTH = 18

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})

export const crc32 = (text: string): number => {
  let crc = 0xffffffff
  for (const byte of Buffer.from(text, "utf8")) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

const checksumOf = (text: string): string => {
  let n = crc32(text)
  let out = ""
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

const randomBase62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: rejecting the top bytes keeps every character equally likely.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

const keyPrefixOf = (mode: ApiKeyMode) => `sk-scion_${mode}_`

export const newApiKeySecret = (mode: ApiKeyMode): Effect.Effect<string> =>
  Effect.sync(() => {
    const head = keyPrefixOf(mode) + randomBase62(BODY_LENGTH)
    return head + checksumOf(head)
  })

const API_KEY = /^sk-scion_(live|test)_[0-9A-Za-z]{38}$/

/** True when the token has the API key shape; a bad checksum makes it invalid without a lookup. */
export const isApiKeyShaped = (token: string): boolean => token.startsWith("sk-scion_")

export const hasValidChecksum = (token: string): boolean => {
  if (!API_KEY.test(token)) return false
  const split = token.length - CHECKSUM_LENGTH
  return checksumOf(token.slice(0, split)) === token.slice(split)
}

// ---------------------------------------------------------------------------------------------
// Passwords: scrypt (N=2^14, r=8, p=1, 64-byte key, 16-byte random salt), compared in constant time.

const SCRYPT = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const
const KEY_LENGTH = 64

const scryptKey = (password: string, salt: Buffer, params: { N: number; r: number; p: number }) =>
  Effect.async<Buffer>((resume) => {
    scrypt(password.normalize("NFKC"), salt, KEY_LENGTH, { ...params, maxmem: SCRYPT.maxmem }, (error, key) =>
      resume(error ? Effect.die(error) : Effect.succeed(key))
    )
  })

export const hashPassword = (password: string): Effect.Effect<string> =>
  Effect.gen(function* () {
    const salt = yield* Effect.sync(() => randomBytes(16))
    const key = yield* scryptKey(password, salt, SCRYPT)
    return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString("base64")}$${key.toString("base64")}`
  })

const parseHash = (stored: string) => {
  const [scheme, n, r, p, salt, key] = stored.split("$")
  if (scheme !== "scrypt" || !n || !r || !p || !salt || !key) return Option.none()
  return Option.some({ params: { N: Number(n), r: Number(r), p: Number(p) }, salt: Buffer.from(salt, "base64"), key: Buffer.from(key, "base64") })
}

// Verified against when the email is unknown, so both failures cost one scrypt.
const DECOY_HASH = `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${Buffer.alloc(16, 7).toString("base64")}$${Buffer.alloc(KEY_LENGTH).toString("base64")}`

/** Checks a password against a stored hash; with no hash it does the same work and fails. */
export const verifyPassword = (password: string, stored: Option.Option<string>): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const parsed = parseHash(Option.getOrElse(stored, () => DECOY_HASH))
    if (Option.isNone(parsed)) return false
    const { params, salt, key } = parsed.value
    const candidate = yield* scryptKey(password, salt, params)
    return candidate.length === key.length && timingSafeEqual(candidate, key) && Option.isSome(stored)
  })
