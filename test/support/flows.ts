import { expect } from "vitest"
import pg from "pg"
import { signUp, waitFor, type Scion } from "./system.js"

export type RoleKey = "viewer" | "member" | "admin" | "owner"

export const createOrg = async (scion: Scion, token: string, name: string) => {
  const response = await scion.request("POST", "/v1/orgs", { token, body: { name } })
  expect(response.status, scion.explain(response)).toBe(201)
  return response.body as { org_id: string; name: string }
}

/** Invites a new user into the org with a role and has them accept; returns their session. */
export const addMember = async (scion: Scion, ownerToken: string, orgId: string, role: RoleKey, label: string = role) => {
  const user = await signUp(scion, label)
  const invite = await scion.request("POST", `/v1/orgs/${orgId}/invite`, { token: ownerToken, body: { email: user.email, role_key: role } })
  expect(invite.status, scion.explain(invite)).toBe(200)
  const accept = await scion.request("POST", `/v1/invites/${invite.body.invite_token}/accept`, { token: user.token })
  expect(accept.status, scion.explain(accept)).toBe(200)
  return user
}

export const createApiKey = async (scion: Scion, token: string, orgId: string, body: Record<string, unknown> = {}) => {
  const response = await scion.request("POST", `/v1/orgs/${orgId}/api-keys`, { token, body: { name: "key", role_id: "role_org_member", ...body } })
  expect(response.status, scion.explain(response)).toBe(201)
  return response.body as { api_key_id: string; secret: string; [k: string]: unknown }
}

/** Polls an operation with waiting reads (GET …?wait=10) until it is completed or failed. */
export const settleOperation = async (scion: Scion, operationId: string, token: string, timeoutMillis = 120_000) => {
  for (let i = 0; i < Math.ceil(timeoutMillis / 10_000); i++) {
    const response = await scion.request("GET", `/v1/operations/${operationId}?wait=10`, { token })
    expect(response.status, scion.explain(response)).toBe(200)
    if (response.body.status === "completed" || response.body.status === "failed") return response.body
  }
  throw new Error(`operation ${operationId} did not end`)
}

/** One query on the system's metadata database (tests look behind the API with it). */
export const queryMetadata = async <R extends pg.QueryResultRow = any>(scion: Scion, sql: string, values: ReadonlyArray<unknown> = []) => {
  const client = new pg.Client({ connectionString: scion.databaseUrl })
  await client.connect()
  try {
    return (await client.query<R>(sql, [...values])).rows
  } finally {
    await client.end()
  }
}

export interface TeamOrg {
  readonly orgId: string
  /** A member of each role. */
  readonly tokens: Record<RoleKey, string>
  /** A user of another org (whose id is otherOrgId): other orgs' resources answer 404 to them. */
  readonly strangerToken: string
  readonly otherOrgId: string
}

/**
 * An org with a member of every role, on the team plan (the free plan's limits are smaller than
 * connector tests need), and a stranger in an org of their own.
 */
export const teamOrg = async (scion: Scion, name: string): Promise<TeamOrg> => {
  const owner = await signUp(scion, "owner")
  const orgId = (await createOrg(scion, owner.token, name)).org_id as string
  const tokens = { owner: owner.token } as Record<RoleKey, string>
  for (const role of ["viewer", "member", "admin"] as const) tokens[role] = (await addMember(scion, owner.token, orgId, role)).token
  const strangerToken = (await signUp(scion, "stranger")).token
  const otherOrgId = (await createOrg(scion, strangerToken, "Other Org")).org_id as string
  await waitFor("billing to set the org up", async () => {
    const selected = await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions`, { token: owner.token, body: { plan_id: "team" } })
    return selected.status === 200
  })
  return { orgId, tokens, strangerToken, otherOrgId }
}

/** A postgresql connector created through the API (200 expected); answers its id. */
export const createPostgresConnector = async (
  scion: Scion,
  input: { readonly token: string; readonly orgId: string; readonly details: Record<string, unknown>; readonly extra?: Record<string, unknown> }
) => {
  const response = await scion.request("POST", "/v1/connectors", {
    token: input.token,
    body: { org_id: input.orgId, service_name: "postgresql", connection_details: input.details, ...input.extra }
  })
  expect(response.status, scion.explain(response)).toBe(200)
  return response.body.connector_id as string
}
