/**
 * The gateway's edge against the real system (every unit its own process): routing, OpenAPI,
 * docs, 401 without a usable token, 422 for malformed requests, request ids — what happens before
 * a request reaches a unit's logic; and, many cases at once, which part each 422's `loc` names on
 * authenticated endpoints, through the route table the edge validates with.
 */
import { request as httpRequest } from "node:http"
import { connect } from "node:net"
import { it } from "@effect/vitest"
import { Api } from "@scion/gateway/api"
import { jsonBodyOf, matchRoute, readsBody, requestIssues, routesOf } from "@scion/gateway/validation"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect } from "vitest"
import { startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

interface Reply {
  readonly status: number
  readonly body: any
  readonly contentType: string | null
  readonly requestId: string | null
}

const call = (method: string, path: string, init: { token?: string; json?: unknown; raw?: string; headers?: Record<string, string> } = {}) =>
  Effect.gen(function* () {
    const base = scion.baseUrl
    return yield* Effect.promise(async (): Promise<Reply> => {
      const headers: Record<string, string> = { ...init.headers }
      if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`
      if (init.json !== undefined || init.raw !== undefined) headers["content-type"] ??= "application/json"
      const body = init.raw ?? (init.json === undefined ? undefined : JSON.stringify(init.json))
      const response = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body }) })
      const text = await response.text()
      const contentType = response.headers.get("content-type")
      // JSON where the gateway says so (the engines' CA certificate, a public endpoint, is PEM).
      const parsed = text === "" ? null : contentType?.includes("json") === true ? JSON.parse(text) : text
      return { status: response.status, body: parsed, contentType, requestId: response.headers.get("x-request-id") }
    })
  })

const getText = (path: string) =>
  Effect.gen(function* () {
    const base = scion.baseUrl
    return yield* Effect.promise(async () => {
      const response = await fetch(`${base}${path}`)
      return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() }
    })
  })

const endpoints: ReadonlyArray<readonly [string, string]> = [
  ["post", "/v1/auth/signup"],
  ["post", "/v1/auth/login"],
  ["post", "/v1/auth/logout"],
  ["post", "/v1/auth/verify-email"],
  ["get", "/v1/me"],
  ["patch", "/v1/me"],
  ["delete", "/v1/me"],
  ["get", "/v1/bootstrap"],
  ["get", "/v1/my-orgs"],
  ["get", "/v1/orgs"],
  ["post", "/v1/orgs"],
  ["get", "/v1/orgs/{org_id}"],
  ["patch", "/v1/orgs/{org_id}"],
  ["delete", "/v1/orgs/{org_id}"],
  ["get", "/v1/orgs/{org_id}/members"],
  ["patch", "/v1/orgs/{org_id}/members/{target_user_id}"],
  ["delete", "/v1/orgs/{org_id}/members/{target_user_id}"],
  ["post", "/v1/orgs/{org_id}/invite"],
  ["get", "/v1/orgs/{org_id}/invites"],
  ["delete", "/v1/orgs/{org_id}/invites/{invite_id}"],
  ["get", "/v1/invites/pending"],
  ["post", "/v1/invites/{invite_token}/accept"],
  ["get", "/v1/orgs/{org_id}/roles"],
  ["get", "/v1/orgs/{org_id}/api-keys"],
  ["post", "/v1/orgs/{org_id}/api-keys"],
  ["delete", "/v1/orgs/{org_id}/api-keys/{api_key_id}"],
  ["get", "/v1/operations/{operation_id}"],
  ["get", "/v1/billing/plans"],
  ["post", "/v1/orgs/{org_id}/billing/subscriptions"],
  ["get", "/v1/orgs/{org_id}/billing/subscription"],
  ["delete", "/v1/orgs/{org_id}/billing/subscription"],
  ["post", "/v1/orgs/{org_id}/billing/subscriptions:update"],
  ["post", "/v1/projects"],
  ["get", "/v1/projects"],
  ["get", "/v1/projects/{project_id}"],
  ["patch", "/v1/projects/{project_id}"],
  ["delete", "/v1/projects/{project_id}"],
  ["get", "/v1/environments"],
  ["post", "/v1/environments"],
  ["post", "/v1/environments/aws-setup-link"],
  ["patch", "/v1/environments/aws-account-connections/{aws_account_connection_id}"],
  ["post", "/v1/environments/{environment_id}/db-provider-api-key"],
  ["post", "/v1/connectors/preflight"],
  ["post", "/v1/connectors"],
  ["get", "/v1/connectors"],
  ["get", "/v1/connectors/{connector_id}"],
  ["put", "/v1/connectors/{connector_id}"],
  ["get", "/v1/connectors/{connector_id}/connection-details"],
  ["post", "/v1/connectors/{connector_id}/discover"],
  ["post", "/v1/connectors/{connector_id}/selection"],
  ["put", "/v1/connectors/{connector_id}/replica-identity-decisions"],
  ["post", "/v1/connectors/{connector_id}/grant-script"],
  ["delete", "/v1/connectors/{connector_id}"],
  ["post", "/v1/connectors/{connector_id}/deletion-lock"],
  ["delete", "/v1/connectors/{connector_id}/deletion-lock"],
  ["post", "/v1/connectors/validate-code-host-repo"],
  ["post", "/v1/connectors/validate-code-host-auth"],
  ["post", "/v1/connectors/{connector_id}/engine-setup"],
  ["post", "/v1/connectors/{connector_id}/index"],
  ["get", "/v1/connectors/{connector_id}/readiness-checks"],
  ["get", "/v1/connectors/{connector_id}/readiness-attempts"],
  ["get", "/v1/connectors/{connector_id}/schema-changes"],
  ["post", "/v1/connectors/{connector_id}/reset"],
  ["post", "/v1/connectors/{connector_id}/deep-reset"],
  ["post", "/v1/connectors/{connector_id}/replication-rollback"],
  ["get", "/v1/connectors/{connector_id}/quarantine"],
  ["post", "/v1/connectors/{connector_id}/quarantine/{quarantine_id}/release"],
  ["post", "/v1/branch/create"],
  ["get", "/v1/branches"],
  ["get", "/v1/branches/{branch_id}"],
  ["delete", "/v1/branches/{branch_id}"],
  ["patch", "/v1/branches/{branch_id}"],
  ["post", "/v1/branches/{branch_id}/reset"],
  ["get", "/v1/branches/{branch_id}/schema-diff"],
  ["get", "/v1/connectors/{connector_id}/masking-rules"],
  ["put", "/v1/connectors/{connector_id}/masking-rules"],
  ["get", "/v1/engines/ca-certificate"],
  ["post", "/v1/connectors/{connector_id}/snapshots"],
  ["get", "/v1/connectors/{connector_id}/snapshots"],
  ["get", "/v1/snapshots/{snapshot_id}"],
  ["delete", "/v1/snapshots/{snapshot_id}"]
]

const publicOps = new Set(["post /v1/auth/signup", "post /v1/auth/login", "post /v1/auth/verify-email", "get /v1/billing/plans", "get /v1/engines/ca-certificate"])

describe("gateway edge", () => {
  it.effect("serves an OpenAPI 3.1 description labelled Scion 0.1.0 with every endpoint", () =>
    Effect.gen(function* () {
      const { status, body: spec } = yield* call("GET", "/v1/openapi.json")
      expect(status).toBe(200)
      expect(spec.openapi).toMatch(/^3\.1\./)
      expect(spec.info).toMatchObject({ title: "Scion", version: "0.1.0" })
      const listed = Object.entries(spec.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`))
      expect(listed.sort()).toEqual(endpoints.map(([m, p]) => `${m} ${p}`).sort())
      for (const [method, path] of endpoints) {
        const op = spec.paths[path][method]
        expect(op.security.length === 0, `${method} ${path} security`).toBe(publicOps.has(`${method} ${path}`))
        expect(op.responses["500"].content["application/json"].schema.$ref).toBe("#/components/schemas/ApiError")
      }
    })
  )

  it.effect("serves the OpenAPI description committed in test/e2e/openapi.snapshot.json: a change to the public surface shows up in review", () =>
    Effect.gen(function* () {
      const { status, body: spec } = yield* call("GET", "/v1/openapi.json")
      expect(status).toBe(200)
      // Update with `npx vitest run test/e2e/gateway-edge.test.ts -u` and review the diff.
      yield* Effect.promise(() => expect(`${JSON.stringify(spec, null, 2)}\n`).toMatchFileSnapshot("./openapi.snapshot.json"))
    })
  )

  it.effect("documents 422 as ValidationError, not HttpApi's 400 decode error", () =>
    Effect.gen(function* () {
      const { body: spec } = yield* call("GET", "/v1/openapi.json")
      const signup = spec.paths["/v1/auth/signup"].post
      expect(signup.responses["422"].content["application/json"].schema.$ref).toBe("#/components/schemas/ValidationError")
      expect(signup.responses["400"].content["application/json"].schema.$ref).toBe("#/components/schemas/ApiError")
      expect(spec.paths["/v1/bootstrap"].get.responses["422"]).toBeDefined()
      // Nothing to validate, nothing to document.
      expect(spec.paths["/v1/me"].get.responses["422"]).toBeUndefined()
      expect(spec.components.schemas.HttpApiDecodeError).toBeUndefined()
      expect(spec.components.schemas.ValidationError.properties.detail.items.$ref).toBe("#/components/schemas/ValidationIssue")
      expect(spec.components.schemas.ValidationIssue.required).toEqual(["loc", "msg", "type"])
      expect(spec.components.schemas.ApiError.properties).toEqual({ detail: expect.objectContaining({ type: "string" }) })
    })
  )

  it.effect("documents success statuses, the extensions and the bootstrap header", () =>
    Effect.gen(function* () {
      const { body: spec } = yield* call("GET", "/v1/openapi.json")
      expect(Object.keys(spec.paths["/v1/auth/signup"].post.responses)).toContain("201")
      expect(spec.paths["/v1/orgs"].post.responses["201"].content["application/json"].schema.$ref).toBe("#/components/schemas/OrgDetails")
      expect(spec.paths["/v1/orgs/{org_id}/api-keys"].post.responses["201"].content["application/json"].schema.$ref).toBe("#/components/schemas/CreatedApiKey")
      expect(spec.paths["/v1/orgs/{org_id}"].delete.responses["204"]).toBeDefined()
      for (const path of ["/v1/auth/signup", "/v1/auth/login", "/v1/auth/logout", "/v1/auth/verify-email"]) {
        expect(spec.paths[path].post["x-scion-extension"], path).toBe(true)
      }
      expect(spec.paths["/v1/me"].get["x-scion-extension"]).toBeUndefined()
      expect(spec.paths["/v1/bootstrap"].get.parameters).toEqual([expect.objectContaining({ name: "x-org-id", in: "header", required: true })])
      expect(spec.components.schemas.ApiKey.properties.secret).toBeUndefined()
      expect(spec.components.schemas.CreatedApiKey.required).toContain("secret")
    })
  )

  it.effect("serves the docs page, /healthz, and 404 {detail} for unknown routes", () =>
    Effect.gen(function* () {
      const docs = yield* getText("/v1/docs")
      expect(docs.status).toBe(200)
      expect(docs.contentType).toContain("text/html")
      expect(yield* call("GET", "/healthz")).toMatchObject({ status: 200, body: { status: "ok" } })
      for (const [method, path] of [["GET", "/v1/does-not-exist"], ["GET", "/"], ["PUT", "/v1/me"], ["GET", "/v1/orgs/a/b/c"]] as const) {
        expect(yield* call(method, path), `${method} ${path}`).toMatchObject({ status: 404, body: { detail: "Not Found" }, contentType: "application/json" })
      }
    })
  )

  it.effect("answers 401 {detail} without or with a malformed bearer token", () =>
    Effect.gen(function* () {
      const protectedOps = endpoints.filter(([m, p]) => !publicOps.has(`${m} ${p}`))
      for (const [method, template] of protectedOps) {
        const path = template.replace(/\{[a-z_]+\}/g, "x1")
        const response = yield* call(method.toUpperCase(), path, { headers: { "x-org-id": "org_1" } })
        expect(response.status, `${method} ${path}`).toBe(401)
        expect(typeof response.body.detail).toBe("string")
      }
      for (const authorization of ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Token abc", "Bearer a b"]) {
        expect((yield* call("GET", "/v1/me", { headers: { authorization } })).status, authorization).toBe(401)
      }
      // Authentication comes before validation: a bad body without a token is still 401.
      expect((yield* call("PATCH", "/v1/me", { json: { full_name: 7 } })).status).toBe(401)
    })
  )

  it.effect("answers malformed sign-up bodies with 422 and loc ['body', field]", () =>
    Effect.gen(function* () {
      const valid = { email: "ada@example.com", password: "correct-horse-battery", full_name: "Ada" }
      const cases: Array<[Record<string, unknown>, string, string]> = [
        [{ password: valid.password, full_name: "X" }, "email", "missing"],
        [{ ...valid, email: "not-an-email" }, "email", "value_error"],
        [{ ...valid, email: "a@b@c" }, "email", "value_error"],
        [{ ...valid, email: 42 }, "email", "string_type"],
        [{ ...valid, email: `${"a".repeat(250)}@x.io` }, "email", "string_too_long"],
        [{ ...valid, password: "tiny" }, "password", "string_too_short"],
        [{ ...valid, password: "p".repeat(129) }, "password", "string_too_long"],
        [{ ...valid, full_name: "" }, "full_name", "string_too_short"],
        [{ ...valid, full_name: "   " }, "full_name", "string_too_short"],
        [{ ...valid, full_name: "x".repeat(101) }, "full_name", "string_too_long"],
        [{ ...valid, full_name: null }, "full_name", "string_type"]
      ]
      for (const [body, field, type] of cases) {
        const response = yield* call("POST", "/v1/auth/signup", { json: body })
        expect(response.status, JSON.stringify(body)).toBe(422)
        expect(response.body.detail, JSON.stringify(body)).toEqual([expect.objectContaining({ loc: ["body", field], type, msg: expect.any(String) })])
      }
      const tooShort = yield* call("POST", "/v1/auth/signup", { json: { ...valid, password: "tiny" } })
      expect(tooShort.body.detail[0].ctx).toEqual({ min_length: 8 })
      // The input is never echoed back: it may be a password.
      expect(JSON.stringify(tooShort.body)).not.toContain("tiny")
    })
  )

  it.effect("reports every problem of a body at once, in field order", () =>
    Effect.gen(function* () {
      const response = yield* call("POST", "/v1/auth/signup", { json: { email: 1, extra: "ignored" } })
      expect(response.status).toBe(422)
      expect(response.body.detail.map((d: any) => [d.loc, d.type])).toEqual([
        [["body", "email"], "string_type"],
        [["body", "password"], "missing"],
        [["body", "full_name"], "missing"]
      ])
    })
  )

  it.effect("answers bodies that are not JSON objects with 422 on ['body']", () =>
    Effect.gen(function* () {
      const cases: Array<[{ raw?: string; json?: unknown; headers?: Record<string, string> }, string]> = [
        [{ raw: "{not json" }, "json_invalid"],
        [{ raw: "" }, "missing"],
        [{ json: [1, 2] }, "object_type"],
        [{ json: "text" }, "object_type"],
        [{ json: null }, "object_type"],
        [{ raw: "email=a@b.c", headers: { "content-type": "application/x-www-form-urlencoded" } }, "json_invalid"],
        [{ raw: "hello", headers: { "content-type": "text/plain" } }, "json_invalid"]
      ]
      for (const [init, type] of cases) {
        const response = yield* call("POST", "/v1/auth/login", init)
        expect(response.status, JSON.stringify(init)).toBe(422)
        expect(response.body.detail, JSON.stringify(init)).toEqual([expect.objectContaining({ loc: ["body"], type })])
      }
      // Nesting past MAX_BODY_DEPTH: a 422 before anything recurses through it (it was a stack
      // overflow and a 500, before authentication), arrays and objects alike; the limit itself is fine.
      for (const raw of ["[".repeat(5000) + "]".repeat(5000), '{"a":'.repeat(20000) + "1" + "}".repeat(20000)]) {
        const deep = yield* call("POST", "/v1/auth/login", { raw })
        expect(deep.status).toBe(422)
        expect(deep.body.detail).toEqual([{ loc: ["body"], msg: "JSON nested deeper than 32 levels", type: "json_invalid" }])
      }
      // Within the limit, the body goes on to the schema (here refused for its email, not its depth).
      const atLimit = yield* call("POST", "/v1/auth/login", { raw: `{"email":"not-an-email","password":"pw","x":${"[".repeat(30)}${"]".repeat(30)}}` })
      expect(atLimit.status).toBe(422)
      expect(atLimit.body.detail.map((issue: { loc: Array<string> }) => issue.loc)).not.toContainEqual(["body"])
      const verify = yield* call("POST", "/v1/auth/verify-email", { json: { token: "" } })
      expect(verify).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "token"], type: "string_too_short" }] } })
    })
  )

  it.effect("answers control characters in a path, a query or a body string with 422 before anything reads them", () =>
    Effect.gen(function* () {
      // The query values that reached Postgres and answered 500/503 (issue 15), on three routes.
      for (const path of ["/v1/projects?org_id=%00", "/v1/connectors?org_id=%00", "/v1/environments?org_id=org_%01x"]) {
        const response = yield* call("GET", path, { token: "scion_sess_anything" })
        expect(response.status, path).toBe(422)
        expect(response.body.detail).toEqual([{ loc: ["query", "org_id"], msg: "Must not contain control characters", type: "string_pattern_mismatch" }])
      }
      const path = yield* call("GET", "/v1/branches/br_%00abc", { token: "scion_sess_anything" })
      expect(path.status).toBe(422)
      expect(path.body.detail[0].loc).toEqual(["path", "branch_id"])
      const body = yield* call("POST", "/v1/auth/signup", { json: { email: "nul@example.com", password: "correct-horse-battery", full_name: "Nul\u0000Byte" } })
      expect(body.status).toBe(422)
      expect(body.body.detail).toEqual([{ loc: ["body", "full_name"], msg: "Must not contain control characters", type: "string_pattern_mismatch" }])
      // Nothing is echoed, and the gateway still answers.
      expect(JSON.stringify(body.body)).not.toContain("Nul")
      expect((yield* call("GET", "/healthz")).status).toBe(200)
    })
  )

  it.effect("answers every request with an x-request-id: the client's when it is a plain token, else a new one", () =>
    Effect.gen(function* () {
      const ids = new Set<string>()
      for (const [method, path] of [["GET", "/v1/nope"], ["GET", "/v1/me"], ["GET", "/v1/projects?org_id=%00"]] as const) {
        const reply = yield* call(method, path, { token: "scion_sess_x" })
        expect(reply.requestId, path).toMatch(/^req_[0-9A-Za-z]{26,}$/)
        ids.add(reply.requestId!)
      }
      expect(ids.size).toBe(3)
      expect((yield* call("GET", "/v1/nope", { headers: { "x-request-id": "ci-run-42.step:3" } })).requestId).toBe("ci-run-42.step:3")
      expect((yield* call("GET", "/v1/nope", { headers: { "x-request-id": "x".repeat(129) } })).requestId).toMatch(/^req_/)
    })
  )

  it.effect("matches every endpoint of the served OpenAPI description as HttpApi routes it: the edge's route and parameters, never HttpApi's 404", () =>
    Effect.gen(function* () {
      const document = yield* call("GET", "/v1/openapi.json")
      const routes = routesOf(Api)
      const operations = Object.entries<Record<string, unknown>>(document.body.paths).flatMap(([template, item]) =>
        Object.keys(item)
          .filter((method) => ["get", "post", "put", "patch", "delete"].includes(method))
          .map((method) => ({ method: method.toUpperCase(), template }))
      )
      // One route per documented operation, none undocumented.
      expect(routes.map((r) => `${r.method} ${r.template}`).sort()).toEqual(operations.map((o) => `${o.method} ${o.template}`).sort())
      for (const { method, template } of operations) {
        const names = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)
        // A value with a space and a colon: decoded once, like HttpApi decodes path parameters.
        const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(`${name} 1:x`))
        const matched = matchRoute(routes, method, path)
        expect(matched?.route.template, `${method} ${template}`).toBe(template)
        expect(matched?.params, `${method} ${template}`).toEqual(Object.fromEntries(names.map((name) => [name, `${name} 1:x`])))
        // HttpApi's own router knows the path too: unauthenticated, it answers anything but its 404.
        const reply = yield* call(method, path)
        expect(reply.status, `${method} ${template}`).not.toBe(404)
      }
      // And what neither knows stays 404 at both.
      expect(matchRoute(routes, "GET", "/v1/branches/b/unknown")).toBeUndefined()
      expect((yield* call("GET", "/v1/branches/b/unknown")).status).toBe(404)
    })
  )

  it.effect("refuses bodies over 1 MiB with 422", () =>
    Effect.gen(function* () {
      const response = yield* call("POST", "/v1/auth/login", { json: { email: "a@b.c", password: "x".repeat(2 * 1024 * 1024) } })
      expect(response.status).toBe(422)
      expect(response.body.detail[0].loc).toEqual(["body"])
    })
  )

  it("cuts a body that declares no length off at 1 MiB while it streams in: 422, and the gateway answers on", async () => {
    const url = new URL("/v1/auth/login", scion.baseUrl)
    const reply = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const request = httpRequest({ method: "POST", hostname: url.hostname, port: url.port, path: url.pathname, headers: { "content-type": "application/json", "transfer-encoding": "chunked" } }, (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk)).on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }))
      })
      request.on("error", reject)
      request.write(`{"email": "a@b.c", "password": "`)
      for (let i = 0; i < 32; i++) request.write("x".repeat(64 * 1024))
      request.end(`"}`)
    })
    expect(reply.status).toBe(422)
    expect(reply.body.detail).toEqual([expect.objectContaining({ loc: ["body"], type: "json_invalid" })])
    expect((await fetch(`${scion.baseUrl}/healthz`)).status).toBe(200)
  })

  it("answers a request-target that is no URL, and stays up", async () => {
    const url = new URL(scion.baseUrl)
    const statusLine = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => socket.write("GET //[ HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n"))
      let received = ""
      socket.on("data", (chunk: Buffer) => (received += chunk.toString()))
      socket.on("end", () => resolve(received.split("\r\n")[0] ?? ""))
      socket.on("error", reject)
    })
    expect(statusLine).toMatch(/^HTTP\/1\.1 (400|404)/)
    expect((await fetch(`${scion.baseUrl}/healthz`)).status).toBe(200)
  })

  it.effect("answers HEAD as GET without the body", () =>
    Effect.gen(function* () {
      const get = yield* Effect.promise(() => fetch(`${scion.baseUrl}/v1/billing/plans`))
      const getBody = yield* Effect.promise(() => get.text())
      const head = yield* Effect.promise(() => fetch(`${scion.baseUrl}/v1/billing/plans`, { method: "HEAD" }))
      expect(head.status).toBe(get.status)
      expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"))
      expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(getBody)))
      expect(yield* Effect.promise(() => head.text())).toBe("")
      expect(head.headers.get("x-request-id")).toMatch(/^req_/)
      // Behind authentication, the same refusal as GET.
      expect((yield* Effect.promise(() => fetch(`${scion.baseUrl}/v1/me`, { method: "HEAD" }))).status).toBe(401)
    })
  )
})

// Behind authentication the same validation runs; these check which part each loc names through
// the route table, for many cases at once.
describe("validation of authenticated endpoints", () => {
  const routes = routesOf(Api)
  // The request's parts as the edge server hands them over: headers by lower-case name, the body as read.
  const validate = (method: string, path: string, init: { readonly body?: string; readonly headers?: Record<string, string> } = {}) => {
    const url = new URL(path, "http://gateway")
    const matched = matchRoute(routes, method, url.pathname)
    if (matched === undefined) throw new Error(`no route for ${method} ${path}`)
    const headers = Object.fromEntries(Object.entries(init.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]))
    return requestIssues(matched, { headers, url, body: readsBody(matched.route) ? jsonBodyOf(init.body ?? "") : undefined })
  }
  const json = (body: unknown) => ({ body: JSON.stringify(body), headers: { "content-type": "application/json" } })

  it("names the header for a missing X-Org-Id", async () => {
    expect(await validate("GET", "/v1/bootstrap")).toEqual([{ loc: ["header", "x-org-id"], msg: "Field required", type: "missing" }])
    expect(await validate("GET", "/v1/bootstrap", { headers: { "x-org-id": "org_1" } })).toEqual([])
  })

  it("names path parameters", async () => {
    expect(await validate("POST", `/v1/invites/${"t".repeat(201)}/accept`)).toEqual([
      expect.objectContaining({ loc: ["path", "invite_token"], type: "string_too_long", ctx: { max_length: 200 } })
    ])
    expect(await validate("DELETE", "/v1/orgs/org_1/api-keys/key_1")).toEqual([])
  })

  it("checks the operations wait: an integer 0..10 in the query", async () => {
    for (const wait of ["0", "7", "10"]) expect(await validate("GET", `/v1/operations/op_1?wait=${wait}`)).toEqual([])
    expect(await validate("GET", "/v1/operations/op_1")).toEqual([])
    for (const wait of ["11", "-1", "abc", "1.5", ""]) {
      const issues = await validate("GET", `/v1/operations/op_1?wait=${wait}`)
      expect(issues, wait).toHaveLength(1)
      expect(issues[0]?.loc, wait).toEqual(["query", "wait"])
    }
  })

  it("checks org names after trimming, and role keys as plain strings", async () => {
    expect(await validate("PATCH", "/v1/orgs/org_1", json({ name: "   " }))).toEqual([expect.objectContaining({ loc: ["body", "name"], type: "string_too_short" })])
    expect(await validate("PATCH", "/v1/orgs/org_1", json({ name: ["x"] }))).toEqual([expect.objectContaining({ loc: ["body", "name"], type: "string_type" })])
    expect(await validate("PATCH", "/v1/orgs/org_1/members/usr_1", json({ role_key: "emperor" }))).toEqual([])
    expect(await validate("PATCH", "/v1/orgs/org_1/members/usr_1", json({}))).toEqual([{ loc: ["body", "role_key"], msg: "Field required", type: "missing" }])
  })

  it("checks API key bodies: scopes, expiration and mode", async () => {
    const path = "/v1/orgs/org_1/api-keys"
    expect(await validate("POST", path, json({ name: "ci", role_id: "role_org_admin" }))).toEqual([])
    expect(await validate("POST", path, json({ name: "ci", role_id: "role_org_admin", scopes: ["org.read"], expiration: "2030-01-31T00:00:00Z", mode: "test" }))).toEqual([])
    expect(await validate("POST", path, json({ name: "ci", role_id: "role_org_admin", expiration: null }))).toEqual([])
    const bad = await validate("POST", path, json({ name: "", role_id: 3, scopes: ["org.read", 5], expiration: "tomorrow", mode: "prod" }))
    expect(bad.map((d) => [d.loc, d.type])).toEqual([
      [["body", "name"], "string_too_short"],
      [["body", "role_id"], "string_type"],
      [["body", "scopes", "1"], "string_type"],
      [["body", "expiration"], "value_error"],
      [["body", "mode"], "literal_error"]
    ])
    const tooMany = await validate("POST", path, json({ name: "ci", role_id: "r", scopes: Array.from({ length: 65 }, (_, i) => `p${i}`) }))
    expect(tooMany).toEqual([expect.objectContaining({ loc: ["body", "scopes"], type: "too_long", ctx: { max_length: 64 } })])
  })
})
