import { randomUUID } from "node:crypto"
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Api } from "@scion/gateway/api"
import { Forbidden, NotFound, Unauthorized, ValidationError } from "@scion/gateway/httpErrors"
import { Effect, ParseResult } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

describe("OpenAPI description and docs", () => {
  it("serves OpenAPI 3.1 labelled 0.1.0 with every endpoint of the identity sections", async () => {
    const response = await scion.request("GET", "/v1/openapi.json")
    expect(response.status).toBe(200)
    const spec = response.body
    expect(spec.openapi).toMatch(/^3\.1/)
    expect(spec.info.version).toBe("0.1.0")
    const expected: Record<string, Array<string>> = {
      "/v1/auth/signup": ["post"],
      "/v1/auth/login": ["post"],
      "/v1/auth/logout": ["post"],
      "/v1/auth/verify-email": ["post"],
      "/v1/me": ["get", "patch", "delete"],
      "/v1/bootstrap": ["get"],
      "/v1/my-orgs": ["get"],
      "/v1/orgs": ["get", "post"],
      "/v1/orgs/{org_id}": ["get", "patch", "delete"],
      "/v1/orgs/{org_id}/members": ["get"],
      "/v1/orgs/{org_id}/members/{target_user_id}": ["patch", "delete"],
      "/v1/orgs/{org_id}/invite": ["post"],
      "/v1/orgs/{org_id}/invites": ["get"],
      "/v1/orgs/{org_id}/invites/{invite_id}": ["delete"],
      "/v1/invites/pending": ["get"],
      "/v1/invites/{invite_token}/accept": ["post"],
      "/v1/orgs/{org_id}/roles": ["get"],
      "/v1/orgs/{org_id}/api-keys": ["get", "post"],
      "/v1/orgs/{org_id}/api-keys/{api_key_id}": ["delete"],
      "/v1/operations/{operation_id}": ["get"]
    }
    for (const [path, methods] of Object.entries(expected)) {
      expect(spec.paths[path], path).toBeDefined()
      for (const method of methods) expect(spec.paths[path][method], `${method} ${path}`).toBeDefined()
    }
    // Malformed input is documented as the 422 validation shape.
    const signup = spec.paths["/v1/auth/signup"].post
    expect(signup.responses["422"]).toBeDefined()
    expect(JSON.stringify(signup.responses["422"])).toMatch(/ValidationError|detail/)
    // Operations: wait is an integer 0..10 in the query; 404 and 422 are documented.
    const operation = spec.paths["/v1/operations/{operation_id}"].get
    const wait = operation.parameters.find((p: { name: string }) => p.name === "wait")
    expect(wait).toMatchObject({ in: "query", required: false })
    expect(JSON.stringify(wait.schema)).toMatch(/"maximum":10/)
    expect(operation.responses["200"]).toBeDefined()
    expect(operation.responses["404"]).toBeDefined()
    expect(operation.responses["422"]).toBeDefined()
    const schema = spec.components.schemas.Operation
    expect(Object.keys(schema.properties).sort()).toEqual(
      ["id", "org_id", "type", "resource_id", "status", "stage", "stage_label", "progress", "result", "error", "setup_status", "created_at", "updated_at", "started_at", "completed_at"].sort()
    )
    expect(schema.required).not.toContain("setup_status")
  })

  it("serves a docs page", async () => {
    const response = await fetch(`${scion.baseUrl}/v1/docs`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/html")
    expect(await response.text()).toContain("openapi")
  })
})

describe("the API definition as its own client", () => {
  it("HttpApiClient.make(Api) signs up, makes and reads an org, and decodes 401, 403, 404 and 422 as the definition's error classes", async () => {
    const client = (token?: string) =>
      HttpApiClient.make(Api, {
        baseUrl: scion.baseUrl,
        transformClient: HttpClient.mapRequest((request) => (token === undefined ? request : HttpClientRequest.bearerToken(request, token)))
      })
    const outcome = await Effect.runPromise(
      Effect.gen(function* () {
        const anonymous = yield* client()
        const grant = yield* anonymous.auth.signUp({ payload: { email: `client-${randomUUID()}@example.com`, password: "a long enough password", full_name: "Client" } })
        const api = yield* client(grant.session_token)
        const org = yield* api.orgs.create({ payload: { name: "Typed client org" } })
        const read = yield* api.orgs.get({ path: { org_id: org.org_id } })
        const foreign = yield* Effect.flip(api.orgs.get({ path: { org_id: "org_missing" } }))
        const missing = yield* Effect.flip(api.operations.get({ path: { operation_id: "op_missing" }, urlParams: {} }))
        const refused = yield* Effect.flip((yield* client("not-a-token")).orgs.list())
        // The client encodes with the same schemas: an empty name never leaves it.
        const refusedLocally = yield* Effect.flip(api.orgs.create({ payload: { name: "" } }))
        // A control character passes the schema and is the edge's 422.
        const invalid = yield* Effect.flip(api.orgs.create({ payload: { name: "bad\u0001name" } }))
        const orgs = yield* api.orgs.list()
        return { grant, org, read, foreign, missing, refused, refusedLocally, invalid, orgs }
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )
    expect(outcome.grant.user.full_name).toBe("Client")
    expect(outcome.read).toEqual(outcome.org)
    // Not a member: 403, as the interface says for orgs; an unknown operation: 404.
    expect(outcome.foreign).toBeInstanceOf(Forbidden)
    expect(outcome.missing).toBeInstanceOf(NotFound)
    expect(outcome.refused).toBeInstanceOf(Unauthorized)
    expect(ParseResult.isParseError(outcome.refusedLocally)).toBe(true)
    expect(outcome.invalid).toBeInstanceOf(ValidationError)
    expect((outcome.invalid as ValidationError).detail[0]?.loc).toEqual(["body", "name"])
    // Neither refused create made an org.
    expect(outcome.orgs.map((o) => o.name)).toEqual(["Typed client org"])
  })
})
