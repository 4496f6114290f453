import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

const isoZ = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

describe("sign-up, login, logout", () => {
  it("signs up with 201, a user and a session that works", async () => {
    const email = `Alice-${Date.now()}@Example.com`
    const signup = await scion.request("POST", "/v1/auth/signup", { body: { email, password: "correct-horse-battery", full_name: "Alice" } })
    expect(signup.status).toBe(201)
    expect(signup.body.user).toMatchObject({ email: email.toLowerCase(), full_name: "Alice" })
    expect(signup.body.user.user_id).toMatch(/^usr_/)
    expect(signup.body.user.created_at).toMatch(isoZ)
    expect(signup.body.expires_at).toMatch(isoZ)
    expect(JSON.stringify(signup.body)).not.toContain("correct-horse-battery")
    const me = await scion.request("GET", "/v1/me", { token: signup.body.session_token })
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ user: { user_id: signup.body.user.user_id }, has_orgs: false, default_org_id: null })
  })

  it("refuses a second account for the same email, whatever its case (409)", async () => {
    const { email } = await signUp(scion, "dup")
    const again = await scion.request("POST", "/v1/auth/signup", { body: { email: email.toUpperCase(), password: "another-password", full_name: "Dup" } })
    expect(again.status).toBe(409)
    expect(typeof again.body.detail).toBe("string")
  })

  it("logs in with the right password and answers wrong credentials with the same 401", async () => {
    const { email } = await signUp(scion, "login")
    const ok = await scion.request("POST", "/v1/auth/login", { body: { email, password: "correct-horse-battery" } })
    expect(ok.status).toBe(200)
    expect(ok.body.session_token).toEqual(expect.any(String))
    const wrongPassword = await scion.request("POST", "/v1/auth/login", { body: { email, password: "wrong-password!" } })
    const unknownEmail = await scion.request("POST", "/v1/auth/login", { body: { email: `nobody-${Date.now()}@example.com`, password: "wrong-password!" } })
    expect(wrongPassword.status).toBe(401)
    expect(unknownEmail.status).toBe(401)
    expect(wrongPassword.body).toEqual(unknownEmail.body)
  })

  it("logout ends the session on the very next request (204, then 401)", async () => {
    const { token } = await signUp(scion, "logout")
    expect((await scion.request("GET", "/v1/me", { token })).status).toBe(200)
    const logout = await scion.request("POST", "/v1/auth/logout", { token })
    expect(logout.status).toBe(204)
    expect((await scion.request("GET", "/v1/me", { token })).status).toBe(401)
  })

  it("answers 401 for a missing, malformed or unknown bearer token", async () => {
    expect((await scion.request("GET", "/v1/me")).status).toBe(401)
    expect((await scion.request("GET", "/v1/me", { headers: { authorization: "Basic dXNlcjpwYXNz" } })).status).toBe(401)
    const unknown = await scion.request("GET", "/v1/me", { token: "scion_sess_not-a-real-session-token" })
    expect(unknown.status).toBe(401)
    expect(typeof unknown.body.detail).toBe("string")
    const forgedKey = await scion.request("GET", "/v1/orgs/org_x", { token: "sk-scion_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" })
    expect(forgedKey.status).toBe(401)
  })

  it("validates sign-up bodies with 422 and the detail array, creating nothing", async () => {
    const cases: Array<[unknown, string]> = [
      [{ password: "correct-horse-battery", full_name: "X" }, "email"],
      [{ email: "not-an-email", password: "correct-horse-battery", full_name: "X" }, "email"],
      [{ email: "short@example.com", password: "short", full_name: "X" }, "password"],
      [{ email: "name@example.com", password: "correct-horse-battery", full_name: "" }, "full_name"],
      [{ email: "name@example.com", password: "correct-horse-battery", full_name: "x".repeat(101) }, "full_name"],
      [{ email: 42, password: "correct-horse-battery", full_name: "X" }, "email"]
    ]
    for (const [body, field] of cases) {
      const response = await scion.request("POST", "/v1/auth/signup", { body })
      expect(response.status, JSON.stringify(body)).toBe(422)
      expect(Array.isArray(response.body.detail)).toBe(true)
      const entry = response.body.detail[0]
      expect(entry.loc).toEqual(["body", field])
      expect(typeof entry.msg).toBe("string")
      expect(typeof entry.type).toBe("string")
    }
    const notJson = await scion.request("POST", "/v1/auth/signup", { rawBody: "{not json" })
    expect(notJson.status).toBe(422)
    expect(Array.isArray(notJson.body.detail)).toBe(true)
    const array = await scion.request("POST", "/v1/auth/signup", { body: [1, 2] })
    expect(array.status).toBe(422)
    // Nothing was created by the rejected bodies.
    const login = await scion.request("POST", "/v1/auth/login", { body: { email: "name@example.com", password: "correct-horse-battery" } })
    expect(login.status).toBe(401)
  })

  it("verify-email rejects an unknown token with 400", async () => {
    const response = await scion.request("POST", "/v1/auth/verify-email", { body: { token: "not-a-token" } })
    expect(response.status).toBe(400)
    expect(typeof response.body.detail).toBe("string")
  })

  it("answers unknown routes with 404", async () => {
    const { token } = await signUp(scion, "routes")
    expect((await scion.request("GET", "/v1/does-not-exist", { token })).status).toBe(404)
  })
})
