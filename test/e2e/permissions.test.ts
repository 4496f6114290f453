/**
 * The role permission table (ARCHITECTURE.md), endpoint by endpoint: each role is allowed exactly
 * where its permissions say, and denied with 403 elsewhere.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg, type RoleKey } from "../support/flows.js"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
let orgId: string
let ownerToken: string
const tokens = {} as Record<RoleKey, string>

beforeAll(async () => {
  scion = await startScion()
  const owner = await signUp(scion, "owner")
  ownerToken = owner.token
  orgId = (await createOrg(scion, ownerToken, "Matrix")).org_id
  // The owner keeps a second org so deleting this one is not "last org".
  await createOrg(scion, ownerToken, "Spare")
  tokens.owner = ownerToken
  for (const role of ["viewer", "member", "admin"] as const) tokens[role] = (await addMember(scion, ownerToken, orgId, role)).token
})
afterAll(async () => {
  await scion?.stop()
})

const roles: ReadonlyArray<RoleKey> = ["viewer", "member", "admin", "owner"]

interface Case {
  readonly name: string
  readonly allowed: ReadonlyArray<RoleKey>
  readonly success: number
  /** Builds a fresh request for the role (so allowed calls do not interfere with each other). */
  readonly request: (role: RoleKey) => Promise<{ method: string; path: string; body?: unknown }>
}

const cases: ReadonlyArray<Case> = [
  { name: "GET org (org.read)", allowed: roles, success: 200, request: async () => ({ method: "GET", path: `/v1/orgs/${orgId}` }) },
  { name: "GET members (membership)", allowed: roles, success: 200, request: async () => ({ method: "GET", path: `/v1/orgs/${orgId}/members` }) },
  { name: "GET invites (membership)", allowed: roles, success: 200, request: async () => ({ method: "GET", path: `/v1/orgs/${orgId}/invites` }) },
  { name: "GET roles (membership)", allowed: roles, success: 200, request: async () => ({ method: "GET", path: `/v1/orgs/${orgId}/roles` }) },
  { name: "PATCH org (org.update)", allowed: ["admin", "owner"], success: 200, request: async () => ({ method: "PATCH", path: `/v1/orgs/${orgId}`, body: { name: "Matrix" } }) },
  {
    name: "POST invite (orgs.invite_users)",
    allowed: ["admin", "owner"],
    success: 200,
    request: async (role) => ({ method: "POST", path: `/v1/orgs/${orgId}/invite`, body: { email: `${role}-invitee-${Date.now()}@example.com`, role_key: "viewer" } })
  },
  {
    name: "DELETE invite (orgs.invite_users)",
    allowed: ["admin", "owner"],
    success: 204,
    request: async (role) => {
      const invite = await scion.request("POST", `/v1/orgs/${orgId}/invite`, { token: ownerToken, body: { email: `${role}-revoke-${Date.now()}@example.com`, role_key: "viewer" } })
      return { method: "DELETE", path: `/v1/orgs/${orgId}/invites/${invite.body.invite_id}` }
    }
  },
  {
    name: "PATCH member role (orgs.share)",
    allowed: ["admin", "owner"],
    success: 200,
    request: async (role) => {
      const subject = await addMember(scion, ownerToken, orgId, "viewer", `${role}-subject`)
      return { method: "PATCH", path: `/v1/orgs/${orgId}/members/${subject.userId}`, body: { role_key: "member" } }
    }
  },
  {
    name: "DELETE member (org.remove_members)",
    allowed: ["admin", "owner"],
    success: 204,
    request: async (role) => {
      const subject = await addMember(scion, ownerToken, orgId, "viewer", `${role}-removed`)
      return { method: "DELETE", path: `/v1/orgs/${orgId}/members/${subject.userId}` }
    }
  },
  { name: "GET api-keys (api_keys.read)", allowed: ["member", "admin", "owner"], success: 200, request: async () => ({ method: "GET", path: `/v1/orgs/${orgId}/api-keys` }) },
  {
    name: "POST api-keys (api_keys.create)",
    allowed: ["member", "admin", "owner"],
    success: 201,
    request: async () => ({ method: "POST", path: `/v1/orgs/${orgId}/api-keys`, body: { name: "matrix", role_id: "role_org_viewer" } })
  },
  {
    name: "DELETE api-key (api_keys.delete)",
    allowed: ["member", "admin", "owner"],
    success: 204,
    request: async () => {
      const key = await createApiKey(scion, ownerToken, orgId, { role_id: "role_org_viewer" })
      return { method: "DELETE", path: `/v1/orgs/${orgId}/api-keys/${key.api_key_id}` }
    }
  }
]

describe("permission table", () => {
  for (const testCase of cases) {
    for (const role of roles) {
      const allowed = testCase.allowed.includes(role)
      it(`${testCase.name}: ${role} is ${allowed ? "allowed" : "denied"}`, async () => {
        const { method, path, body } = await testCase.request(role)
        const response = await scion.request(method, path, { token: tokens[role], body })
        expect(response.status, scion.explain(response)).toBe(allowed ? testCase.success : 403)
      })
    }
  }

  it("DELETE org (org.delete): viewer, member and admin are denied; the owner deletes it", async () => {
    for (const role of ["viewer", "member", "admin"] as const) {
      expect((await scion.request("DELETE", `/v1/orgs/${orgId}`, { token: tokens[role] })).status).toBe(403)
    }
    expect((await scion.request("GET", `/v1/orgs/${orgId}`, { token: ownerToken })).status).toBe(200)
    expect((await scion.request("DELETE", `/v1/orgs/${orgId}`, { token: ownerToken })).status).toBe(204)
  })

  it("API keys carry their role's permissions: a viewer key reads but cannot write", async () => {
    const org = await createOrg(scion, ownerToken, "KeyMatrix")
    const viewerKey = await createApiKey(scion, ownerToken, org.org_id, { role_id: "role_org_viewer" })
    expect((await scion.request("GET", `/v1/orgs/${org.org_id}`, { token: viewerKey.secret })).status).toBe(200)
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token: viewerKey.secret, body: { name: "x" } })).status).toBe(403)
    expect((await scion.request("POST", `/v1/orgs/${org.org_id}/invite`, { token: viewerKey.secret, body: { email: "v@example.com", role_key: "viewer" } })).status).toBe(403)
    const ownerKey = await createApiKey(scion, ownerToken, org.org_id, { role_id: "role_org_owner" })
    expect((await scion.request("PATCH", `/v1/orgs/${org.org_id}`, { token: ownerKey.secret, body: { name: "Renamed by key" } })).status).toBe(200)
  })
})
