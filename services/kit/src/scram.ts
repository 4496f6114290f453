import { createHash, createHmac, pbkdf2, randomBytes } from "node:crypto"
import { Effect } from "effect"

/**
 * PBKDF2 rounds in the SCRAM verifier of a password Scion generates (a branch role's, an engine's
 * superuser). Postgres's 4,096 make a guessable password costly to brute-force from a leaked
 * verifier; ours are 192 random bits, which no round count changes. Every login pays the rounds
 * again on the client's side (~2–4 ms of CPU a connection on this deployment's machines at 4,096):
 * each connection of a branch's users, and the unit's own logins on the engines.
 */
export const GENERATED_PASSWORD_SCRAM_ITERATIONS = 256

/**
 * A SCRAM-SHA-256 verifier for a password (RFC 7677, Postgres's format), so CREATE or ALTER ROLE
 * never carries the password itself: it cannot end up in a server's statement logs. The key
 * derivation runs on libuv's thread pool, not on the event loop that serves the unit's calls.
 */
export const scramVerifier = (password: string, iterations: number): Effect.Effect<string> =>
  Effect.suspend(() => {
    const salt = randomBytes(16)
    return Effect.async<Buffer>((resume) =>
      pbkdf2(password.normalize("NFKC"), salt, iterations, 32, "sha256", (error, salted) =>
        // Fails only on invalid arguments (ours are fixed): a defect.
        resume(error === null ? Effect.succeed(salted) : Effect.die(error))
      )
    ).pipe(
      Effect.map((salted) => {
        const clientKey = createHmac("sha256", salted).update("Client Key").digest()
        const storedKey = createHash("sha256").update(clientKey).digest()
        const serverKey = createHmac("sha256", salted).update("Server Key").digest()
        return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`
      })
    )
  })
