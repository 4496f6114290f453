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
