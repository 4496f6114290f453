/**
 * With auto-verification off (production), sign-up mails a verification token through the mail
 * port; the default adapter writes it to identity's log. Until the email is verified its owner
 * cannot see or accept invites addressed to it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createOrg } from "../support/flows.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  // The log is this test's mailbox: the tokens are written to it only when asked for.
  scion = await startScion({ env: { EMBEDDED_AUTO_VERIFY_EMAIL: "false", LOG_LEVEL: "Info", MAIL_ADAPTER: "log_with_tokens" } })
})
afterAll(async () => {
  await scion?.stop()
})

const mailedToken = async (email: string): Promise<string> => {
  let token = ""
  await waitFor("verification mail", async () => {
    for (const line of scion.identity.output().split("\n")) {
      if (line.includes(email) && line.includes("mail sent")) token = line.match(/scion_ver_[A-Za-z0-9_-]+/)?.[0] ?? token
    }
    return token !== ""
  })
  return token
}

describe("email verification", () => {
  it("an unverified invitee cannot accept; after verify-email (200) they can", async () => {
    const owner = await signUp(scion, "verify-owner")
    const org = await createOrg(scion, owner.token, "Verified Only")
    const invitee = await signUp(scion, "verify-invitee")
    const invite = await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: owner.token, body: { email: invitee.email, role_key: "member" } })
    expect(invite.status).toBe(200)

    expect(Object.values((await scion.request("GET", "/v1/invites/pending", { token: invitee.token })).body).flat()).toEqual([])
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: invitee.token })).status).toBe(403)

    const token = await mailedToken(invitee.email)
    const verified = await scion.request("POST", "/v1/auth/verify-email", { body: { token } })
    expect(verified.status).toBe(200)
    expect(verified.body).toMatchObject({ user_id: invitee.userId, email: invitee.email })
    // A token verifies once.
    expect((await scion.request("POST", "/v1/auth/verify-email", { body: { token } })).status).toBe(400)

    const pending = Object.values((await scion.request("GET", "/v1/invites/pending", { token: invitee.token })).body).flat() as Array<any>
    expect(pending.map((i) => i.invite_id)).toEqual([invite.body.invite_id])
    expect((await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: invitee.token })).status).toBe(200)
  })

  it("verify-email validates its body (422)", async () => {
    expect((await scion.request("POST", "/v1/auth/verify-email", { body: {} })).status).toBe(422)
    expect((await scion.request("POST", "/v1/auth/verify-email", { body: { token: 5 } })).status).toBe(422)
  })

  it("never logs passwords or session tokens", async () => {
    const user = await signUp(scion, "no-secrets")
    await scion.request("GET", "/v1/me", { token: user.token })
    // The sign-up's lines are all written once its verification mail is (the last of them).
    await mailedToken(user.email)
    await waitFor("the gateway's line for GET /v1/me", async () => scion.gateway.output().includes('"http.route":"/v1/me"'))
    const logs = scion.identity.output() + scion.gateway.output()
    expect(logs).not.toContain("correct-horse-battery")
    expect(logs).not.toContain(user.token)
  })
})
