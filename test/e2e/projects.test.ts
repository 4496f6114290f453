/**
 * Projects through the gateway, with identity, billing and the gateway as separate processes:
 * every rule and status of the interface's Projects section, cross-org visibility (404), the role
 * table, API keys with limited scopes, partial updates, the deletion event on NATS, the plan's
 * project limit (billing CheckEntitlement) and billing being unreachable (503).
 */
import { Bus, type Delivery, NatsBus } from "@scion/kit"
import { Deferred, Effect, Layer, Logger, LogLevel } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg, type RoleKey } from "../support/flows.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let orgId: string
let otherOrgId: string
const tokens = {} as Record<RoleKey, string>
let strangerToken: string

beforeAll(async () => {
  scion = await startScion()
  const owner = await signUp(scion, "owner")
  tokens.owner = owner.token
  orgId = (await createOrg(scion, owner.token, "Projects Org")).org_id
  for (const role of ["viewer", "member", "admin"] as const) tokens[role] = (await addMember(scion, owner.token, orgId, role)).token
  const stranger = await signUp(scion, "stranger")
  strangerToken = stranger.token
  otherOrgId = (await createOrg(scion, strangerToken, "Other Org")).org_id
  // The shared org holds many projects across these tests: the team plan has no project limit.
  // Billing sets a new org up from its creation event, so selecting a plan may take a moment.
  await waitFor("billing to set the org up", async () => {
    const selected = await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions`, { token: tokens.owner, body: { plan_id: "team" } })
    return selected.status === 200
  })
})
afterAll(async () => {
  await scion?.stop()
})

let counter = 0
const uniqueName = (label: string) => `${label} ${Date.now().toString(36)}${counter++}`

const create = (token: string, body: Record<string, unknown>) => scion.request("POST", "/v1/projects", { token, body })

describe("projects", () => {
  it("POST creates a project: 201 with the row, name trimmed, description null when absent", async () => {
    const response = await create(tokens.owner, { org_id: orgId, name: "  Storefront  " })
    expect(response.status, scion.explain(response)).toBe(201)
    expect(response.body).toEqual({
      project_id: expect.stringMatching(/^prj_/),
      org_id: orgId,
      name: "Storefront",
      description: null,
      created_by: expect.stringMatching(/^usr_/),
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/)
    })
    const withDescription = await create(tokens.owner, { org_id: orgId, name: uniqueName("Described"), description: "What it is" })
    expect(withDescription.status).toBe(201)
    expect(withDescription.body.description).toBe("What it is")
  })

  it("a duplicate name in the org is 409 (case-insensitive); another org may use it", async () => {
    const name = uniqueName("Dup")
    expect((await create(tokens.owner, { org_id: orgId, name })).status).toBe(201)
    const again = await create(tokens.owner, { org_id: orgId, name: name.toUpperCase() })
    expect(again.status).toBe(409)
    expect(typeof again.body.detail).toBe("string")
    expect(again.body.detail).toContain("already exists")
    expect((await create(strangerToken, { org_id: otherOrgId, name })).status).toBe(201)
  })

  it("validates the body with 422: missing, too long, control characters, wrong types, no body", async () => {
    const cases: ReadonlyArray<[unknown, ReadonlyArray<string>]> = [
      [{ org_id: orgId }, ["body", "name"]],
      [{ name: "x" }, ["body", "org_id"]],
      [{ org_id: orgId, name: "   " }, ["body", "name"]],
      [{ org_id: orgId, name: "x".repeat(101) }, ["body", "name"]],
      [{ org_id: orgId, name: "bell\u0007" }, ["body", "name"]],
      [{ org_id: orgId, name: 42 }, ["body", "name"]],
      [{ org_id: orgId, name: "ok", description: "d".repeat(1001) }, ["body", "description"]],
      [{ org_id: orgId, name: "ok", description: 7 }, ["body", "description"]]
    ]
    for (const [body, loc] of cases) {
      const response = await create(tokens.owner, body as Record<string, unknown>)
      expect(response.status, JSON.stringify(body)).toBe(422)
      expect(response.body.detail.map((d: { loc: Array<string> }) => d.loc)).toContainEqual(loc)
    }
    const noBody = await scion.request("POST", "/v1/projects", { token: tokens.owner })
    expect(noBody.status).toBe(422)
    // The limits themselves are allowed.
    expect((await create(tokens.owner, { org_id: orgId, name: "n".repeat(100), description: "line\n\tnext".padEnd(1000, ".") })).status).toBe(201)
  })

  it("without a token every endpoint is 401", async () => {
    expect((await scion.request("GET", `/v1/projects?org_id=${orgId}`)).status).toBe(401)
    expect((await scion.request("POST", "/v1/projects", { body: { org_id: orgId, name: "x" } })).status).toBe(401)
    expect((await scion.request("GET", "/v1/projects/prj_x")).status).toBe(401)
    expect((await scion.request("PATCH", "/v1/projects/prj_x", { body: { name: "x" } })).status).toBe(401)
    expect((await scion.request("DELETE", "/v1/projects/prj_x")).status).toBe(401)
    expect((await scion.request("GET", `/v1/projects?org_id=${orgId}`, { token: "sk-scion_live_nope" })).status).toBe(401)
  })

  it("GET lists the org's projects ({projects: [...]}, oldest first); org_id required (422); non-members 403", async () => {
    const listOrg = (await createOrg(scion, tokens.owner, uniqueName("List Org"))).org_id
    const first = await create(tokens.owner, { org_id: listOrg, name: "First" })
    const second = await create(tokens.owner, { org_id: listOrg, name: "Second" })
    const list = await scion.request("GET", `/v1/projects?org_id=${listOrg}`, { token: tokens.owner })
    expect(list.status).toBe(200)
    expect(list.body.projects.map((p: { project_id: string }) => p.project_id)).toEqual([first.body.project_id, second.body.project_id])
    expect(list.body.projects[0]).toEqual(first.body)

    const missing = await scion.request("GET", "/v1/projects", { token: tokens.owner })
    expect(missing.status).toBe(422)
    expect(missing.body.detail[0]).toMatchObject({ loc: ["query", "org_id"], type: "missing" })

    expect((await scion.request("GET", `/v1/projects?org_id=${listOrg}`, { token: strangerToken })).status).toBe(403)
    expect((await scion.request("GET", `/v1/projects?org_id=org_unknown`, { token: strangerToken })).status).toBe(403)
    // A NUL byte in the query answered 500/503 once (it reached Postgres): the edge refuses it.
    for (const path of ["/v1/projects?org_id=%00", "/v1/connectors?org_id=%00", "/v1/environments?org_id=%00"]) {
      const refused = await scion.request("GET", path, { token: tokens.owner })
      expect(refused.status, path).toBe(422)
      expect(refused.body.detail[0].loc).toEqual(["query", "org_id"])
    }
    expect((await scion.request("GET", `/v1/projects?org_id=${listOrg}`, { token: tokens.owner })).status).toBe(200)
    // An API key of another org is refused too.
    const otherKey = await createApiKey(scion, strangerToken, otherOrgId, { role_id: "role_org_owner" })
    expect((await scion.request("GET", `/v1/projects?org_id=${listOrg}`, { token: otherKey.secret })).status).toBe(403)
    // Every role of the org may list.
    for (const role of ["viewer", "member", "admin", "owner"] as const) {
      expect((await scion.request("GET", `/v1/projects?org_id=${orgId}`, { token: tokens[role] })).status, role).toBe(200)
    }
  })

  it("GET one: 200; unknown and other orgs' projects are 404 (sessions and API keys alike)", async () => {
    const project = (await create(tokens.owner, { org_id: orgId, name: uniqueName("Visible") })).body
    const got = await scion.request("GET", `/v1/projects/${project.project_id}`, { token: tokens.viewer })
    expect(got.status).toBe(200)
    expect(got.body).toEqual(project)
    expect((await scion.request("GET", "/v1/projects/prj_unknown", { token: tokens.owner })).status).toBe(404)
    const hidden = await scion.request("GET", `/v1/projects/${project.project_id}`, { token: strangerToken })
    expect(hidden.status).toBe(404)
    expect(hidden.body.detail).toContain("not found")
    const otherKey = await createApiKey(scion, strangerToken, otherOrgId, { role_id: "role_org_owner" })
    expect((await scion.request("GET", `/v1/projects/${project.project_id}`, { token: otherKey.secret })).status).toBe(404)
    expect((await scion.request("PATCH", `/v1/projects/${project.project_id}`, { token: otherKey.secret, body: { name: "x" } })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/projects/${project.project_id}`, { token: otherKey.secret })).status).toBe(404)
    expect((await scion.request("PATCH", `/v1/projects/${project.project_id}`, { token: strangerToken, body: { name: "x" } })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/projects/${project.project_id}`, { token: strangerToken })).status).toBe(404)
  })

  it("PATCH changes only the provided fields; 400 with no fields; 409 for a taken name; 422 for bad values", async () => {
    const taken = uniqueName("Taken")
    await create(tokens.owner, { org_id: orgId, name: taken })
    const project = (await create(tokens.owner, { org_id: orgId, name: uniqueName("Patch"), description: "original" })).body
    const path = `/v1/projects/${project.project_id}`

    const renamed = await scion.request("PATCH", path, { token: tokens.member, body: { name: "  Renamed Project  " } })
    expect(renamed.status).toBe(200)
    expect(renamed.body).toMatchObject({ project_id: project.project_id, name: "Renamed Project", description: "original", created_at: project.created_at })
    expect(Date.parse(renamed.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(project.updated_at))

    const described = await scion.request("PATCH", path, { token: tokens.member, body: { description: "changed" } })
    expect(described.status).toBe(200)
    expect(described.body).toMatchObject({ name: "Renamed Project", description: "changed" })

    const cleared = await scion.request("PATCH", path, { token: tokens.member, body: { description: "" } })
    expect(cleared.body).toMatchObject({ name: "Renamed Project", description: null })

    const empty = await scion.request("PATCH", path, { token: tokens.member, body: {} })
    expect(empty.status).toBe(400)
    expect(typeof empty.body.detail).toBe("string")
    expect(empty.body.detail).toContain("No fields")

    expect((await scion.request("PATCH", path, { token: tokens.member, body: { name: taken.toLowerCase() } })).status).toBe(409)
    expect((await scion.request("PATCH", path, { token: tokens.member, body: { name: "" } })).status).toBe(422)
    expect((await scion.request("PATCH", path, { token: tokens.member, body: { name: "x".repeat(101) } })).status).toBe(422)
    expect((await scion.request("PATCH", "/v1/projects/prj_unknown", { token: tokens.member, body: { name: "x" } })).status).toBe(404)

    const viewer = await scion.request("PATCH", path, { token: tokens.viewer, body: { name: "Viewer was here" } })
    expect(viewer.status).toBe(403)
    expect(viewer.body.detail).toContain("projects.update")
    expect((await scion.request("GET", path, { token: tokens.owner })).body.name).toBe("Renamed Project")
  })

  it("role by role: create needs projects.create (member+), delete needs projects.delete (admin+)", async () => {
    const expected: Record<RoleKey, { create: number; delete: number }> = {
      viewer: { create: 403, delete: 403 },
      member: { create: 201, delete: 403 },
      admin: { create: 201, delete: 200 },
      owner: { create: 201, delete: 200 }
    }
    for (const role of ["viewer", "member", "admin", "owner"] as const) {
      const created = await create(tokens[role], { org_id: orgId, name: uniqueName(`By ${role}`) })
      expect(created.status, role).toBe(expected[role].create)
      const target = (await create(tokens.owner, { org_id: orgId, name: uniqueName(`Delete by ${role}`) })).body
      const deleted = await scion.request("DELETE", `/v1/projects/${target.project_id}`, { token: tokens[role] })
      expect(deleted.status, role).toBe(expected[role].delete)
      if (deleted.status === 403) expect(deleted.body.detail).toContain("projects.delete")
    }
  })

  it("API keys act in their own org with their role and scopes", async () => {
    const viewerKey = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_viewer" })
    expect((await scion.request("GET", `/v1/projects?org_id=${orgId}`, { token: viewerKey.secret })).status).toBe(200)
    expect((await create(viewerKey.secret, { org_id: orgId, name: uniqueName("viewer key") })).status).toBe(403)

    const memberKey = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_member" })
    const byKey = await create(memberKey.secret, { org_id: orgId, name: uniqueName("member key") })
    expect(byKey.status).toBe(201)
    expect(byKey.body.created_by).toMatch(/^usr_/)
    expect((await scion.request("DELETE", `/v1/projects/${byKey.body.project_id}`, { token: memberKey.secret })).status).toBe(403)
    // A key naming another org is refused as a non-member.
    expect((await create(memberKey.secret, { org_id: otherOrgId, name: uniqueName("elsewhere") })).status).toBe(403)

    // Scoped to reading: lists and gets, but cannot create or update.
    const readOnly = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_member", scopes: ["projects.read"] })
    expect((await scion.request("GET", `/v1/projects/${byKey.body.project_id}`, { token: readOnly.secret })).status).toBe(200)
    expect((await create(readOnly.secret, { org_id: orgId, name: uniqueName("scoped") })).status).toBe(403)
    expect((await scion.request("PATCH", `/v1/projects/${byKey.body.project_id}`, { token: readOnly.secret, body: { name: "no" } })).status).toBe(403)

    // Scoped to creating only (no billing.read): the plan check is identity's own call, so it works.
    const createOnly = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_admin", scopes: ["projects.create", "projects.delete"] })
    const created = await create(createOnly.secret, { org_id: orgId, name: uniqueName("create only") })
    expect(created.status, scion.explain(created)).toBe(201)
    expect((await scion.request("GET", `/v1/projects/${created.body.project_id}`, { token: createOnly.secret })).status).toBe(403)
    expect((await scion.request("DELETE", `/v1/projects/${created.body.project_id}`, { token: createOnly.secret })).status).toBe(200)
  })

  it("DELETE answers 200 with a message, the project is gone, and events.project.deleted reaches NATS", async () => {
    const project = (await create(tokens.owner, { org_id: orgId, name: uniqueName("Doomed") })).body
    const program = Effect.gen(function* () {
      const bus = yield* Bus
      const seen = new Map<string, Delivery>()
      const arrived = yield* Deferred.make<void>()
      yield* bus.consume(
        {
          stream: "EVENTS",
          durable: `e2e_projects_${randomBytes(4).toString("hex")}`,
          filterSubjects: ["events.project.deleted"],
          deliverPolicy: "new",
          inactiveThreshold: "1 minute"
        },
        (delivery) =>
          Effect.gen(function* () {
            const id = (delivery.payload as { project_id?: string }).project_id ?? ""
            seen.set(id, delivery)
            if (id === project.project_id) yield* Deferred.succeed(arrived, undefined)
          })
      )
      const deleted = yield* Effect.promise(() => scion.request("DELETE", `/v1/projects/${project.project_id}`, { token: tokens.admin }))
      expect(deleted.status).toBe(200)
      expect(deleted.body).toEqual({ message: expect.stringContaining(project.project_id) })
      yield* Deferred.await(arrived).pipe(Effect.timeout("15 seconds"))
      const delivery = seen.get(project.project_id)!
      expect(delivery.subject).toBe("events.project.deleted")
      expect(delivery.msgId).toBe(`project.deleted.${project.project_id}`)
      expect(delivery.payload).toEqual({
        project_id: project.project_id,
        org_id: orgId,
        name: project.name,
        deleted_by_user_id: expect.stringMatching(/^usr_/),
        deleted_at: expect.stringMatching(/Z$/)
      })
    })
    await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(NatsBus.layer({ namespace: scion.busNamespace }).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning))))))
    expect((await scion.request("GET", `/v1/projects/${project.project_id}`, { token: tokens.owner })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/projects/${project.project_id}`, { token: tokens.owner })).status).toBe(404)
    // The name is free again.
    expect((await create(tokens.owner, { org_id: orgId, name: project.name })).status).toBe(201)
  })

  it("the free plan's project limit (10) refuses the next create with 403 naming the limit and the plan", async () => {
    const limited = (await createOrg(scion, tokens.owner, uniqueName("Limited"))).org_id
    for (let i = 0; i < 10; i++) expect((await create(tokens.owner, { org_id: limited, name: `p${i}` })).status).toBe(201)
    const refused = await create(tokens.owner, { org_id: limited, name: "one too many" })
    expect(refused.status).toBe(403)
    expect(refused.body.detail).toContain("free")
    expect(refused.body.detail).toContain("10")
    // Deleting one makes room again.
    const first = (await scion.request("GET", `/v1/projects?org_id=${limited}`, { token: tokens.owner })).body.projects[0]
    expect((await scion.request("DELETE", `/v1/projects/${first.project_id}`, { token: tokens.owner })).status).toBe(200)
    expect((await create(tokens.owner, { org_id: limited, name: "one too many" })).status).toBe(201)
  })

  // Last: stops the billing process.
  it("creates answer 503 while billing is unreachable; reads still work", async () => {
    await scion.billing.stop()
    const refused = await create(tokens.owner, { org_id: orgId, name: uniqueName("No billing") })
    expect(refused.status).toBe(503)
    expect(refused.body.detail).toContain("retry")
    expect((await scion.request("GET", `/v1/projects?org_id=${orgId}`, { token: tokens.owner })).status).toBe(200)
  })
})
