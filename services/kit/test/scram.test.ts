import { createHash, createHmac, pbkdf2Sync } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { GENERATED_PASSWORD_SCRAM_ITERATIONS, scramVerifier } from "../src/index.js"

describe("SCRAM verifiers", () => {
  it("makes a SCRAM-SHA-256 verifier Postgres accepts (RFC 7677 layout), with the rounds asked for", async () => {
    const verifier = await Effect.runPromise(scramVerifier("secret", GENERATED_PASSWORD_SCRAM_ITERATIONS))
    const [, iterations, salt, stored, server] = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)$/.exec(verifier)!
    expect(Number(iterations)).toBe(GENERATED_PASSWORD_SCRAM_ITERATIONS)
    const salted = pbkdf2Sync("secret", Buffer.from(salt!, "base64"), Number(iterations), 32, "sha256")
    expect(stored).toBe(createHash("sha256").update(createHmac("sha256", salted).update("Client Key").digest()).digest("base64"))
    expect(server).toBe(createHmac("sha256", salted).update("Server Key").digest("base64"))
  })
})
