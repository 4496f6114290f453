import pg from "pg"
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

describe("DELETE /v1/me", () => {
  it("refuses the sole owner of an org with a 400 naming the orgs, and changes nothing", async () => {
    const owner = await signUp(scion, "sole")
    const org = await createOrg(scion, owner.token, "Solely Owned")
    const response = await scion.request("DELETE", "/v1/me", { token: owner.token })
    expect(response.status).toBe(400)
    expect(response.body.detail).toContain("Solely Owned")
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: owner.token })).status).toBe(200)
  })

  it("deletes the account: memberships and sessions go, what the user made stays with a null reference", async () => {
    const owner = await signUp(scion, "stays")
    const org = await createOrg(scion, owner.token, "Survives")
    const leaver = await addMember(scion, owner.token, org.org_id, "admin", "leaver")
    const key = await createApiKey(scion, leaver.token, org.org_id, { name: "made by leaver" })
    const invite = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: leaver.token, body: { email: "someone@example.com", role_key: "viewer" } })
    expect(invite.status).toBe(200)
    // The leaver also grants a role (by inviting someone who accepts).
    const grantee = await signUp(scion, "grantee")
    const granted = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: leaver.token, body: { email: grantee.email, role_key: "member" } })
    expect((await scion.request("POST", `/v1/invites/${granted.body.invite_token}/accept`, { token: grantee.token })).status).toBe(200)

    expect((await scion.request("DELETE", "/v1/me", { token: leaver.token })).status).toBe(204)
    expect((await scion.request("GET", "/v1/me", { token: leaver.token })).status).toBe(401)
    const login = await scion.request("POST", "/v1/auth/login", { body: { email: leaver.email, password: "correct-horse-battery" } })
    expect(login.status).toBe(401)

    const members = await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: owner.token })
    expect(members.body.map((m: any) => m.user_id).sort()).toEqual([owner.userId, grantee.userId].sort())
    const keys = await scion.request("GET", `/v1/orgs/${org.org_id}/api-keys`, { token: owner.token })
    const kept = keys.body.find((k: any) => k.api_key_id === key.api_key_id)
    expect(kept).toMatchObject({ status: "active", created_by: null })
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: key.secret })).status).toBe(200)
    const invites = await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: owner.token })
    expect(invites.body.find((i: any) => i.invite_id === invite.body.invite_id)).toMatchObject({ invited_by_user_id: null })
    // The grantee keeps the role the leaver granted.
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: grantee.token })).body.my_role).toBe("member")

    // And nothing of the user remains in identity's tables.
    const db = new pg.Client({ connectionString: scion.databaseUrl })
    await db.connect()
    try {
      const rows = await db.query("select count(*)::int as n from identity.users where id = $1", [leaver.userId])
      expect(rows.rows[0].n).toBe(0)
      const events = await db.query("select subject, payload from identity.outbox where subject = 'events.user.deleted'")
      expect(events.rows.map((r) => r.payload.user_id)).toContain(leaver.userId)
    } finally {
      await db.end()
    }
  })

  it("records events.org.created, events.org.deleted and the access change in the outbox", async () => {
    const owner = await signUp(scion, "events")
    await createOrg(scion, owner.token, "Keep")
    const org = await createOrg(scion, owner.token, "Evented")
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}`, { token: owner.token })).status).toBe(204)
    const db = new pg.Client({ connectionString: scion.databaseUrl })
    await db.connect()
    try {
      const rows = await db.query("select subject from identity.outbox where payload->>'org_id' = $1 order by id", [org.org_id])
      // The access change drops every unit's cached grants in the org.
      expect(rows.rows.map((r) => r.subject)).toEqual(["events.org.created", "events.org.deleted", "events.access.changed"])
    } finally {
      await db.end()
    }
  })
})
