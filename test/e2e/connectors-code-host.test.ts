/**
 * The code-host validators through the gateway (identity, billing, operation, connector and the
 * gateway as separate processes), against a fake GitHub: a local HTTP server speaking GitHub's
 * REST wire format (JSON bodies, status codes, rate-limit headers) that verifies the GitHub App
 * JWT's RS256 signature with the public key of a key pair made here, and its iss/iat/exp.
 * Every status of both endpoints, shape errors (422), the org rules (400, 403), the route not
 * shadowed by /v1/connectors/{connector_id}, OpenAPI, and no token or key in any unit's log.
 */
import { createVerify, generateKeyPairSync, type KeyObject, randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg } from "../support/flows.js"
import { signUp, startScion, type Scion } from "../support/system.js"

// ---------------------------------------------------------------------------------------------
// The fake GitHub
// ---------------------------------------------------------------------------------------------

const suffix = randomBytes(8).toString("hex")
const GOOD_TOKEN = `ghp_goodE2eToken${suffix}`
const BAD_TOKEN = `ghp_badE2eToken${suffix}`
const RATE_LIMITED_TOKEN = `ghp_rateLimitedE2eToken${suffix}`
const INSTALLATION_TOKEN = `ghs_installationE2eToken${suffix}`
const APP_ID = 424242
const INSTALLATION_ID = 9001
const APP_SLUG = "scion-e2e-app"
/** How long the fake GitHub takes to answer for acme/slow: well past CODE_HOST_TIMEOUT (1 second, below). */
const SLOW_ANSWER_MS = 5000

// GitHub hands out PKCS#1 ("BEGIN RSA PRIVATE KEY") PEM files for apps.
const appKeys = generateKeyPairSync("rsa", { modulusLength: 2048 })
const APP_PRIVATE_KEY = appKeys.privateKey.export({ type: "pkcs1", format: "pem" }).toString()
const OTHER_PRIVATE_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const EC_PRIVATE_KEY = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
/** A line of the key's body: if it showed up in a log, the key leaked. */
const KEY_MARKER = APP_PRIVATE_KEY.split("\n")[3]!

interface Seen {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly jwtClaims?: Record<string, unknown>
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "x-github-api-version-selected": "2022-11-28", ...headers })
  res.end(JSON.stringify(body))
}
const notFound = (res: ServerResponse) => json(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest", status: "404" })
const badCredentials = (res: ServerResponse) => json(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" })

/** GitHub's check of an app JWT: RS256 by the app's key, iss the app, iat not in the future, exp within 10 minutes. */
const verifyAppJwt = (authorization: string | undefined, publicKey: KeyObject): { ok: true; claims: Record<string, unknown> } | { ok: false; message: string } => {
  const token = /^Bearer (.+)$/.exec(authorization ?? "")?.[1]
  const parts = token?.split(".") ?? []
  if (parts.length !== 3) return { ok: false, message: "A JSON web token could not be decoded" }
  const [header, payload, signature] = parts as [string, string, string]
  let decodedHeader: Record<string, unknown>
  let claims: Record<string, unknown>
  try {
    decodedHeader = JSON.parse(Buffer.from(header, "base64url").toString("utf8"))
    claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))
  } catch {
    return { ok: false, message: "A JSON web token could not be decoded" }
  }
  if (decodedHeader.alg !== "RS256" || decodedHeader.typ !== "JWT") return { ok: false, message: "A JSON web token could not be decoded" }
  const valid = createVerify("RSA-SHA256").update(`${header}.${payload}`).verify(publicKey, Buffer.from(signature, "base64url"))
  if (!valid) return { ok: false, message: "A JSON web token could not be decoded" }
  const now = Math.floor(Date.now() / 1000)
  const { iat, exp, iss } = claims as { iat?: unknown; exp?: unknown; iss?: unknown }
  if (typeof iat !== "number" || iat > now + 1) return { ok: false, message: "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued." }
  if (typeof exp !== "number" || exp <= now || exp - now > 600 || exp - iat > 600) {
    return { ok: false, message: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires." }
  }
  if (String(iss) !== String(APP_ID)) return { ok: false, message: "Integration not found" }
  return { ok: true, claims }
}

const startFakeGithub = async () => {
  const seen: Array<Seen> = []
  const revoked: Array<string> = []
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://github")
    const path = url.pathname
    const method = req.method ?? "GET"
    const authorization = req.headers.authorization
    const record = (jwtClaims?: Record<string, unknown>) => seen.push({ method, path, headers: req.headers, ...(jwtClaims ? { jwtClaims } : {}) })
    // GitHub refuses requests without a User-Agent.
    if (req.headers["user-agent"] === undefined) {
      record()
      return json(res, 403, { message: "Request forbidden by administrative rules. Please make sure your request has a User-Agent header" })
    }
    // App endpoints authenticate with the app JWT.
    if (method === "GET" && path === "/app") {
      const verified = verifyAppJwt(authorization, appKeys.publicKey)
      record(verified.ok ? verified.claims : undefined)
      if (!verified.ok) return json(res, 401, { message: verified.message, documentation_url: "https://docs.github.com/rest" })
      return json(res, 200, { id: APP_ID, slug: APP_SLUG, node_id: "A_kw", name: "Scion E2E App", owner: { login: "acme", id: 1, type: "Organization" } })
    }
    const installation = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(path)
    if (method === "POST" && installation !== null) {
      const verified = verifyAppJwt(authorization, appKeys.publicKey)
      record(verified.ok ? verified.claims : undefined)
      if (!verified.ok) return json(res, 401, { message: verified.message, documentation_url: "https://docs.github.com/rest" })
      if (installation[1] !== String(INSTALLATION_ID)) return notFound(res)
      return json(res, 201, {
        token: INSTALLATION_TOKEN,
        expires_at: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, "Z"),
        permissions: { contents: "read", metadata: "read" },
        repository_selection: "all"
      })
    }
    record()
    if (method === "DELETE" && path === "/installation/token") {
      if (authorization !== `Bearer ${INSTALLATION_TOKEN}`) return badCredentials(res)
      revoked.push(INSTALLATION_TOKEN)
      res.writeHead(204)
      return res.end()
    }
    // Token endpoints: a token other than the known ones is bad credentials.
    let user: string | null = null
    if (authorization !== undefined) {
      if (authorization === `Bearer ${RATE_LIMITED_TOKEN}`) {
        return json(
          res,
          403,
          { message: "API rate limit exceeded for user ID 1.", documentation_url: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api" },
          { "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000", "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 1800) }
        )
      }
      if (authorization !== `Bearer ${GOOD_TOKEN}`) return badCredentials(res)
      user = "octo-e2e"
    }
    if (method === "GET" && path === "/user") {
      if (user === null) return json(res, 401, { message: "Requires authentication", documentation_url: "https://docs.github.com/rest" })
      return json(res, 200, { login: user, id: 1, type: "User", site_admin: false })
    }
    const repo = /^\/repos\/([^/]+)\/([^/]+)$/.exec(path)
    if (method === "GET" && repo !== null) {
      const fullName = `${repo[1]}/${repo[2]}`
      if (fullName === "acme/public") return json(res, 200, { id: 1, name: "public", full_name: fullName, private: false, visibility: "public" })
      // Private repositories are hidden (404) from callers who cannot read them.
      if (fullName === "acme/secret" && user !== null) return json(res, 200, { id: 2, name: "secret", full_name: fullName, private: true, visibility: "private" })
      if (fullName === "acme/flaky") return json(res, 502, { message: "Server Error" })
      if (fullName === "acme/slow") return void setTimeout(() => json(res, 200, { id: 3, full_name: fullName, private: false }), SLOW_ANSWER_MS)
      return notFound(res)
    }
    return notFound(res)
  }
  const server: Server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    revoked,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

// ---------------------------------------------------------------------------------------------
// The system
// ---------------------------------------------------------------------------------------------

let scion: Scion
let github: Awaited<ReturnType<typeof startFakeGithub>>
let orgId: string
let ownerToken: string
let memberToken: string
let viewerToken: string
let strangerToken: string

beforeAll(async () => {
  github = await startFakeGithub()
  // Every unit gets these; only the connector reads them. Debug logs, so a leak would show.
  scion = await startScion({ env: { CODE_HOST_API_URL: github.url, CODE_HOST_TIMEOUT: "1 second", LOG_LEVEL: "Debug" } })
  const owner = await signUp(scion, "owner")
  ownerToken = owner.token
  orgId = (await createOrg(scion, ownerToken, "Code Host Org")).org_id
  memberToken = (await addMember(scion, ownerToken, orgId, "member")).token
  viewerToken = (await addMember(scion, ownerToken, orgId, "viewer")).token
  const stranger = await signUp(scion, "stranger")
  strangerToken = stranger.token
  await createOrg(scion, strangerToken, "Stranger Org")
}, 180_000)
afterAll(async () => {
  await scion?.stop()
  await github?.close().catch(() => {})
})

const validateRepo = (body: Record<string, unknown>, token = memberToken) =>
  scion.request("POST", "/v1/connectors/validate-code-host-repo", { token, body: { org_id: orgId, ...body } })
const validateAuth = (body: Record<string, unknown>, token = memberToken) =>
  scion.request("POST", "/v1/connectors/validate-code-host-auth", { token, body: { org_id: orgId, ...body } })
const lastSeen = (path: string) => [...github.seen].reverse().find((s) => s.path === path)
const oauth = (extra: Record<string, unknown> = {}) => ({ auth_type: "oauth", app_id: APP_ID, installation_id: INSTALLATION_ID, private_key: APP_PRIVATE_KEY, ...extra })

describe("POST /v1/connectors/validate-code-host-repo", () => {
  it("valid: a public repository, asked anonymously with GitHub's headers", async () => {
    const response = await validateRepo({ repo: "acme/public" })
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toEqual({ valid: true, status: "valid", message: expect.stringContaining("acme/public") })
    const seen = lastSeen("/repos/acme/public")!
    expect(seen.method).toBe("GET")
    expect(seen.headers.accept).toBe("application/vnd.github+json")
    expect(seen.headers["x-github-api-version"]).toBe("2022-11-28")
    expect(seen.headers.authorization).toBeUndefined()
  })

  it("private: a private repository reachable with the token (valid true)", async () => {
    const response = await validateRepo({ repo: "acme/secret", code_host_token: GOOD_TOKEN })
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toMatchObject({ valid: true, status: "private" })
    expect(lastSeen("/repos/acme/secret")!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`)
    expect(JSON.stringify(response.body)).not.toContain(GOOD_TOKEN)
  })

  it("invalid: 404 without a token says the repository may be private and asks for a token", async () => {
    const response = await validateRepo({ repo: "acme/secret", code_host_token: null })
    expect(response.body).toMatchObject({ valid: false, status: "invalid" })
    expect(response.body.message).toMatch(/not found or is private.*code_host_token/)
    // An empty token counts as none.
    expect((await validateRepo({ repo: "acme/secret", code_host_token: "" })).body).toMatchObject({ valid: false, status: "invalid" })
  })

  it("invalid: 404 with a token", async () => {
    const response = await validateRepo({ repo: "acme/missing", code_host_token: GOOD_TOKEN })
    expect(response.status).toBe(200)
    expect(response.body).toMatchObject({ valid: false, status: "invalid", message: expect.stringMatching(/not found, or the code_host_token cannot read it/) })
  })

  it("invalid: a token GitHub refuses (401), without repeating it", async () => {
    const response = await validateRepo({ repo: "acme/public", code_host_token: BAD_TOKEN })
    expect(response.body).toMatchObject({ valid: false, status: "invalid" })
    expect(response.body.message).toMatch(/refused the code_host_token \(401: Bad credentials\)/)
    expect(response.body.message).not.toContain(BAD_TOKEN)
  })

  it("error: a rate-limited token (403 with x-ratelimit-remaining 0)", async () => {
    const response = await validateRepo({ repo: "acme/public", code_host_token: RATE_LIMITED_TOKEN })
    expect(response.body).toMatchObject({ valid: false, status: "error", message: expect.stringMatching(/rate limit/) })
  })

  it("error: GitHub failing (502) or not answering in CODE_HOST_TIMEOUT", async () => {
    expect((await validateRepo({ repo: "acme/flaky" })).body).toMatchObject({ valid: false, status: "error", message: expect.stringContaining("502") })
    const started = Date.now()
    const slow = await validateRepo({ repo: "acme/slow" })
    // The configured timeout (CODE_HOST_TIMEOUT, 1 second) ended the call, not GitHub's late answer.
    expect(slow.body).toMatchObject({ valid: false, status: "error", message: expect.stringMatching(/did not answer within 1s/) })
    expect(Date.now() - started, "answered before the slow GitHub would have").toBeLessThan(SLOW_ANSWER_MS)
  })

  it("422 for a malformed or missing repo (nothing asked of GitHub)", async () => {
    const before = github.seen.length
    for (const repo of ["acme", "acme/a/b", "-acme/x", "acme/..", "acme/has space", `${"a".repeat(40)}/x`, "acme/"]) {
      const response = await validateRepo({ repo })
      expect(response.status, repo).toBe(422)
      expect(response.body.detail[0], repo).toMatchObject({ loc: ["body", "repo"], type: "string_pattern_mismatch", msg: expect.stringContaining("owner/name") })
    }
    const missing = await validateRepo({})
    expect(missing.status).toBe(422)
    expect(missing.body.detail).toEqual([expect.objectContaining({ loc: ["body", "repo"], type: "missing" })])
    const wrongType = await validateRepo({ repo: "acme/public", code_host_token: 42 })
    expect(wrongType.status).toBe(422)
    expect(wrongType.body.detail[0]).toMatchObject({ loc: ["body", "code_host_token"] })
    expect(github.seen.length).toBe(before)
  })

  it("is not shadowed by /v1/connectors/{connector_id}", async () => {
    const response = await validateRepo({ repo: "acme/public" })
    expect(response.status).toBe(200)
    expect(Object.keys(response.body).sort()).toEqual(["message", "status", "valid"])
    // GET is the connector read, not this endpoint.
    expect((await scion.request("GET", "/v1/connectors/validate-code-host-repo", { token: memberToken })).status).toBe(404)
  })
})

describe("POST /v1/connectors/validate-code-host-auth", () => {
  it("pat valid: the token's login", async () => {
    const response = await validateAuth({ auth_type: "pat", access_token: GOOD_TOKEN })
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toEqual({ valid: true, status: "valid", message: expect.stringContaining("octo-e2e"), username: "octo-e2e" })
    expect(lastSeen("/user")!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`)
  })

  it("pat invalid (401) and error (rate limited)", async () => {
    const bad = await validateAuth({ auth_type: "pat", access_token: BAD_TOKEN })
    expect(bad.body).toEqual({ valid: false, status: "invalid", message: expect.stringMatching(/refused the access_token \(401/), username: null })
    expect(bad.body.message).not.toContain(BAD_TOKEN)
    const limited = await validateAuth({ auth_type: "pat", access_token: RATE_LIMITED_TOKEN })
    expect(limited.body).toMatchObject({ valid: false, status: "error", username: null, message: expect.stringMatching(/rate limit/) })
  })

  it("oauth valid: a real RS256 app JWT, the installation token minted and revoked, username the app's slug", async () => {
    const before = github.revoked.length
    const response = await validateAuth(oauth())
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toEqual({ valid: true, status: "valid", message: expect.stringContaining(APP_SLUG), username: APP_SLUG })
    const app = lastSeen("/app")!
    expect(app.jwtClaims).toMatchObject({ iss: APP_ID })
    const claims = app.jwtClaims as { iat: number; exp: number }
    const now = Math.floor(Date.now() / 1000)
    expect(claims.exp - claims.iat).toBe(600)
    expect(Math.abs(claims.iat - (now - 60))).toBeLessThanOrEqual(5)
    expect(lastSeen(`/app/installations/${INSTALLATION_ID}/access_tokens`)!.method).toBe("POST")
    expect(github.revoked.length).toBe(before + 1)
    expect(JSON.stringify(response.body)).not.toContain(INSTALLATION_TOKEN)
    // The ids may come as strings of digits.
    expect((await validateAuth(oauth({ app_id: String(APP_ID), installation_id: String(INSTALLATION_ID) }))).body).toMatchObject({ valid: true, username: APP_SLUG })
  })

  it("oauth invalid: an unparsable or non-RSA key (GitHub not asked), another app's key, another app id", async () => {
    const before = github.seen.length
    const garbage = await validateAuth(oauth({ private_key: "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----" }))
    expect(garbage.status).toBe(200)
    expect(garbage.body).toEqual({ valid: false, status: "invalid", message: expect.stringMatching(/private_key is not usable/), username: null })
    const ec = await validateAuth(oauth({ private_key: EC_PRIVATE_KEY }))
    expect(ec.body).toMatchObject({ valid: false, status: "invalid", message: expect.stringMatching(/RSA/) })
    expect(github.seen.length).toBe(before)

    const otherKey = await validateAuth(oauth({ private_key: OTHER_PRIVATE_KEY }))
    expect(otherKey.body).toMatchObject({ valid: false, status: "invalid", username: null, message: expect.stringMatching(/refused the app JWT \(401/) })
    const otherApp = await validateAuth(oauth({ app_id: APP_ID + 1 }))
    expect(otherApp.body).toMatchObject({ valid: false, status: "invalid", message: expect.stringMatching(/app_id and private_key/) })
  })

  it("oauth invalid: an unknown installation (404)", async () => {
    const response = await validateAuth(oauth({ installation_id: 12345 }))
    expect(response.body).toMatchObject({ valid: false, status: "invalid", username: null, message: expect.stringMatching(/Installation 12345 .* not found/) })
  })

  it("422 for a missing or unknown auth_type and for the fields the auth_type needs", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ access_token: GOOD_TOKEN }, "auth_type"],
      [{ auth_type: "basic", access_token: GOOD_TOKEN }, "auth_type"],
      [{ auth_type: "pat" }, "access_token"],
      [{ auth_type: "pat", access_token: "" }, "access_token"],
      [{ auth_type: "oauth", app_id: APP_ID, installation_id: INSTALLATION_ID }, "private_key"],
      [{ auth_type: "oauth", private_key: APP_PRIVATE_KEY, installation_id: INSTALLATION_ID }, "app_id"],
      [{ auth_type: "oauth", app_id: APP_ID, installation_id: "abc", private_key: APP_PRIVATE_KEY }, "installation_id"]
    ]
    for (const [body, field] of cases) {
      const response = await validateAuth(body)
      expect(response.status, JSON.stringify(body)).toBe(422)
      expect(Array.isArray(response.body.detail)).toBe(true)
      expect(response.body.detail.map((d: { loc: Array<string> }) => d.loc.join(".")), JSON.stringify(response.body)).toContain(`body.${field}`)
      for (const issue of response.body.detail) expect(Object.keys(issue)).toEqual(expect.arrayContaining(["loc", "msg", "type"]))
      expect(JSON.stringify(response.body)).not.toContain(KEY_MARKER)
    }
  })
})

describe("who may validate", () => {
  it("401 without a token; 403 for a viewer and for a non-member naming the org", async () => {
    expect((await scion.request("POST", "/v1/connectors/validate-code-host-repo", { body: { repo: "acme/public" } })).status).toBe(401)
    for (const token of [viewerToken, strangerToken]) {
      const repo = await validateRepo({ repo: "acme/public" }, token)
      expect(repo.status, scion.explain(repo)).toBe(403)
      expect(typeof repo.body.detail).toBe("string")
      const auth = await validateAuth({ auth_type: "pat", access_token: GOOD_TOKEN }, token)
      expect(auth.status).toBe(403)
    }
  })

  it("works with exactly the interface's bodies for a session and an API key (an API key acts in its own org)", async () => {
    // The interface's body has no org_id: a dashboard session gets the answer with it as given.
    const bySession = await scion.request("POST", "/v1/connectors/validate-code-host-repo", { token: ownerToken, body: { repo: "acme/public" } })
    expect(bySession.status, scion.explain(bySession)).toBe(200)
    expect(bySession.body).toMatchObject({ valid: true, status: "valid" })
    const authBySession = await scion.request("POST", "/v1/connectors/validate-code-host-auth", { token: ownerToken, body: { auth_type: "pat", access_token: GOOD_TOKEN } })
    expect(authBySession.status, scion.explain(authBySession)).toBe(200)
    expect(authBySession.body).toMatchObject({ valid: true, username: "octo-e2e" })
    const key = await createApiKey(scion, ownerToken, orgId)
    const byKey = await scion.request("POST", "/v1/connectors/validate-code-host-auth", { token: key.secret, body: { auth_type: "pat", access_token: GOOD_TOKEN } })
    expect(byKey.status, scion.explain(byKey)).toBe(200)
    expect(byKey.body).toMatchObject({ valid: true, username: "octo-e2e" })
    expect((await scion.request("POST", "/v1/connectors/validate-code-host-repo", { token: key.secret, body: { repo: "acme/public" } })).body).toMatchObject({ status: "valid" })
  })
})

describe("OpenAPI", () => {
  it("documents both endpoints with their request and response schemas", async () => {
    const spec = (await scion.request("GET", "/v1/openapi.json")).body
    const repo = spec.paths["/v1/connectors/validate-code-host-repo"]?.post
    const auth = spec.paths["/v1/connectors/validate-code-host-auth"]?.post
    expect(repo).toBeDefined()
    expect(auth).toBeDefined()
    for (const op of [repo, auth]) for (const status of ["200", "400", "401", "403", "422"]) expect(op.responses[status], status).toBeDefined()
    expect(Object.keys(spec.components.schemas)).toEqual(
      expect.arrayContaining(["ValidateCodeHostRepoRequest", "CodeHostRepoValidation", "ValidateCodeHostPatRequest", "ValidateCodeHostOauthRequest", "CodeHostAuthValidation"])
    )
  })
})

describe("GitHub down, and the logs", () => {
  it("error when GitHub cannot be reached at all", async () => {
    await github.close()
    const repo = await validateRepo({ repo: "acme/public" })
    expect(repo.status).toBe(200)
    expect(repo.body).toMatchObject({ valid: false, status: "error", message: expect.stringMatching(/could not be reached at 127\.0\.0\.1:\d+ \(ECONNREFUSED\)/) })
    const auth = await validateAuth(oauth())
    expect(auth.body).toMatchObject({ valid: false, status: "error", username: null })
  })

  it("no token or key appears in any unit's log", async () => {
    const units = [scion.gateway, scion.connector, scion.identity, scion.billing, ...scion.operations]
    const logs = units.map((u) => u.output()).join("\n")
    // The logs are there (Debug): the validations were logged, without secrets.
    expect(scion.connector.output()).toContain("code host repository validated")
    for (const secret of [GOOD_TOKEN, BAD_TOKEN, RATE_LIMITED_TOKEN, INSTALLATION_TOKEN, KEY_MARKER, "BEGIN RSA PRIVATE KEY"]) expect(logs).not.toContain(secret)
  })
})
