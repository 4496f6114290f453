import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

const createOrg = async (token: string, name: string) => {
  const response = await scion.request("POST", "/v1/orgs", { token, body: { name } })
  expect(response.status).toBe(201)
  return response.body
}

const createKey = async (token: string, orgId: string, roleId = "role_org_admin") => {
  const response = await scion.request("POST", `/v1/orgs/${orgId}/api-keys`, { token, body: { name: "ci", role_id: roleId } })
  expect(response.status).toBe(201)
  return response.body
}

describe("organizations", () => {
  it("creates an org with the caller as owner and lists it", async () => {
    const { token } = await signUp(scion, "founder")
    const org = await createOrg(token, "  Acme  ")
    expect(org).toMatchObject({ name: "Acme", my_role: "owner", member_count: 1 })
    expect(org.org_id).toMatch(/^org_/)
    expect(org.my_permissions).toEqual(expect.arrayContaining(["org.read", "org.update", "org.delete", "billing.manage"]))
    const list = await scion.request("GET", "/v1/orgs", { token })
    expect(list.status).toBe(200)
    expect(list.body).toEqual([{ org_id: org.org_id, name: "Acme", role: "owner", joined_at: expect.any(String) }])
    const get = await scion.request("GET", `/v1/orgs/${org.org_id}`, { token })
    expect(get.status).toBe(200)
    expect(get.body).toEqual(org)
  })

  it("me, my-orgs and bootstrap reflect the memberships", async () => {
    const { token, userId } = await signUp(scion, "boot")
    const first = await createOrg(token, "First")
    await createOrg(token, "Second")
    const me = await scion.request("GET", "/v1/me", { token })
    expect(me.body).toMatchObject({ has_orgs: true, default_org_id: first.org_id, user: { user_id: userId } })
    const mine = await scion.request("GET", "/v1/my-orgs", { token })
    expect(mine.status).toBe(200)
    expect(mine.body.orgs.map((o: any) => o.name)).toEqual(["First", "Second"])
    const boot = await scion.request("GET", "/v1/bootstrap", { token, headers: { "x-org-id": first.org_id } })
    expect(boot.status).toBe(200)
    expect(boot.body.user.user_id).toBe(userId)
    expect(boot.body.orgs).toHaveLength(2)
    expect(boot.body.active_org).toMatchObject({ org_id: first.org_id, my_role: "owner", member_count: 1 })
  })

  it("bootstrap requires X-Org-Id (422) and membership (403)", async () => {
    const { token } = await signUp(scion, "boot2")
    const missing = await scion.request("GET", "/v1/bootstrap", { token })
    expect(missing.status).toBe(422)
    expect(missing.body.detail[0].loc).toEqual(["header", "x-org-id"])
    const other = await signUp(scion, "other")
    const foreign = await createOrg(other.token, "Foreign")
    expect((await scion.request("GET", "/v1/bootstrap", { token, headers: { "x-org-id": foreign.org_id } })).status).toBe(403)
  })

  it("PATCH /v1/me changes the full name; bad bodies are 422 and change nothing", async () => {
    const { token } = await signUp(scion, "rename")
    const ok = await scion.request("PATCH", "/v1/me", { token, body: { full_name: "New Name" } })
    expect(ok.status).toBe(200)
    expect(ok.body.full_name).toBe("New Name")
    for (const body of [{}, { full_name: "" }, { full_name: 7 }, { full_name: "y".repeat(101) }]) {
      expect((await scion.request("PATCH", "/v1/me", { token, body })).status).toBe(422)
    }
    expect((await scion.request("GET", "/v1/me", { token })).body.user.full_name).toBe("New Name")
  })

  it("a non-member gets 403 on an org, including one that does not exist", async () => {
    const owner = await signUp(scion, "own")
    const stranger = await signUp(scion, "stranger")
    const org = await createOrg(owner.token, "Private")
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: stranger.token })).status).toBe(403)
    expect((await scion.request("GET", `/v1/orgs/org_doesnotexist`, { token: stranger.token })).status).toBe(403)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token: stranger.token, body: { name: "Mine" } })).status).toBe(403)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}`, { token: stranger.token })).status).toBe(403)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: stranger.token })).status).toBe(403)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: owner.token })).body.name).toBe("Private")
  })

  it("renames an org; invalid names are 422 and change nothing", async () => {
    const { token } = await signUp(scion, "renamer")
    const org = await createOrg(token, "Old")
    const renamed = await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token, body: { name: "New" } })
    expect(renamed.status).toBe(200)
    expect(renamed.body).toMatchObject({ org_id: org.org_id, name: "New" })
    for (const body of [{}, { name: "" }, { name: "   " }, { name: 3 }, { name: "n".repeat(101) }]) {
      const bad = await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token, body })
      expect(bad.status, JSON.stringify(body)).toBe(422)
    }
    for (const body of [{}, { name: "" }, { name: ["x"] }]) {
      expect((await scion.request("POST", "/v1/orgs", { token, body })).status).toBe(422)
    }
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token })).body.name).toBe("New")
    expect((await scion.request("GET", "/v1/orgs", { token })).body).toHaveLength(1)
  })

  it("refuses to delete the caller's last org (400) and deletes another (204) with its keys and invites", async () => {
    const { token } = await signUp(scion, "deleter")
    const keep = await createOrg(token, "Keep")
    const last = await scion.request("DELETE", `/v1/orgs/${keep.org_id}`, { token })
    expect(last.status).toBe(400)
    expect(typeof last.body.detail).toBe("string")
    const doomed = await createOrg(token, "Doomed")
    const key = await createKey(token, doomed.org_id)
    const invite = await scion.request("POST", `/v1/orgs/${doomed.org_id}/invite`, { token, body: { email: "later@example.com", role_key: "member" } })
    expect(invite.status).toBe(200)
    expect((await scion.request("DELETE", `/v1/orgs/${doomed.org_id}`, { token })).status).toBe(204)
    expect((await scion.request("GET", `/v1/orgs/${doomed.org_id}`, { token })).status).toBe(403)
    expect((await scion.request("GET", `/v1/orgs/${doomed.org_id}`, { token: key.secret })).status).toBe(401)
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token })).status).toBe(404)
    expect((await scion.request("GET", "/v1/orgs", { token })).body.map((o: any) => o.org_id)).toEqual([keep.org_id])
  })

  it("API keys get 401 on the session-only endpoints and work on the rest of their own org", async () => {
    const { token } = await signUp(scion, "keyuser")
    const org = await createOrg(token, "Keyed")
    const key = await createKey(token, org.org_id)
    const secret = key.secret
    expect((await scion.request("GET", "/v1/orgs", { token: secret })).status).toBe(401)
    expect((await scion.request("POST", "/v1/orgs", { token: secret, body: { name: "Nope" } })).status).toBe(401)
    expect((await scion.request("GET", "/v1/me", { token: secret })).status).toBe(401)
    expect((await scion.request("PATCH", "/v1/me", { token: secret, body: { full_name: "Key" } })).status).toBe(401)
    expect((await scion.request("DELETE", "/v1/me", { token: secret })).status).toBe(401)
    expect((await scion.request("GET", "/v1/my-orgs", { token: secret })).status).toBe(401)
    expect((await scion.request("GET", "/v1/bootstrap", { token: secret, headers: { "x-org-id": org.org_id } })).status).toBe(401)
    expect((await scion.request("GET", "/v1/invites/pending", { token: secret })).status).toBe(401)
    expect((await scion.request("POST", "/v1/invites/inv_tok_whatever/accept", { token: secret })).status).toBe(401)
    const read = await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: secret })
    expect(read.status).toBe(200)
    expect(read.body).toMatchObject({ org_id: org.org_id, my_role: "admin" })
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: secret })).status).toBe(200)
    // The org list still holds exactly the one org: the key's POST created nothing.
    expect((await scion.request("GET", "/v1/orgs", { token })).body).toHaveLength(1)
  })

  it("an API key naming another org gets 403", async () => {
    const a = await signUp(scion, "ka")
    const b = await signUp(scion, "kb")
    const orgA = await createOrg(a.token, "A")
    const orgB = await createOrg(b.token, "B")
    const keyA = await createKey(a.token, orgA.org_id)
    expect((await scion.request("GET", `/v1/orgs/${orgB.org_id}`, { token: keyA.secret })).status).toBe(403)
    expect((await scion.request("GET", `/v1/orgs/${orgB.org_id}/api-keys`, { token: keyA.secret })).status).toBe(403)
    expect((await scion.request("POST", `/v1/orgs/${orgB.org_id}/api-keys`, { token: keyA.secret, body: { name: "x", role_id: "role_org_viewer" } })).status).toBe(403)
  })
})
