import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg } from "../support/flows.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  // Info: the default mailer writes invites to the log, which a test reads.
  scion = await startScion({ env: { LOG_LEVEL: "Info" } })
})
afterAll(async () => {
  await scion?.stop()
})

describe("invites", () => {
  it("an invite is pending for the invitee, who accepts it and becomes a member with the invited role", async () => {
    const owner = await signUp(scion, "owner")
    const org = await createOrg(scion, owner.token, "Team")
    const invitee = await signUp(scion, "invitee")
    const invite = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: invitee.email, role_key: "member" } })
    expect(invite.status).toBe(200)
    expect(invite.body).toMatchObject({ email: invitee.email, role_key: "member", invited_by_user_id: owner.userId })
    expect(invite.body.invite_id).toMatch(/^inv_/)
    expect(invite.body.invite_token).toEqual(expect.any(String))

    const listed = await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: owner.token })
    expect(listed.status).toBe(200)
    expect(listed.body.map((i: any) => i.invite_id)).toEqual([invite.body.invite_id])

    const pending = await scion.request("GET", "/v1/invites/pending", { token: invitee.token })
    expect(pending.status).toBe(200)
    const all = Object.values(pending.body).flat() as Array<any>
    expect(all.map((i) => i.invite_id)).toEqual([invite.body.invite_id])
    expect(all[0].invite_token).toBe(invite.body.invite_token)
    // Other people do not see it.
    const bystander = await signUp(scion, "bystander")
    expect(Object.values((await scion.request("GET", "/v1/invites/pending", { token: bystander.token })).body).flat()).toEqual([])
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: bystander.token })).status).toBe(403)

    // The invite was mailed (the default mailer writes the log) without its token: whoever reads
    // the logs cannot accept it.
    await waitFor("the invite mail in identity's log", async () => scion.identity.output().split("\n").some((line) => line.includes("mail sent") && line.includes(invitee.email)))
    const mailed = scion.identity.output().split("\n").filter((line) => line.includes("mail sent") && line.includes(invitee.email))
    expect(mailed.join("\n")).not.toContain(invite.body.invite_token)
    expect(mailed.join("\n")).toContain("withheld")
    const accept = await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: invitee.token })
    expect(accept.status).toBe(200)
    // The gateway logs the request by its route, not its URL, which holds the token.
    // (The bystander's 403 above has such a line too: this one is the acceptance's.)
    await waitFor("the acceptance's access log line", async () =>
      scion.gateway.output().split("\n").some((line) => line.includes('"http.route":"/v1/invites/{invite_token}/accept"') && line.includes('"http.status":200'))
    )
    expect(scion.gateway.output()).not.toContain(invite.body.invite_token)
    expect(scion.identity.output()).not.toContain(invite.body.invite_token)
    expect(typeof accept.body.message).toBe("string")
    expect(accept.body.org).toMatchObject({ org_id: org.org_id, my_role: "member", member_count: 2 })

    const members = await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: invitee.token })
    expect(members.status).toBe(200)
    expect(members.body).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ user_id: owner.userId, role: "owner", email: owner.email, joined_at: expect.any(String) }),
        expect.objectContaining({ user_id: invitee.userId, role: "member", email: invitee.email })
      ])
    )
    // Accepted invites are no longer pending, and cannot be accepted twice.
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: owner.token })).body).toEqual([])
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: invitee.token })).status).toBe(404)
  })

  it("revokes an invite (204), after which it cannot be accepted; revoking again is 404", async () => {
    const owner = await signUp(scion, "revoker")
    const org = await createOrg(scion, owner.token, "Revokes")
    const invitee = await signUp(scion, "revokee")
    const invite = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: invitee.email, role_key: "viewer" } })
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/invites/${invite.body.invite_id}`, { token: owner.token })).status).toBe(204)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/invites/${invite.body.invite_id}`, { token: owner.token })).status).toBe(404)
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: invitee.token })).status).toBe(404)
    expect((await scion.request("POST", `/v1/invites/inv_tok_unknown/accept`, { token: invitee.token })).status).toBe(404)
  })

  it("rejects invites with an unknown role (400), bad bodies (422), and existing members (409)", async () => {
    const owner = await signUp(scion, "inviter")
    const org = await createOrg(scion, owner.token, "Checks")
    const unknownRole = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: "x@example.com", role_key: "superuser" } })
    expect(unknownRole.status).toBe(400)
    expect(typeof unknownRole.body.detail).toBe("string")
    for (const body of [{ role_key: "member" }, { email: "x@example.com" }, { email: "nope", role_key: "member" }, { email: 1, role_key: "member" }]) {
      expect((await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body })).status, JSON.stringify(body)).toBe(422)
    }
    expect((await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: owner.email, role_key: "member" } })).status).toBe(409)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: owner.token })).body).toEqual([])
  })
})

describe("roles and members", () => {
  it("lists the four org roles with their permissions", async () => {
    const owner = await signUp(scion, "roles")
    const org = await createOrg(scion, owner.token, "Roles")
    const roles = await scion.request("GET", `/v1/orgs/${org.org_id}/roles`, { token: owner.token })
    expect(roles.status).toBe(200)
    const byKey = Object.fromEntries(roles.body.map((r: any) => [r.role_key, r]))
    expect(Object.keys(byKey).sort()).toEqual(["admin", "member", "owner", "viewer"])
    expect(byKey.viewer).toMatchObject({ id: "role_org_viewer", name: expect.any(String), description: expect.any(String) })
    expect(byKey.viewer.permissions).toContain("org.read")
    expect(byKey.viewer.permissions).not.toContain("api_keys.read")
    expect(byKey.member.permissions).toEqual(expect.arrayContaining(["api_keys.create", "branches.create"]))
    expect(byKey.admin.permissions).toEqual(expect.arrayContaining(["orgs.share", "org.remove_members", "orgs.invite_users"]))
    expect(byKey.admin.permissions).not.toContain("org.delete")
    expect(byKey.owner.permissions).toEqual(expect.arrayContaining(["org.delete", "billing.manage"]))
  })

  it("changes a member's role, and the new role applies on the next request", async () => {
    const owner = await signUp(scion, "promoter")
    const org = await createOrg(scion, owner.token, "Promotions")
    const user = await addMember(scion, owner.token, org.org_id, "viewer")
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token: user.token, body: { name: "Mine" } })).status).toBe(403)
    const promote = await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token, body: { role_key: "admin" } })
    expect(promote.status).toBe(200)
    expect(typeof promote.body.message).toBe("string")
    expect(promote.body.role_key).toBe("admin")
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token: user.token, body: { name: "Renamed" } })).status).toBe(200)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: user.token })).body.my_role).toBe("admin")
  })

  it("never demotes or removes the last owner (400), but does once there is a second owner", async () => {
    const owner = await signUp(scion, "lastowner")
    const org = await createOrg(scion, owner.token, "Owners")
    const demote = await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${owner.userId}`, { token: owner.token, body: { role_key: "admin" } })
    expect(demote.status).toBe(400)
    expect(typeof demote.body.detail).toBe("string")
    const removal = await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${owner.userId}`, { token: owner.token })
    expect(removal.status).toBe(400)
    expect(typeof removal.body.detail).toBe("string")
    const second = await addMember(scion, owner.token, org.org_id, "owner", "coowner")
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${owner.userId}`, { token: second.token, body: { role_key: "admin" } })).status).toBe(200)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${second.userId}`, { token: second.token, body: { role_key: "member" } })).status).toBe(400)
  })

  it("removes a member (204); their access ends on the next request; removing again is 404", async () => {
    const owner = await signUp(scion, "remover")
    const org = await createOrg(scion, owner.token, "Removals")
    const user = await addMember(scion, owner.token, org.org_id, "member")
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: user.token })).status).toBe(200)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token })).status).toBe(204)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: user.token })).status).toBe(403)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token })).status).toBe(404)
    const members = await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: owner.token })
    expect(members.body.map((m: any) => m.user_id)).toEqual([owner.userId])
  })

  it("rejects role updates with an unknown role (400), a bad body (422), or an unknown member (404)", async () => {
    const owner = await signUp(scion, "roleval")
    const org = await createOrg(scion, owner.token, "RoleVal")
    const user = await addMember(scion, owner.token, org.org_id, "member")
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token, body: { role_key: "god" } })).status).toBe(400)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token, body: {} })).status).toBe(422)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${user.userId}`, { token: owner.token, body: { role_key: 5 } })).status).toBe(422)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/usr_nobody`, { token: owner.token, body: { role_key: "viewer" } })).status).toBe(404)
    const members = await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: owner.token })
    expect(members.body.find((m: any) => m.user_id === user.userId).role).toBe("member")
  })

  it("an admin cannot raise anyone above admin (403)", async () => {
    const owner = await signUp(scion, "esc")
    const org = await createOrg(scion, owner.token, "Escalation")
    const admin = await addMember(scion, owner.token, org.org_id, "admin")
    const member = await addMember(scion, owner.token, org.org_id, "member")
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${member.userId}`, { token: admin.token, body: { role_key: "owner" } })).status).toBe(403)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${admin.userId}`, { token: admin.token, body: { role_key: "owner" } })).status).toBe(403)
    expect((await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: admin.token, body: { email: "boss@example.com", role_key: "owner" } })).status).toBe(403)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${member.userId}`, { token: admin.token, body: { role_key: "admin" } })).status).toBe(200)
  })
})

describe("members, invites and roles across orgs", () => {
  it("a stranger and another org's API key are refused (403) on every member, invite and role endpoint, and nothing changes", async () => {
    const owner = await signUp(scion, "xowner")
    const org = await createOrg(scion, owner.token, "Guarded")
    const member = await addMember(scion, owner.token, org.org_id, "member", "xmember")
    const invite = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: "later@example.com", role_key: "viewer" } })
    expect(invite.status).toBe(200)
    const stranger = await signUp(scion, "xstranger")
    const elsewhere = await createOrg(scion, stranger.token, "Elsewhere")
    const foreignKey = await createApiKey(scion, stranger.token, elsewhere.org_id, { role_id: "role_org_admin" })
    for (const token of [stranger.token, foreignKey.secret]) {
      const attempts = [
        await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token }),
        await scion.request("GET", `/v1/orgs/${org.org_id}/roles`, { token }),
        await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token }),
        await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token, body: { email: "intruder@example.com", role_key: "admin" } }),
        await scion.request("DELETE", `/v1/orgs/${org.org_id}/invites/${invite.body.invite_id}`, { token }),
        await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${member.userId}`, { token, body: { role_key: "viewer" } }),
        await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${member.userId}`, { token })
      ]
      expect(attempts.map((r) => r.status)).toEqual([403, 403, 403, 403, 403, 403, 403])
    }
    const members = await scion.request("GET", `/v1/orgs/${org.org_id}/members`, { token: owner.token })
    expect(members.body.map((m: any) => [m.user_id, m.role]).sort()).toEqual(
      [[owner.userId, "owner"], [member.userId, "member"]].sort()
    )
    const invites = await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: owner.token })
    expect(invites.body.map((i: any) => i.invite_id)).toEqual([invite.body.invite_id])
  })

  it("an admin of one org cannot reach another org's members or invites by id (404), and the org's own API key works on them", async () => {
    const owner = await signUp(scion, "yowner")
    const org = await createOrg(scion, owner.token, "Mine")
    const other = await signUp(scion, "yother")
    const otherOrg = await createOrg(scion, other.token, "Theirs")
    const theirMember = await addMember(scion, other.token, otherOrg.org_id, "member", "ytheirs")
    const theirInvite = await scion.request("POST", `/v1/orgs/${otherOrg.org_id}/invite`, { token: other.token, body: { email: "theirs@example.com", role_key: "viewer" } })
    expect(theirInvite.status).toBe(200)
    // Ids that exist, in the other org: not found in this one.
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/invites/${theirInvite.body.invite_id}`, { token: owner.token })).status).toBe(404)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${theirMember.userId}`, { token: owner.token, body: { role_key: "viewer" } })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${theirMember.userId}`, { token: owner.token })).status).toBe(404)
    const theirs = await scion.request("GET", `/v1/orgs/${otherOrg.org_id}/members`, { token: other.token })
    expect(theirs.body).toHaveLength(2)
    expect((await scion.request("GET", `/v1/orgs/${otherOrg.org_id}/invites`, { token: other.token })).body.map((i: any) => i.invite_id)).toEqual([theirInvite.body.invite_id])

    // The org's own admin key: lists, invites, changes and removes, as a session with the same role would.
    const key = await createApiKey(scion, owner.token, org.org_id, { role_id: "role_org_admin" })
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/roles`, { token: key.secret })).status).toBe(200)
    const invited = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: key.secret, body: { email: "bykey@example.com", role_key: "member" } })
    expect(invited.status).toBe(200)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}/invites`, { token: key.secret })).body.map((i: any) => i.invite_id)).toEqual([invited.body.invite_id])
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/invites/${invited.body.invite_id}`, { token: key.secret })).status).toBe(204)
    const joined = await addMember(scion, owner.token, org.org_id, "member", "yjoined")
    const changed = await scion.request("PATCH", `/v1/orgs/${org.org_id}/members/${joined.userId}`, { token: key.secret, body: { role_key: "viewer" } })
    expect(changed.status).toBe(200)
    expect(changed.body).toMatchObject({ user_id: joined.userId, role_key: "viewer" })
    expect((await scion.request("DELETE", `/v1/orgs/${org.org_id}/members/${joined.userId}`, { token: key.secret })).status).toBe(204)
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: joined.token })).status).toBe(403)
  })
})
