import { randomFillSync } from "node:crypto"
import { Effect } from "effect"

// Crockford base32, lower-cased: ids sort by creation time and read unambiguously.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

const encodeTime = (ms: number): string => {
  let out = ""
  let rest = ms
  for (let i = 0; i < 10; i++) {
    out = alphabet[rest % 32] + out
    rest = Math.floor(rest / 32)
  }
  return out
}

const encodeRandom = (bytes: Uint8Array): string => {
  let out = ""
  for (const byte of bytes) out += alphabet[byte % 32]
  return out
}

/**
 * Random bytes for ids, drawn from the CSPRNG 4 KiB at a time: one call per id cost more than
 * the rest of the id (the gateway makes one per request, for its request id).
 */
const pool = Buffer.alloc(4096)
let poolOffset = pool.length
const randomBytes16 = (): Uint8Array => {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool)
    poolOffset = 0
  }
  poolOffset += 16
  return pool.subarray(poolOffset - 16, poolOffset)
}

/** An opaque, prefixed, time-sortable id such as `org_01jd3v…`. */
export const makeId = (prefix: string): Effect.Effect<string> => Effect.sync(() => newId(prefix))

/** `makeId` where an effect is not wanted (a step that is already synchronous, e.g. the gateway's per-request edge). */
export const newId = (prefix: string): string => `${prefix}_${encodeTime(Date.now())}${encodeRandom(randomBytes16())}`
