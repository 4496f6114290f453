import { tracedFn } from "@scion/kit"
import { createPrivateKey, createSign, type KeyObject } from "node:crypto"
import { Clock, Effect, Redacted } from "effect"
import { InvalidPrivateKey } from "./CodeHost.js"

const base64url = (value: string | Buffer) => Buffer.from(value).toString("base64url")

/** GitHub's iss: the numeric app id as a number, a client id ("Iv1.…") as it is. */
const issuer = (appId: string): number | string => (/^\d{1,15}$/.test(appId) ? Number(appId) : appId)

/** The PEM (PKCS#1 "RSA PRIVATE KEY", as GitHub issues it, or PKCS#8) as an RSA key object. */
const rsaKey = (pem: Redacted.Redacted<string>): Effect.Effect<KeyObject, InvalidPrivateKey> =>
  Effect.try({
    try: () => createPrivateKey({ key: Redacted.value(pem), format: "pem" }),
    // The parser's message may quote the input: it is not kept.
    catch: () => new InvalidPrivateKey({ problem: "it is not a PEM private key (expected the .pem file GitHub generated for the app)" })
  }).pipe(
    Effect.filterOrFail(
      (key) => key.asymmetricKeyType === "rsa",
      (key) => new InvalidPrivateKey({ problem: `it is a ${key.asymmetricKeyType ?? "non-RSA"} key; GitHub App keys are RSA` })
    )
  )

/**
 * A GitHub App JWT: RS256, header {alg, typ}, claims iat = now - 60 s (clock drift), exp = now +
 * 540 s (GitHub allows at most 10 minutes), iss = the app id. Redacted: it is a credential.
 */
export const signAppJwt = tracedFn("CodeHost.signAppJwt")(function* (appId: string, privateKey: Redacted.Redacted<string>) {
  const key = yield* rsaKey(privateKey)
  const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
  const header = base64url(JSON.stringify({ alg: "RS256", typ: "JWT" }))
  const claims = base64url(JSON.stringify({ iat: now - 60, exp: now + 540, iss: issuer(appId) }))
  const signingInput = `${header}.${claims}`
  const signature = yield* Effect.try({
    try: () => createSign("RSA-SHA256").update(signingInput).sign(key),
    catch: () => new InvalidPrivateKey({ problem: "it could not sign (is it a complete RSA key?)" })
  })
  return Redacted.make(`${signingInput}.${base64url(signature)}`)
})
