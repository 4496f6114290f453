/**
 * Environments through the gateway, with identity, billing, the connector unit and the gateway as
 * separate processes: create and list, AWS setup link and account connection, DB-provider API key
 * rotation (encrypted at rest, never returned), permissions role by role and for API keys,
 * other orgs' environments (404), the plan's environment limit and billing being unreachable.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createApiKey, createOrg, type RoleKey } from "../support/flows.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let orgId: string
let otherOrgId: string
const tokens = {} as Record<RoleKey, string>
let strangerToken: string
/** An environment of the shared org for tests that need any one (the team plan allows ten). */
let shared: { environment_id: string }

beforeAll(async () => {
  // Units log at Info here, so the connector's log holds a line for each key rotation (checked for secrets).
  scion = await startScion({ env: { LOG_LEVEL: "Info" } })
  const owner = await signUp(scion, "owner")
  tokens.owner = owner.token
  orgId = (await createOrg(scion, owner.token, "Placement Org")).org_id
  for (const role of ["viewer", "member", "admin"] as const) tokens[role] = (await addMember(scion, owner.token, orgId, role)).token
  const stranger = await signUp(scion, "stranger")
  strangerToken = stranger.token
  otherOrgId = (await createOrg(scion, strangerToken, "Other Org")).org_id
  // The free plan allows one environment; the shared org is on team (ten).
  await waitFor("billing to set the org up", async () => {
    const selected = await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions`, { token: tokens.owner, body: { plan_id: "team" } })
    return selected.status === 200
  })
  shared = await newEnvironment()
})
afterAll(async () => {
  await scion?.stop()
})

let counter = 0
const uniqueName = (label: string) => `${label}-${Date.now().toString(36)}${counter++}`
const create = (token: string, body: Record<string, unknown>) => scion.request("POST", "/v1/environments", { token, body })
const envBody = (extra: Record<string, unknown> = {}) => ({ org_id: orgId, name: uniqueName("env"), cloud: "aws", region: "us-east-1", ...extra })

/** An environment of the shared org, made by its owner. */
const newEnvironment = async (extra: Record<string, unknown> = {}) => {
  const response = await create(tokens.owner, envBody(extra))
  expect(response.status, scion.explain(response)).toBe(201)
  return response.body
}

describe("environments", () => {
  it("POST creates an environment: 201 with the row (no private link, no AWS account, no key yet)", async () => {
    const response = await create(tokens.admin, envBody({ name: "  Production  ", region: "eu-central-1" }))
    expect(response.status, scion.explain(response)).toBe(201)
    expect(response.body).toEqual({
      environment_id: expect.stringMatching(/^env_/),
      org_id: orgId,
      name: "Production",
      cloud: "aws",
      region: "eu-central-1",
      private_link_id: null,
      private_link_status: null,
      aws_account_connection: null,
      db_provider_api_key: null,
      created_by: expect.stringMatching(/^usr_/),
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/)
    })
    expect((await create(tokens.admin, envBody({ name: "production" }))).status).toBe(409)
  })

  it("an environment created with a private link carries it as active", async () => {
    const env = await newEnvironment({ private_link_id: "vpce-svc-0abc123" })
    expect(env).toMatchObject({ private_link_id: "vpce-svc-0abc123", private_link_status: "active" })
    const list = await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: tokens.viewer })
    expect(list.body.environments.find((e: { environment_id: string }) => e.environment_id === env.environment_id)).toEqual(env)
  })

  it("validates bodies with 422", async () => {
    const cases: ReadonlyArray<[Record<string, unknown>, ReadonlyArray<string>]> = [
      [{ name: "x", cloud: "aws", region: "us-east-1" }, ["body", "org_id"]],
      [{ org_id: orgId, cloud: "aws", region: "us-east-1" }, ["body", "name"]],
      [{ org_id: orgId, name: "x".repeat(101), cloud: "aws", region: "us-east-1" }, ["body", "name"]],
      [{ org_id: orgId, name: "x", cloud: "gcp", region: "us-east-1" }, ["body", "cloud"]],
      [{ org_id: orgId, name: "x", region: "us-east-1" }, ["body", "cloud"]],
      [{ org_id: orgId, name: "x", cloud: "aws", region: "Mars" }, ["body", "region"]],
      [{ org_id: orgId, name: "x", cloud: "aws", region: "us-east-1", private_link_id: "" }, ["body", "private_link_id"]]
    ]
    for (const [body, loc] of cases) {
      const response = await create(tokens.owner, body)
      expect(response.status, JSON.stringify(body)).toBe(422)
      expect(response.body.detail.map((d: { loc: Array<string> }) => d.loc)).toContainEqual(loc)
    }
    const missing = await scion.request("GET", "/v1/environments", { token: tokens.owner })
    expect(missing.status).toBe(422)
    expect(missing.body.detail[0]).toMatchObject({ loc: ["query", "org_id"], type: "missing" })
    const env = shared
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens.owner, body: { environment_id: env.environment_id, aws_account_id: "12345" } })).status).toBe(422)
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens.owner, body: { aws_account_id: "123456789012" } })).status).toBe(422)
    expect((await scion.request("PATCH", "/v1/environments/aws-account-connections/aac_x", { token: tokens.owner, body: { role_arn: "arn" } })).status).toBe(422)
    expect((await scion.request("POST", `/v1/environments/${env.environment_id}/db-provider-api-key`, { token: tokens.owner, body: { api_key: "short" } })).status).toBe(422)
    expect((await scion.request("POST", `/v1/environments/${env.environment_id}/db-provider-api-key`, { token: tokens.owner, body: {} })).status).toBe(422)
  })

  it("without a token every endpoint is 401", async () => {
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`)).status).toBe(401)
    expect((await scion.request("POST", "/v1/environments", { body: envBody() })).status).toBe(401)
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { body: { environment_id: "env_x", aws_account_id: "123456789012" } })).status).toBe(401)
    expect((await scion.request("PATCH", "/v1/environments/aws-account-connections/aac_x", { body: { role_arn: "a", external_id: "b" } })).status).toBe(401)
    expect((await scion.request("POST", "/v1/environments/env_x/db-provider-api-key", { body: { api_key: "0123456789" } })).status).toBe(401)
  })

  it("GET lists the org's environments; every role reads; non-members and other orgs' keys get 403", async () => {
    const env = shared
    for (const role of ["viewer", "member", "admin", "owner"] as const) {
      const list = await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: tokens[role] })
      expect(list.status, role).toBe(200)
      expect(list.body.environments.map((e: { environment_id: string }) => e.environment_id)).toContain(env.environment_id)
    }
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: strangerToken })).status).toBe(403)
    const otherKey = await createApiKey(scion, strangerToken, otherOrgId, { role_id: "role_org_owner" })
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: otherKey.secret })).status).toBe(403)
    const own = await scion.request("GET", `/v1/environments?org_id=${otherOrgId}`, { token: otherKey.secret })
    expect(own.status).toBe(200)
    expect(own.body).toEqual({ environments: [] })
  })

  it("role by role: environments.manage (admin, owner) creates, links, connects and rotates; viewer and member get 403", async () => {
    const env = shared
    const expected: Record<RoleKey, number> = { viewer: 403, member: 403, admin: 200, owner: 200 }
    for (const role of ["viewer", "member", "admin", "owner"] as const) {
      const created = await create(tokens[role], envBody())
      expect(created.status, `${role} create`).toBe(expected[role] === 200 ? 201 : 403)
      if (created.status === 403) expect(created.body.detail).toContain("environments.manage")
      const link = await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens[role], body: { environment_id: env.environment_id, aws_account_id: "123456789012" } })
      expect(link.status, `${role} link`).toBe(expected[role])
      const rotate = await scion.request("POST", `/v1/environments/${env.environment_id}/db-provider-api-key`, { token: tokens[role], body: { api_key: `dbp_${role}_0123456789` } })
      expect(rotate.status, `${role} rotate`).toBe(expected[role])
    }
    const link = (await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens.owner, body: { environment_id: env.environment_id, aws_account_id: "123456789012" } })).body
    const roleArn = "arn:aws:iam::123456789012:role/Scion"
    for (const role of ["viewer", "member", "admin", "owner"] as const) {
      const patch = await scion.request("PATCH", `/v1/environments/aws-account-connections/${link.aws_account_connection.aws_account_connection_id}`, {
        token: tokens[role],
        body: { role_arn: roleArn, external_id: link.external_id }
      })
      expect(patch.status, `${role} connect: ${scion.explain(patch)}`).toBe(expected[role])
      if (expected[role] === 200) expect(patch.body, role).toMatchObject({ status: "connected", role_arn: roleArn })
    }
  })

  it("API keys: an admin key manages, a member key and a read-scoped key only read, another org's key sees 404", async () => {
    const adminKey = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_admin" })
    const byKey = await create(adminKey.secret, envBody())
    expect(byKey.status, scion.explain(byKey)).toBe(201)
    // An admin key scoped to environments only still passes the plan check (the unit asks billing as itself).
    const scoped = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_admin", scopes: ["environments.manage"] })
    expect((await create(scoped.secret, envBody())).status).toBe(201)
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: scoped.secret })).status).toBe(403)
    const memberKey = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_member" })
    expect((await create(memberKey.secret, envBody())).status).toBe(403)
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: memberKey.secret })).status).toBe(200)
    const reader = await createApiKey(scion, tokens.owner, orgId, { role_id: "role_org_admin", scopes: ["environments.read"] })
    expect((await create(reader.secret, envBody())).status).toBe(403)
    expect((await create(adminKey.secret, { ...envBody(), org_id: otherOrgId })).status).toBe(403)

    const otherKey = await createApiKey(scion, strangerToken, otherOrgId, { role_id: "role_org_owner" })
    const id = byKey.body.environment_id
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { token: otherKey.secret, body: { environment_id: id, aws_account_id: "123456789012" } })).status).toBe(404)
    expect((await scion.request("POST", `/v1/environments/${id}/db-provider-api-key`, { token: otherKey.secret, body: { api_key: "dbp_0123456789" } })).status).toBe(404)
  })

  it("aws-setup-link answers a CloudFormation quick-create link; PATCH validates the role ARN, account and external id", async () => {
    const env = await newEnvironment({ region: "eu-west-1" })
    const response = await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens.admin, body: { environment_id: env.environment_id, aws_account_id: "123456789012" } })
    expect(response.status, scion.explain(response)).toBe(200)
    const { url, external_id, aws_account_connection } = response.body
    expect(url).toMatch(/^https:\/\/console\.aws\.amazon\.com\/cloudformation\/home\?region=eu-west-1#\/stacks\/quickcreate\?/)
    const params = new URLSearchParams(url.split("#/stacks/quickcreate?")[1])
    expect(params.get("templateURL")).toMatch(/^https:\/\//)
    expect(params.get("param_ExternalId")).toBe(external_id)
    expect(external_id).toMatch(/^scion-/)
    expect(aws_account_connection).toEqual({
      aws_account_connection_id: expect.stringMatching(/^aac_/),
      environment_id: env.environment_id,
      aws_account_id: "123456789012",
      role_arn: null,
      status: "pending",
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/),
      connected_at: null
    })
    const path = `/v1/environments/aws-account-connections/${aws_account_connection.aws_account_connection_id}`
    const patch = (body: Record<string, unknown>, token = tokens.admin) => scion.request("PATCH", path, { token, body })
    const arn = "arn:aws:iam::123456789012:role/scion/ScionCrossAccountRole"

    for (const bad of ["arn:aws:iam::123456789012:user/alice", "arn:aws:iam::1234:role/x", "role/x", "arn:aws:s3:::bucket"]) {
      const refused = await patch({ role_arn: bad, external_id })
      expect(refused.status, bad).toBe(400)
      expect(typeof refused.body.detail).toBe("string")
    }
    const otherAccount = await patch({ role_arn: "arn:aws:iam::999999999999:role/x", external_id })
    expect(otherAccount.status).toBe(400)
    expect(otherAccount.body.detail).toContain("999999999999")
    const wrongExternal = await patch({ role_arn: arn, external_id: "scion-not-the-one" })
    expect(wrongExternal.status).toBe(400)
    expect(wrongExternal.body.detail).toContain("external_id")

    const connected = await patch({ role_arn: arn, external_id })
    expect(connected.status, scion.explain(connected)).toBe(200)
    expect(connected.body).toMatchObject({ status: "connected", role_arn: arn, connected_at: expect.stringMatching(/Z$/) })
    const list = await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: tokens.viewer })
    const listed = list.body.environments.find((e: { environment_id: string }) => e.environment_id === env.environment_id)
    expect(listed.aws_account_connection).toEqual(connected.body)

    expect((await patch({ role_arn: arn, external_id }, strangerToken)).status).toBe(404)
    expect((await scion.request("PATCH", "/v1/environments/aws-account-connections/aac_unknown", { token: tokens.admin, body: { role_arn: arn, external_id } })).status).toBe(404)
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { token: strangerToken, body: { environment_id: env.environment_id, aws_account_id: "123456789012" } })).status).toBe(404)
    expect((await scion.request("POST", "/v1/environments/aws-setup-link", { token: tokens.admin, body: { environment_id: "env_unknown", aws_account_id: "123456789012" } })).status).toBe(404)
  })

  it("rotating the DB-provider API key: never returned, replaced on rotation, only ciphertext in the database", async () => {
    const env = await newEnvironment()
    const path = `/v1/environments/${env.environment_id}/db-provider-api-key`
    const firstKey = `dbp_first_${Date.now()}_WXYZ`
    const secondKey = `dbp_second_${Date.now()}_LAST`
    const first = await scion.request("POST", path, { token: tokens.admin, body: { api_key: firstKey } })
    expect(first.status, scion.explain(first)).toBe(200)
    expect(first.body).toEqual({
      environment_id: env.environment_id,
      db_provider_api_key: { fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/), last4: "WXYZ", rotated_at: expect.stringMatching(/Z$/) }
    })
    expect(JSON.stringify(first.body)).not.toContain(firstKey)
    const second = await scion.request("POST", path, { token: tokens.owner, body: { api_key: secondKey } })
    expect(second.status).toBe(200)
    expect(second.body.db_provider_api_key.last4).toBe("LAST")
    expect(second.body.db_provider_api_key.fingerprint).not.toBe(first.body.db_provider_api_key.fingerprint)
    expect(JSON.stringify(second.body)).not.toContain(firstKey)
    expect(JSON.stringify(second.body)).not.toContain(secondKey)

    const list = await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: tokens.owner })
    const listed = list.body.environments.find((e: { environment_id: string }) => e.environment_id === env.environment_id)
    expect(listed.db_provider_api_key).toEqual(second.body.db_provider_api_key)
    expect(JSON.stringify(list.body)).not.toContain(secondKey)

    // The connector's tables hold one envelope for the environment, under the configured key id, and no plaintext.
    const client = new pg.Client({ connectionString: scion.databaseUrl })
    await client.connect()
    try {
      const rows = await client.query("select envelope, key_id from connector.secrets where owner_id = $1", [env.environment_id])
      expect(rows.rows).toHaveLength(1)
      expect(rows.rows[0].key_id).toBe(scion.secretKeys.split(":")[0])
      expect(Object.keys(rows.rows[0].envelope).sort()).toEqual(["ciphertext", "iv", "key_id", "tag", "v", "wrapped_key"])
      const everything = JSON.stringify((await client.query("select * from connector.secrets")).rows) + JSON.stringify((await client.query("select * from connector.environments")).rows)
      expect(everything).not.toContain(firstKey)
      expect(everything).not.toContain(secondKey)
    } finally {
      await client.end()
    }
    // And the connector's log never printed it: its lines for both rotations are there, without the key.
    const rotationLines = () => scion.connector.output().split("\n").filter((line) => line.includes("db provider api key rotated") && line.includes(env.environment_id))
    await waitFor("the connector's log lines for both rotations", async () => rotationLines().length >= 2, 10_000)
    expect(rotationLines()).toHaveLength(2)
    expect(scion.connector.output()).not.toContain(secondKey)
    expect(scion.connector.output()).not.toContain(firstKey)
    expect((await scion.request("POST", "/v1/environments/env_unknown/db-provider-api-key", { token: tokens.owner, body: { api_key: secondKey } })).status).toBe(404)
    expect((await scion.request("POST", path, { token: strangerToken, body: { api_key: secondKey } })).status).toBe(404)
  })

  it("the free plan allows one environment: the next create is 403 naming the limit and the plan", async () => {
    const freeOrg = (await createOrg(scion, tokens.owner, uniqueName("Free Org"))).org_id
    expect((await create(tokens.owner, { ...envBody(), org_id: freeOrg })).status).toBe(201)
    const refused = await create(tokens.owner, { ...envBody(), org_id: freeOrg })
    expect(refused.status).toBe(403)
    expect(refused.body.detail).toContain("free")
    expect(refused.body.detail).toContain("1 environments")
  })

  // Last: stops the billing process.
  it("creates answer 503 while billing is unreachable; reads still work", async () => {
    await scion.billing.stop()
    const refused = await create(tokens.owner, envBody())
    expect(refused.status).toBe(503)
    expect((await scion.request("GET", `/v1/environments?org_id=${orgId}`, { token: tokens.owner })).status).toBe(200)
  })
})
