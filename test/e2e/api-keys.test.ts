import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg } from "../support/flows.js"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

describe("API keys", () => {
  it("creates a key whose secret is shown once, recognisable and working", async () => {
    const owner = await signUp(scion, "keys")
    const org = await createOrg(scion, owner.token, "Keys")
    const created = await scion.request("POST", `/v1/orgs/${org.org_id}/api-keys`, {
      token: owner.token,
      body: { name: "deploy bot", role_id: "role_org_member", scopes: ["org.read", "branches.create"] }
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: "deploy bot", role_id: "role_org_member", role_key: "member", status: "active", mode: "live", org_id: org.org_id, created_by: owner.userId, expires_at: null, revoked_at: null })
    expect(created.body.scopes).toEqual(["org.read", "branches.create"])
    expect(created.body.api_key_id).toMatch(/^key_/)
    expect(created.body.secret).toMatch(/^sk-scion_live_[A-Za-z0-9]{38}$/)
    expect(created.body.secret.startsWith(created.body.key_prefix)).toBe(true)

    const test = await createApiKey(scion, owner.token, org.org_id, { mode: "test" })
    expect(test.secret).toMatch(/^sk-scion_test_/)

    const list = await scion.request("GET", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token })
    expect(list.status).toBe(200)
    expect(JSON.stringify(list.body)).not.toContain(created.body.secret)
    expect(JSON.stringify(list.body)).not.toContain(test.secret)
    for (const item of list.body) expect(item).not.toHaveProperty("secret")

    const read = await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: created.body.secret })
    expect(read.status).toBe(200)
    // Scoped key: effective permissions are the scopes.
    expect(read.body.my_permissions.sort()).toEqual(["branches.create", "org.read"])
    // A key whose checksum does not match is rejected as unknown.
    const tampered = created.body.secret.slice(0, -1) + (created.body.secret.endsWith("A") ? "B" : "A")
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: tampered })).status).toBe(401)
  })

  it("lists active keys newest first, then revoked keys", async () => {
    const owner = await signUp(scion, "order")
    const org = await createOrg(scion, owner.token, "Order")
    const first = await createApiKey(scion, owner.token, org.org_id, { name: "first" })
    const second = await createApiKey(scion, owner.token, org.org_id, { name: "second" })
    const third = await createApiKey(scion, owner.token, org.org_id, { name: "third" })
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/api-keys/${second.api_key_id}`, { token: owner.token })).status).toBe(204)
    const list = await scion.request("GET", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token })
    expect(list.body.map((k: any) => [k.name, k.status])).toEqual([
      ["third", "active"],
      ["first", "active"],
      ["second", "revoked"]
    ])
    expect(list.body[2].revoked_at).toEqual(expect.any(String))
    expect(third.api_key_id).not.toBe(first.api_key_id)
  })

  it("revoking stops the key on the next request; revoking twice or an unknown key is 404", async () => {
    const owner = await signUp(scion, "revoke")
    const org = await createOrg(scion, owner.token, "Revoke")
    const key = await createApiKey(scion, owner.token, org.org_id)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })).status).toBe(200)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/api-keys/${key.api_key_id}`, { token: owner.token })).status).toBe(204)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })).status).toBe(401)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/api-keys/${key.api_key_id}`, { token: owner.token })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/api-keys/key_unknown`, { token: owner.token })).status).toBe(404)
  })

  it("another org's key is 404 to revoke", async () => {
    const a = await signUp(scion, "orga")
    const b = await signUp(scion, "orgb")
    const orgA = await createOrg(scion, a.token, "A")
    const orgB = await createOrg(scion, b.token, "B")
    const keyB = await createApiKey(scion, b.token, orgB.org_id)
    expect((await scion.request("DELETE", `/v1/orgs/${orgA.org_id}/api-keys/${keyB.api_key_id}`, { token: a.token })).status).toBe(404)
    expect((await scion.request("GET", `/v1/orgs/${orgB.org_id}`, { token: keyB.secret })).status).toBe(200)
  })

  it("rejects unknown roles, non-org roles and out-of-role scopes with 400, creating nothing", async () => {
    const owner = await signUp(scion, "badkeys")
    const org = await createOrg(scion, owner.token, "BadKeys")
    const cases = [
      { name: "k", role_id: "role_org_wizard" },
      { name: "k", role_id: "role_platform_admin" },
      { name: "k", role_id: "role_org_viewer", scopes: ["api_keys.create"] },
      { name: "k", role_id: "role_org_member", scopes: ["org.delete"] },
      { name: "k", role_id: "role_org_member", scopes: ["no.such.permission"] },
      { name: "k", role_id: "role_org_member", expiration: "2001-01-01T00:00:00Z" }
    ]
    for (const body of cases) {
      const response = await scion.request("POST", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token, body })
      expect(response.status, JSON.stringify(body)).toBe(400)
      expect(typeof response.body.detail).toBe("string")
    }
    for (const body of [{ role_id: "role_org_member" }, { name: "k" }, { name: "", role_id: "role_org_member" }, { name: "k", role_id: "role_org_member", scopes: "org.read" }, { name: "k", role_id: "role_org_member", expiration: "tomorrow" }]) {
      const response = await scion.request("POST", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token, body })
      expect(response.status, JSON.stringify(body)).toBe(422)
    }
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token })).body).toEqual([])
  })

  it("expires keys at their expiration", async () => {
    const owner = await signUp(scion, "expiry")
    const org = await createOrg(scion, owner.token, "Expiry")
    const expiration = new Date(Date.now() + 2_000).toISOString()
    const key = await createApiKey(scion, owner.token, org.org_id, { expiration })
    expect(key.expires_at).toEqual(expect.any(String))
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })).status).toBe(401)
  })

  it("no escalation: a member cannot mint an admin key, and a key cannot mint above itself", async () => {
    const owner = await signUp(scion, "keyesc")
    const org = await createOrg(scion, owner.token, "KeyEsc")
    const member = await addMember(scion, owner.token, org.org_id, "member")
    const denied = await scion.request("POST", `/v1/orgs/${org.org_id}/api-keys`, { token: member.token, body: { name: "k", role_id: "role_org_admin" } })
    expect(denied.status).toBe(403)
    const memberKey = await createApiKey(scion, member.token, org.org_id, { role_id: "role_org_member" })
    expect((await scion.request("POST", `/v1/orgs/${org.org_id}/api-keys`, { token: memberKey.secret, body: { name: "k", role_id: "role_org_owner" } })).status).toBe(403)
    const viewerKey = await createApiKey(scion, memberKey.secret, org.org_id, { role_id: "role_org_viewer" })
    expect(viewerKey.role_id).toBe("role_org_viewer")
    // A viewer key has no api_keys permissions at all.
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/api-keys`, { token: viewerKey.secret })).status).toBe(403)
  })
})
