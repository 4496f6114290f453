/**
 * Rate limits at the gateway, with every unit its own process and limits low enough to reach:
 * per caller for authenticated requests (a session's user, an API key), per client address for the
 * anonymous endpoints, a smaller bucket for the code-host validators, and failed logins slowing
 * down per account and per address. Refusals are 429 and say when to try again: Retry-After
 * and/or the RateLimit-* headers, with a {detail} for the caller's bucket and the login delay.
 * Whether a refused request reached a unit is not checked here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createApiKey, createOrg } from "../support/flows.js"
import { type Scion, startScion } from "../support/system.js"

let scion: Scion

beforeAll(async () => {
  scion = await startScion({
    env: {
      RATE_LIMIT_PER_MINUTE: "5",
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: "8",
      RATE_LIMIT_CODE_HOST_PER_MINUTE: "2",
      LOGIN_FAILURES_BEFORE_DELAY: "3",
      RATE_LIMIT_TRUST_FORWARDED_FOR: "true",
      // Nothing listens there: the validators answer status "error" at once.
      CODE_HOST_API_URL: "http://127.0.0.1:1",
      CODE_HOST_TIMEOUT: "1 second"
    }
  })
}, 120_000)

afterAll(async () => {
  await scion?.stop()
})

/** A sign-up from its own address (X-Forwarded-For, trusted here): the harness's probes use the socket's. */
const signUpFrom = async (address: string, name: string) => {
  const response = await scion.request("POST", "/v1/auth/signup", {
    body: { email: `${name}-${Date.now()}@example.com`, password: "correct-horse-battery", full_name: name },
    headers: { "x-forwarded-for": address }
  })
  expect(response.status, scion.explain(response)).toBe(201)
  return { token: response.body.session_token as string }
}

const quota = (headers: Headers) => ({
  limit: headers.get("ratelimit-limit"),
  remaining: headers.get("ratelimit-remaining"),
  retryAfter: headers.get("retry-after")
})

describe("rate limits", () => {
  it("per caller: a session's user and an API key each have their own bucket; the sixth request in a minute is 429", async () => {
    const owner = await signUpFrom("192.0.2.1", "limited")
    const org = await createOrg(scion, owner.token, "Limited") // 1
    const key = await createApiKey(scion, owner.token, org.org_id) // 2
    const seen: Array<string | null> = []
    for (let i = 0; i < 3; i++) {
      const me = await scion.request("GET", "/v1/me", { token: owner.token }) // 3, 4, 5
      expect(me.status).toBe(200)
      expect(quota(me.headers).limit).toBe("5")
      seen.push(quota(me.headers).remaining)
    }
    expect(seen).toEqual(["2", "1", "0"])
    const refused = await scion.request("GET", "/v1/me", { token: owner.token })
    expect(refused.status).toBe(429)
    expect(typeof refused.body.detail).toBe("string")
    expect(quota(refused.headers)).toMatchObject({ limit: "5", remaining: "0" })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(refused.headers.get("x-request-id")).toMatch(/^req_/)
    // The API key draws from its own bucket.
    const byKey = await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })
    expect(byKey.status).toBe(200)
    expect(quota(byKey.headers)).toMatchObject({ limit: "5", remaining: "4" })
  })

  it("the code-host validators have a smaller bucket beside it", async () => {
    const owner = await signUpFrom("192.0.2.2", "validator")
    const org = await createOrg(scion, owner.token, "Validators")
    const key = await createApiKey(scion, owner.token, org.org_id)
    for (let i = 0; i < 2; i++) {
      const answered = await scion.request("POST", "/v1/connectors/validate-code-host-repo", { token: key.secret, body: { repo: "acme/widgets" } })
      expect(answered.status, scion.explain(answered)).toBe(200)
      expect(answered.body.status).toBe("error")
    }
    const refused = await scion.request("POST", "/v1/connectors/validate-code-host-repo", { token: key.secret, body: { repo: "acme/widgets" } })
    expect(refused.status).toBe(429)
    expect(quota(refused.headers)).toMatchObject({ limit: "2", remaining: "0" })
  })

  it("failed logins slow down per account and address; anonymous endpoints are limited per address", async () => {
    // Behind a trusted proxy the client is the first X-Forwarded-For hop: fresh addresses here
    // (the harness's own readiness probe fails a login from the socket's address).
    const from = (address: string) => ({ "x-forwarded-for": `${address}, 10.0.0.1` })
    const email = `guessed-${Date.now()}@example.com`
    const signedUp = await scion.request("POST", "/v1/auth/signup", { body: { email, password: "correct-horse-battery", full_name: "Guessed" }, headers: from("203.0.113.7") }) // 1
    expect(signedUp.status).toBe(201)
    for (let i = 0; i < 3; i++) {
      const wrong = await scion.request("POST", "/v1/auth/login", { body: { email, password: "not-the-password" }, headers: from("203.0.113.7") }) // 2, 3, 4
      expect(wrong.status, `${i}: ${JSON.stringify(wrong.body)}`).toBe(401)
    }
    // The fourth attempt waits, even with the right password: 2^0 s from the last failure,
    // from this address and (the account's own count) from any other.
    for (const address of ["203.0.113.7", "198.51.100.9"]) {
      const delayed = await scion.request("POST", "/v1/auth/login", { body: { email, password: "correct-horse-battery" }, headers: from(address) }) // 5
      expect(delayed.status, address).toBe(429)
      expect(delayed.body.detail).toMatch(/failed logins/)
      expect(Number(delayed.headers.get("retry-after"))).toBe(1)
    }
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const after = await scion.request("POST", "/v1/auth/login", { body: { email, password: "correct-horse-battery" }, headers: from("198.51.100.9") })
    expect(after.status, scion.explain(after)).toBe(200)
    // The first address's anonymous bucket (8 a minute) runs out; then it is refused before anything else.
    const statuses: Array<number> = []
    for (let i = 0; i < 4; i++) statuses.push((await scion.request("POST", "/v1/auth/verify-email", { body: { token: "whatever" }, headers: from("203.0.113.7") })).status) // 6, 7, 8, 9
    expect(statuses.slice(0, 3).every((s) => s !== 429)).toBe(true)
    expect(statuses[3]).toBe(429)
    const refused = await scion.request("POST", "/v1/auth/verify-email", { body: { token: "whatever" }, headers: from("203.0.113.7") })
    expect(quota(refused.headers)).toMatchObject({ limit: "8", remaining: "0" })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })

  it("documents 429 in the OpenAPI description", async () => {
    const spec = (await fetch(`${scion.baseUrl}/v1/openapi.json`).then((r) => r.json())) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>>; info: { description: string } }
    expect(spec.paths["/v1/auth/login"]?.post?.responses["429"]).toBeDefined()
    expect(spec.paths["/v1/me"]?.get?.responses["429"]).toBeDefined()
    expect(spec.info.description).toMatch(/RateLimit-Limit/)
  })
})
