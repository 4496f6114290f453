/**
 * Connectors through the gateway, with identity, billing, the connector unit and the gateway as
 * separate processes, against two throwaway source clusters (wal_level=logical and replica):
 * preflight (pass, fail, 400s, 403), the create gate (422 with the report, nothing stored),
 * self_managed and code-host creates, list filters, get, other orgs (404), PUT re-testing,
 * decrypted connection details for updaters only, and only ciphertext at rest.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { addMember, createOrg, type RoleKey } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { signUp, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let logical: SourceCluster
let replica: SourceCluster
let orgId: string
let otherOrgId: string
const tokens = {} as Record<RoleKey, string>
let strangerToken: string

beforeAll(async () => {
  ;[scion, logical, replica] = await Promise.all([startScion(), startSourceCluster({ logical: true }), startSourceCluster({ logical: false })])
  await logical.query("create table public.accounts (id int primary key, email text); create table public.events (payload jsonb)")
  const owner = await signUp(scion, "owner")
  tokens.owner = owner.token
  orgId = (await createOrg(scion, owner.token, "Connector Org")).org_id
  for (const role of ["viewer", "member", "admin"] as const) tokens[role] = (await addMember(scion, owner.token, orgId, role)).token
  const stranger = await signUp(scion, "stranger")
  strangerToken = stranger.token
  otherOrgId = (await createOrg(scion, strangerToken, "Other Org")).org_id
  // The free plan allows three connectors; the tests make more, so the org is on team.
  await waitFor("billing to set the org up", async () => {
    const selected = await scion.request("POST", `/v1/orgs/${orgId}/billing/subscriptions`, { token: tokens.owner, body: { plan_id: "team" } })
    return selected.status === 200
  })
}, 180_000)
afterAll(async () => {
  await Promise.all([scion?.stop(), logical?.stop(), replica?.stop()])
})

const preflight = (token: string, body: Record<string, unknown>) => scion.request("POST", "/v1/connectors/preflight", { token, body: { org_id: orgId, ...body } })
const create = (token: string, body: Record<string, unknown>) => scion.request("POST", "/v1/connectors", { token, body: { org_id: orgId, ...body } })
const pgBody = (cluster: SourceCluster, extra: Record<string, unknown> = {}) => ({ service_name: "postgresql", connection_details: cluster.details(), ...extra })
const github = { service_name: "github", connection_details: { organization: "scion-dev", access_token: "ghp_e2eSecretToken" } }

/** Rows of the connector unit's schema in the metadata database. */
const metadata = async (sql: string, params: Array<unknown> = []) => {
  const client = new pg.Client({ connectionString: scion.databaseUrl })
  await client.connect()
  try {
    return (await client.query(sql, params)).rows
  } finally {
    await client.end()
  }
}

const statuses = (report: { checks: Array<{ id: string; status: string }> }) => Object.fromEntries(report.checks.map((c) => [c.id, c.status]))

describe("POST /v1/connectors/preflight", () => {
  it("200 with every check passing on a logical source (a table without a key is a warning); nothing is persisted", async () => {
    const stored = () => metadata("select (select count(*) from connector.connectors)::int as connectors, (select count(*) from connector.secrets)::int as secrets")
    const before = await stored()
    const response = await preflight(tokens.member, pgBody(logical))
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toMatchObject({ preflight_pass: true, provider: "vanilla" })
    expect(statuses(response.body)).toEqual({
      reachable: "pass",
      authentication: "pass",
      server_version: "pass",
      wal_level: "pass",
      replication_slots: "pass",
      wal_senders: "pass",
      replication_privilege: "pass",
      schema_select: "pass",
      publication_rights: "pass",
      replica_identity: "warn",
      ddl_capture: "pass"
    })
    for (const check of response.body.checks) expect(Object.keys(check).sort()).toEqual(["id", "message", "remedy", "status"])
    expect(JSON.stringify(response.body)).not.toContain(logical.password)
    // A failing probe stores nothing either.
    expect((await preflight(tokens.member, pgBody(replica))).body.preflight_pass).toBe(false)
    expect(await stored()).toEqual(before)
    // Nor is the source touched: no publication, slot or Scion schema appears on it.
    expect((await logical.query("select (select count(*) from pg_publication)::int as publications, (select count(*) from pg_replication_slots)::int as slots, (select count(*) from pg_namespace where nspname = 'scion')::int as schemas")).rows[0]).toEqual({ publications: 0, slots: 0, schemas: 0 })
  })

  it("200 with preflight_pass false when wal_level is replica, a wrong password or a closed port", async () => {
    const replicaReport = await preflight(tokens.member, pgBody(replica))
    expect(replicaReport.status).toBe(200)
    expect(replicaReport.body.preflight_pass).toBe(false)
    expect(replicaReport.body.checks.find((c: { id: string }) => c.id === "wal_level")).toMatchObject({ status: "fail", remedy: expect.stringContaining("wal_level = logical") })
    const wrong = await preflight(tokens.member, { service_name: "postgresql", connection_details: logical.details({ password: "wrong-password-123" }) })
    expect(wrong.status).toBe(200)
    expect(statuses(wrong.body)).toEqual({ reachable: "pass", authentication: "fail" })
    expect(JSON.stringify(wrong.body)).not.toContain("wrong-password-123")
    const closed = await preflight(tokens.member, { service_name: "postgresql", connection_details: logical.details({ port: 1 }) })
    expect(statuses(closed.body)).toEqual({ reachable: "fail" })
  })

  it("400 for an unsupported service, invalid details, or an environment with an active private link and no private_link_id", async () => {
    const mysql = await preflight(tokens.member, { service_name: "mysql", connection_details: {} })
    expect(mysql.status).toBe(400)
    expect(mysql.body.detail).toMatch(/not supported/)
    const missing = await preflight(tokens.member, { service_name: "postgresql", connection_details: { host: "db.example.com", password: "p4ss-do-not-echo", extra: true } })
    expect(missing.status).toBe(400)
    expect(typeof missing.body.detail).toBe("string")
    expect(missing.body.detail).toMatch(/database is required/)
    expect(missing.body.detail).toMatch(/extra is not a field/)
    expect(missing.body.detail).not.toContain("p4ss-do-not-echo")
    expect((await preflight(tokens.member, { service_name: "postgresql", connection_details: "postgres://x" })).status).toBe(400)
    const environment = await scion.request("POST", "/v1/environments", { token: tokens.admin, body: { org_id: orgId, name: "private", cloud: "aws", region: "us-east-1", private_link_id: "vpce-svc-e2e" } })
    expect(environment.status, scion.explain(environment)).toBe(201)
    const noLink = await preflight(tokens.member, pgBody(logical, { environment_id: environment.body.environment_id }))
    expect(noLink.status).toBe(400)
    expect(noLink.body.detail).toMatch(/private_link_id is required/)
    const withLink = await preflight(tokens.member, pgBody(logical, { environment_id: environment.body.environment_id, private_link_id: "vpce-svc-e2e" }))
    expect(withLink.status).toBe(200)
    // Malformed bodies are the edge's 422.
    expect((await scion.request("POST", "/v1/connectors/preflight", { token: tokens.member, body: { connection_details: {} } })).status).toBe(422)
  })

  it("403 without connectors.create (viewer) and for a non-member; 401 without a token", async () => {
    expect((await preflight(tokens.viewer, pgBody(logical))).status).toBe(403)
    expect((await preflight(strangerToken, pgBody(logical))).status).toBe(403)
    expect((await scion.request("POST", "/v1/connectors/preflight", { body: pgBody(logical) })).status).toBe(401)
  })
})

describe("connectors", () => {
  it("POST with a failing gate is 422 with the full report, and nothing is stored", async () => {
    const before = await metadata("select count(*)::int as n from connector.secrets where name = 'connection_details'")
    const response = await create(tokens.member, pgBody(replica, { name: "refused" }))
    expect(response.status, scion.explain(response)).toBe(422)
    expect(response.body.detail).toMatch(/wal_level/)
    expect(response.body.preflight).toMatchObject({ preflight_pass: false, provider: "vanilla" })
    expect(response.body.preflight.checks.find((c: { id: string }) => c.id === "wal_level")).toMatchObject({ status: "fail" })
    expect((await metadata("select count(*)::int as n from connector.secrets where name = 'connection_details'"))[0].n).toBe(before[0].n)
    expect(await metadata("select id from connector.connectors where name = 'refused'")).toEqual([])
    const list = await scion.request("GET", `/v1/connectors?org_id=${orgId}`, { token: tokens.member })
    expect(list.body.connectors.map((c: { name: string }) => c.name)).not.toContain("refused")
  })

  it("POST with a malformed body is 422 with {loc, msg, type} per fault (missing connection_details 400), before any gate, and nothing is stored", async () => {
    const before = await metadata("select count(*)::int as n from connector.connectors")
    const wrongType = await create(tokens.member, pgBody(logical, { name: 5 }))
    expect(wrongType.status, scion.explain(wrongType)).toBe(422)
    expect(wrongType.body.detail).toEqual(expect.arrayContaining([expect.objectContaining({ loc: ["body", "name"], msg: expect.any(String), type: expect.any(String) })]))
    const wrongOrg = await create(tokens.member, pgBody(logical, { org_id: 42 }))
    expect(wrongOrg.status).toBe(422)
    expect(wrongOrg.body.detail.map((d: { loc: Array<string> }) => d.loc.join("."))).toContain("body.org_id")
    // connection_details are checked per service_name, past the edge: missing, they are a 400 that names them.
    const missing = await create(tokens.member, { service_name: "postgresql" })
    expect(missing.status).toBe(400)
    expect(missing.body.detail).toMatch(/connection_details/)
    expect(await metadata("select count(*)::int as n from connector.connectors")).toEqual(before)
  })

  it("POST creates a PostgreSQL connector behind a passing gate: the row, no schema_structure, no secrets", async () => {
    const response = await create(tokens.member, pgBody(logical, { name: "  primary  " }))
    expect(response.status, scion.explain(response)).toBe(200)
    expect(response.body).toEqual({
      connector_id: expect.stringMatching(/^con_/),
      org_id: orgId,
      project_id: null,
      name: "primary",
      service_name: "postgresql",
      connector_category: "database",
      schema_version: 0,
      selection_schema_version: null,
      selected_schema_version: 0,
      last_indexed_version: 0,
      selected_entity_paths: [],
      selected_schema_structure: null,
      indexing_status: "not_indexed",
      branching_engine_status: "not_set_up",
      byoc: null,
      use_environment: false,
      private_link_id: null,
      environment_id: null,
      replica_identity_preflight: null,
      needs_reselection: false,
      needs_reindex: false,
      source_provider: "vanilla",
      can_update: true,
      can_delete: false,
      deletion_locked: false,
      // No engine yet: nothing replicates.
      replication: null,
      created_by: expect.stringMatching(/^usr_/),
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/)
    })
    const id = response.body.connector_id
    // Only ciphertext at rest: neither the password nor the host is readable in the metadata database.
    const rows = await metadata("select envelope::text as envelope, fingerprint, last4 from connector.secrets where owner_id = $1", [id])
    expect(rows).toHaveLength(1)
    expect(rows[0].envelope).not.toContain(logical.password)
    expect(rows[0].envelope).not.toContain("127.0.0.1")
    expect(JSON.parse(rows[0].envelope)).toMatchObject({ v: 1, key_id: scion.secretKeys.split(":")[0] })
    const row = await metadata("select row_to_json(c)::text as row from connector.connectors c where id = $1", [id])
    expect(row[0].row).not.toContain(logical.password)

    const got = await scion.request("GET", `/v1/connectors/${id}`, { token: tokens.viewer })
    expect(got.status).toBe(200)
    expect(got.body).toEqual({ ...response.body, schema_structure: null, can_update: false, can_delete: false })
    expect(JSON.stringify(got.body)).not.toContain(logical.password)
    const asAdmin = await scion.request("GET", `/v1/connectors/${id}`, { token: tokens.admin })
    expect(asAdmin.body).toMatchObject({ can_update: true, can_delete: true })
  })

  it("byoc self_managed skips the gate; a code host is created without a probe; bad byoc is 400; viewers get 403", async () => {
    const selfManaged = await create(tokens.member, pgBody(replica, { byoc: "self_managed" }))
    expect(selfManaged.status, scion.explain(selfManaged)).toBe(200)
    expect(selfManaged.body).toMatchObject({ byoc: "self_managed", source_provider: null, name: "postgres@127.0.0.1" })
    const code = await create(tokens.member, github)
    expect(code.status, scion.explain(code)).toBe(200)
    expect(code.body).toMatchObject({ service_name: "github", connector_category: "code_host", name: "scion-dev" })
    expect(JSON.stringify(code.body)).not.toContain("ghp_e2eSecretToken")
    for (const body of [pgBody(logical, { byoc: "cloud" }), { service_name: "github", connection_details: { organization: "x" } }]) {
      const refused = await create(tokens.member, body)
      expect(refused.status).toBe(400)
      expect(typeof refused.body.detail).toBe("string")
    }
    expect((await create(tokens.viewer, github)).status).toBe(403)
    expect((await create(strangerToken, github)).status).toBe(403)
  })

  it("environment-based creates: placement errors are 400 (string detail), the gate still runs (422, nothing stored), and a placed connector says where", async () => {
    const env = async (token: string, org: string, body: Record<string, unknown>) => {
      const response = await scion.request("POST", "/v1/environments", { token, body: { org_id: org, cloud: "aws", region: "eu-west-1", ...body } })
      expect(response.status, scion.explain(response)).toBe(201)
      return response.body.environment_id as string
    }
    const linked = await env(tokens.admin, orgId, { name: "linked", private_link_id: "vpce-svc-placed" })
    const plain = await env(tokens.admin, orgId, { name: "plain" })
    const foreign = await env(strangerToken, otherOrgId, { name: "theirs" })
    const placementErrors = [
      pgBody(logical, { use_environment: true }),
      pgBody(logical, { byoc: "environment" }),
      pgBody(logical, { use_environment: true, environment_id: foreign }),
      pgBody(logical, { use_environment: true, environment_id: "env_nope" }),
      pgBody(logical, { use_environment: true, environment_id: linked }),
      pgBody(logical, { use_environment: true, environment_id: linked, private_link_id: "vpce-svc-other" })
    ]
    for (const body of placementErrors) {
      const refused = await create(tokens.member, { ...body, name: "misplaced" })
      expect(refused.status, JSON.stringify(body)).toBe(400)
      expect(typeof refused.body.detail).toBe("string")
    }
    // Rule 1: the gate runs for environment-based creates too, before any row or secret.
    const secretsBefore = await metadata("select count(*)::int as n from connector.secrets where name = 'connection_details'")
    const gated = await create(tokens.member, pgBody(replica, { use_environment: true, environment_id: plain, name: "gated-in-env" }))
    expect(gated.status, scion.explain(gated)).toBe(422)
    expect(gated.body.preflight).toMatchObject({ preflight_pass: false })
    expect(await metadata("select id from connector.connectors where name in ('misplaced', 'gated-in-env')")).toEqual([])
    expect((await metadata("select count(*)::int as n from connector.secrets where name = 'connection_details'"))[0].n).toBe(secretsBefore[0].n)
    const placed = await create(tokens.member, pgBody(logical, { use_environment: true, environment_id: linked, private_link_id: "vpce-svc-placed", name: "placed" }))
    expect(placed.status, scion.explain(placed)).toBe(200)
    expect(placed.body).toMatchObject({ use_environment: true, environment_id: linked, private_link_id: "vpce-svc-placed", byoc: null, source_provider: "vanilla" })
    expect((await scion.request("GET", `/v1/connectors/${placed.body.connector_id}`, { token: tokens.viewer })).body).toMatchObject({ environment_id: linked, use_environment: true })
  })

  it("a connector is placed in a project of its own org only: another org's or an unknown project is 400", async () => {
    const project = async (token: string, org: string) => {
      const made = await scion.request("POST", "/v1/projects", { token, body: { org_id: org, name: `placed ${Math.random().toString(36).slice(2, 8)}` } })
      expect(made.status, scion.explain(made)).toBe(201)
      return made.body.project_id as string
    }
    const ours = await project(tokens.admin, orgId)
    const theirs = await project(strangerToken, otherOrgId)
    for (const projectId of [theirs, "prj_unknown"]) {
      const refused = await create(tokens.member, pgBody(logical, { project_id: projectId, name: "astray" }))
      expect(refused.status, projectId).toBe(400)
      expect(refused.body.detail).toMatch(/is not a project of org/)
    }
    expect(await metadata("select id from connector.connectors where name = 'astray'")).toEqual([])
    const placed = await create(tokens.member, pgBody(logical, { project_id: ours, name: "in-project" }))
    expect(placed.status, scion.explain(placed)).toBe(200)
    expect(placed.body.project_id).toBe(ours)
  })

  it("GET lists the org's connectors with filters; org_id is required; other orgs see nothing of them", async () => {
    const all = await scion.request("GET", `/v1/connectors?org_id=${orgId}`, { token: tokens.viewer })
    expect(all.status).toBe(200)
    expect(Object.keys(all.body)).toEqual(["connectors"])
    expect(all.body.connectors.length).toBeGreaterThanOrEqual(3)
    for (const c of all.body.connectors) expect(c).not.toHaveProperty("connection_details")
    const codeHosts = await scion.request("GET", `/v1/connectors?org_id=${orgId}&connector_category=code_host`, { token: tokens.viewer })
    expect(codeHosts.body.connectors.map((c: { service_name: string }) => c.service_name)).toEqual(["github"])
    const postgres = await scion.request("GET", `/v1/connectors?org_id=${orgId}&service_name=postgresql`, { token: tokens.viewer })
    expect(new Set(postgres.body.connectors.map((c: { service_name: string }) => c.service_name))).toEqual(new Set(["postgresql"]))
    expect((await scion.request("GET", "/v1/connectors", { token: tokens.viewer })).status).toBe(422)
    expect((await scion.request("GET", `/v1/connectors?org_id=${orgId}`, { token: strangerToken })).status).toBe(403)
    expect((await scion.request("GET", `/v1/connectors?org_id=${otherOrgId}`, { token: strangerToken })).body).toEqual({ connectors: [] })
    const id = all.body.connectors[0].connector_id
    expect((await scion.request("GET", `/v1/connectors/${id}`, { token: strangerToken })).status).toBe(404)
    expect((await scion.request("GET", "/v1/connectors/con_missing", { token: tokens.viewer })).status).toBe(404)
  })

  it("GET connection-details answers the decrypted details to updaters only", async () => {
    const created = await create(tokens.member, pgBody(logical, { name: "details" }))
    const id = created.body.connector_id
    const details = await scion.request("GET", `/v1/connectors/${id}/connection-details`, { token: tokens.member })
    expect(details.status).toBe(200)
    expect(details.body).toEqual({ ...logical.details(), databases: ["postgres"] })
    expect((await scion.request("GET", `/v1/connectors/${id}/connection-details`, { token: tokens.viewer })).status).toBe(403)
    expect((await scion.request("GET", `/v1/connectors/${id}/connection-details`, { token: strangerToken })).status).toBe(404)
  })

  it("PUT re-tests changed details (422 with the report, nothing changed) and resets indexing_status", async () => {
    const created = await create(tokens.member, pgBody(logical, { name: "to-update" }))
    const id = created.body.connector_id
    await metadata("update connector.connectors set indexing_status = 'indexed' where id = $1", [id])
    const put = (token: string, body: Record<string, unknown>) => scion.request("PUT", `/v1/connectors/${id}`, { token, body })

    const malformed = await put(tokens.member, { name: ["renamed"] })
    expect(malformed.status).toBe(422)
    expect(malformed.body.detail[0]).toMatchObject({ loc: ["body", "name"], msg: expect.any(String), type: expect.any(String) })
    const renamed = await put(tokens.member, { name: "renamed" })
    expect(renamed.status, scion.explain(renamed)).toBe(200)
    expect(renamed.body).toMatchObject({ name: "renamed", indexing_status: "indexed", schema_structure: null })
    const refused = await put(tokens.member, { connection_details: replica.details() })
    expect(refused.status).toBe(422)
    expect(refused.body.preflight.preflight_pass).toBe(false)
    expect((await scion.request("GET", `/v1/connectors/${id}/connection-details`, { token: tokens.member })).body.port).toBe(logical.port)
    const changed = await put(tokens.member, { connection_details: logical.details({ sslmode: "prefer" }) })
    expect(changed.status, scion.explain(changed)).toBe(200)
    expect(changed.body).toMatchObject({ indexing_status: "not_indexed", source_provider: "vanilla" })
    expect((await scion.request("GET", `/v1/connectors/${id}/connection-details`, { token: tokens.member })).body.sslmode).toBe("prefer")

    for (const body of [{}, { connection_details: { host: "only" } }]) {
      const refused = await put(tokens.member, body)
      expect(refused.status, JSON.stringify(body)).toBe(400)
      expect(typeof refused.body.detail).toBe("string")
    }
    expect((await put(tokens.viewer, { name: "viewer" })).status).toBe(403)
    expect((await put(strangerToken, { name: "stranger" })).status).toBe(404)
  })

  it("the plan's connector limit answers 403 (free allows three)", async () => {
    await waitFor("billing to set the other org up", async () =>
      (await scion.request("GET", `/v1/orgs/${otherOrgId}/billing/subscription`, { token: strangerToken })).status === 200
    )
    const mine = (body: Record<string, unknown>) => scion.request("POST", "/v1/connectors", { token: strangerToken, body: { org_id: otherOrgId, ...body } })
    for (const organization of ["one", "two", "three"]) {
      const created = await mine({ service_name: "github", connection_details: { organization, access_token: "t" } })
      expect(created.status, scion.explain(created)).toBe(200)
    }
    const refused = await mine({ service_name: "github", connection_details: { organization: "four", access_token: "t" } })
    expect(refused.status).toBe(403)
    expect(refused.body.detail).toMatch(/free plan allows 3 connectors/)
  })

  it("readiness evidence pages by default: 500 checks and 50 attempts, newest first", async () => {
    // Evidence of 60 attempts of 10 checks each, a minute apart, recorded as setups record it.
    const [{ id }] = await metadata("select id from connector.connectors where org_id = $1 and name = 'renamed'", [orgId])
    await metadata(
      `insert into connector.readiness_checks (connector_id, attempt_id, check_name, table_path, status, message, pod_name, checked_at)
       select $1, 'att_paged_' || lpad(a::text, 2, '0'), 'row_count_matches', 'postgres.public.t' || c, 'pass', c || ' rows on both sides', 'local-engine-paged',
              timestamptz '2026-01-01' + a * interval '1 minute'
       from generate_series(1, 60) a, generate_series(1, 10) c`,
      [id]
    )
    const checks = await scion.request("GET", `/v1/connectors/${id}/readiness-checks`, { token: tokens.viewer })
    expect(checks.status, scion.explain(checks)).toBe(200)
    expect(checks.body.checks).toHaveLength(500)
    expect(checks.body.checks[0].attempt_id).toBe("att_paged_60")
    expect(checks.body.checks.at(-1).attempt_id).toBe("att_paged_11")
    const attempts = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.viewer })
    expect(attempts.status).toBe(200)
    expect(attempts.body.attempts).toHaveLength(50)
    expect(attempts.body.attempts.map((a: { attempt_id: string }) => a.attempt_id)).toEqual(Array.from({ length: 50 }, (_, i) => `att_paged_${60 - i}`))
    expect(attempts.body.attempts[0]).toMatchObject({ total_checks: 10, passed_checks: 10, failed_checks: 0, pod_name: "local-engine-paged" })
  })
})
