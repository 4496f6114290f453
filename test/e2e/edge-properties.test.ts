/**
 * Property-based requests over every route of the served OpenAPI description, against the whole
 * system (every unit its own process): generated path parameters, query values and bodies — ids
 * that cannot exist, control characters, unicode, huge and empty strings, wrong JSON types — sent
 * by a signed-in owner so they get past authentication. Whatever comes in, nothing answers 5xx,
 * errors keep the interface's shapes (422: detail [{loc, msg, type}]; else detail a string), no
 * body shows a stack or an internal name, and the system still answers afterwards.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createApiKey, createOrg } from "../support/flows.js"
import { type Scion, signUp, startScion } from "../support/system.js"

let scion: Scion
let owner: { token: string }
let orgId: string
let apiKey: string

beforeAll(async () => {
  scion = await startScion()
  owner = await signUp(scion, "fuzz-owner")
  orgId = (await createOrg(scion, owner.token, "Fuzzed")).org_id
  apiKey = (await createApiKey(scion, owner.token, orgId, { role_id: "role_org_admin" })).secret
}, 120_000)

afterAll(async () => {
  await scion?.stop()
})

interface Operation {
  readonly method: string
  readonly path: string
  readonly pathParams: ReadonlyArray<string>
  readonly queryParams: ReadonlyArray<string>
  readonly hasBody: boolean
  readonly bodyFields: ReadonlyArray<string>
}

/** Calls that would end the test's own session or account: the rest is fair game. */
const SPARED = new Set(["delete /v1/me", "post /v1/auth/logout"])

/** What a hostile or careless client sends as a string. */
const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom("", " ", "\u0000", "a\u0000b", "\u0007", "%00", "../../etc/passwd", "' or 1=1 --", "org_", "br_", "con_x", "😀", "\u202e", "null", "-1", "9".repeat(40)),
  fc.string({ minLength: 300, maxLength: 2000 }),
  fc.constant(`org_${"0".repeat(26)}`)
)

const jsonValue = fc.oneof(nastyString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(nastyString, { maxLength: 3 }), fc.dictionary(nastyString, nastyString, { maxKeys: 3 }))

const INTERNAL = /\bat [\w.<>]+ \(|node_modules|RpcError|SqlError|ConnectError|FiberFailure|\bstack\b|\.ts:\d+|\.js:\d+/

const operationsOf = (spec: { paths: Record<string, Record<string, any>> }): ReadonlyArray<Operation> =>
  Object.entries(spec.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
      .map(([method, op]) => {
        const parameters: ReadonlyArray<{ name: string; in: string }> = op.parameters ?? []
        const schema = op.requestBody?.content?.["application/json"]?.schema
        const resolved = schema?.$ref ? spec.paths && (spec as any).components?.schemas?.[schema.$ref.split("/").pop()] : schema
        return {
          method: method.toUpperCase(),
          path,
          pathParams: parameters.filter((p) => p.in === "path").map((p) => p.name),
          queryParams: parameters.filter((p) => p.in === "query").map((p) => p.name),
          hasBody: op.requestBody !== undefined,
          bodyFields: Object.keys(resolved?.properties ?? {})
        }
      })
  )

describe("every route under generated input", () => {
  it("answers without a 5xx, in the interface's error shapes, leaking nothing, and keeps answering", async () => {
    const spec = (await scion.request("GET", "/v1/openapi.json")).body
    const operations = operationsOf(spec).filter((op) => !SPARED.has(`${op.method.toLowerCase()} ${op.path}`))
    expect(operations.length).toBeGreaterThan(70)
    const failures: Array<string> = []
    for (const op of operations) {
      const request = fc.record({
        params: fc.tuple(...op.pathParams.map(() => nastyString)),
        query: fc.dictionary(fc.constantFrom(...(op.queryParams.length > 0 ? op.queryParams : ["x"]), "org_id", "wait"), nastyString, { maxKeys: 3 }),
        body: op.bodyFields.length > 0
          ? fc.oneof(fc.dictionary(fc.constantFrom(...op.bodyFields), jsonValue, { maxKeys: op.bodyFields.length }), jsonValue)
          : jsonValue,
        asKey: fc.boolean()
      })
      await fc.assert(
        fc.asyncProperty(request, async ({ params, query, body, asKey }) => {
          let path = op.path
          op.pathParams.forEach((name, i) => (path = path.replace(`{${name}}`, encodeURIComponent(params[i] as string))))
          const search = new URLSearchParams(Object.entries(query)).toString()
          const response = await scion.request(op.method, `${path}${search === "" ? "" : `?${search}`}`, {
            token: asKey ? apiKey : owner.token,
            ...(op.hasBody ? { rawBody: JSON.stringify(body) } : {})
          })
          const label = `${op.method} ${path}?${search} ${op.hasBody ? JSON.stringify(body).slice(0, 200) : ""} → ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`
          if (response.status >= 500) failures.push(label)
          if (response.status >= 400) {
            if (response.status === 422) {
              const shaped = Array.isArray(response.body?.detail) && response.body.detail.every((d: any) => Array.isArray(d.loc) && typeof d.msg === "string" && typeof d.type === "string")
              if (!shaped) failures.push(`422 shape: ${label}`)
            } else if (typeof response.body?.detail !== "string") failures.push(`error shape: ${label}`)
          }
          if (INTERNAL.test(JSON.stringify(response.body))) failures.push(`internal detail: ${label}`)
          return true
        }),
        { numRuns: 6, seed: 20261125 }
      )
    }
    // Beside the random cases, each hostile value in each place of each route, systematically.
    const hostile = ["\u0000", "a\u0000b", "\u001f", "x".repeat(5000), "../../x", "😀\u202e"]
    for (const op of operations) {
      const places = [
        ...op.pathParams.map((name) => ({ where: "path" as const, name })),
        ...op.queryParams.map((name) => ({ where: "query" as const, name })),
        ...op.bodyFields.map((name) => ({ where: "body" as const, name }))
      ]
      for (const place of places) {
        for (const value of hostile) {
          let path = op.path
          for (const name of op.pathParams) path = path.replace(`{${name}}`, encodeURIComponent(place.where === "path" && place.name === name ? value : "x1"))
          const search = place.where === "query" ? `?${new URLSearchParams({ [place.name]: value })}` : ""
          const body = place.where === "body" ? { [place.name]: value } : {}
          const response = await scion.request(op.method, `${path}${search}`, { token: owner.token, ...(op.hasBody ? { body } : {}) })
          if (response.status >= 500) failures.push(`${op.method} ${path}${search} ${JSON.stringify(body).slice(0, 80)} → ${response.status} ${JSON.stringify(response.body).slice(0, 200)}`)
        }
      }
    }
    expect(failures, failures.slice(0, 20).join("\n")).toEqual([])
    // Still answering, sessions and keys alike.
    expect((await scion.request("GET", "/v1/me", { token: owner.token })).status).toBe(200)
    expect((await scion.request("GET", `/v1/orgs/${orgId}`, { token: apiKey })).status).toBe(200)
    expect((await fetch(`${scion.baseUrl}/healthz`)).status).toBe(200)
  }, 600_000)
})
