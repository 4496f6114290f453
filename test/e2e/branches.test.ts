/**
 * Branches end to end, with every unit its own process (HTTP/2 gRPC, NATS JetStream), a real
 * source cluster and the connector's real engine: the REST rules of POST /v1/branch/create and
 * the branch endpoints, then branches cut from a ready engine and used with psql over TLS.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engineRecordOf, hasPgbouncer, readyConnector, queryEngine } from "../support/engine.js"
import { addMember, createOrg, queryMetadata, settleOperation } from "../support/flows.js"
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlp.js"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { freePort, healthServing, respawn, signUp, type Scion, startScion, startUnit, type UnitProcess, waitFor, psql } from "../support/system.js"

let scion: Scion
let otlp: OtlpReceiver
let owner: { token: string }
let orgId: string
let member: { token: string }
let viewer: { token: string }
let stranger: { token: string }
/** A connector whose engine was never set up (not ready to branch). */
let idleConnectorId: string

const create = (token: string, body: unknown, headers: Record<string, string> = {}) => scion.request("POST", "/v1/branch/create", { token, body, headers })

beforeAll(async () => {
  // The expiry sweeper looks every second here (30 s by default).
  // Info logs: the request-id test reads the branch unit's lines. Every process exports its
  // spans to the OTLP receiver below (a local stand-in for a collector, speaking OTLP/HTTP JSON).
  otlp = await startOtlpReceiver()
  scion = await startScion({
    env: {
      BRANCH_EXPIRY_SWEEP_INTERVAL: "1 second",
      LOG_LEVEL: "Info",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: "200",
      METRICS_REFRESH_INTERVAL: "1 second"
    },
    metrics: true
  })
  owner = await signUp(scion, "owner")
  orgId = (await createOrg(scion, owner.token, "Branching")).org_id
  member = await addMember(scion, owner.token, orgId, "member")
  viewer = await addMember(scion, owner.token, orgId, "viewer")
  stranger = await signUp(scion, "stranger")
  await createOrg(scion, stranger.token, "Elsewhere")
  const connector = await scion.request("POST", "/v1/connectors", {
    token: owner.token,
    body: {
      org_id: orgId,
      service_name: "postgresql",
      name: "idle",
      byoc: "self_managed",
      connection_details: { host: "127.0.0.1", port: 1, database: "app", username: "u", password: "p" }
    }
  })
  expect(connector.status, scion.explain(connector)).toBe(200)
  idleConnectorId = connector.body.connector_id
}, 120_000)

afterAll(async () => {
  await scion?.stop()
  await otlp?.stop()
})

describe("POST /v1/branch/create: validation, visibility and state", () => {
  it("answers 400 with a string detail for missing fields and postgresql", async () => {
    for (const body of [{}, { name: "a", service_type: "postgres" }, { connector_id: idleConnectorId, service_type: "postgres" }, { connector_id: idleConnectorId, name: "a" }]) {
      const response = await create(member.token, body)
      expect(response.status, JSON.stringify(body)).toBe(400)
      expect(typeof response.body.detail).toBe("string")
      expect(response.body.detail).toMatch(/is required/)
    }
    const postgresql = await create(member.token, { connector_id: idleConnectorId, name: "a", service_type: "postgresql" })
    expect(postgresql.status).toBe(400)
    expect(postgresql.body.detail).toMatch(/"postgres"/)
    const badName = await create(member.token, { connector_id: idleConnectorId, name: "Not A Name!", service_type: "postgres" })
    expect(badName.status).toBe(400)
    expect(badName.body.detail).toMatch(/name must be/)
    const badKey = await create(member.token, { connector_id: idleConnectorId, name: "a", service_type: "postgres" }, { "x-idempotency-key": "has space" })
    expect(badKey.status).toBe(400)
    // Wrong JSON types are the interface's 422 validation shape.
    const wrongType = await create(member.token, { connector_id: idleConnectorId, name: 5, service_type: "postgres" })
    expect(wrongType.status).toBe(422)
    expect(wrongType.body.detail[0].loc).toEqual(["body", "name"])
  })

  it("answers 401 without a token, 404 for unknown and other orgs' connectors, 403 for a viewer, 422 when the engine is not ready", async () => {
    expect((await scion.request("POST", "/v1/branch/create", { body: { connector_id: idleConnectorId, name: "a", service_type: "postgres" } })).status).toBe(401)
    const unknown = await create(member.token, { connector_id: "con_doesnotexist", name: "a", service_type: "postgres" })
    expect(unknown.status, scion.explain(unknown)).toBe(404)
    const otherOrg = await create(stranger.token, { connector_id: idleConnectorId, name: "a", service_type: "postgres" })
    expect(otherOrg.status, scion.explain(otherOrg)).toBe(404)
    const viewerCreate = await create(viewer.token, { connector_id: idleConnectorId, name: "a", service_type: "postgres" })
    expect(viewerCreate.status, scion.explain(viewerCreate)).toBe(403)
    const notReady = await create(member.token, { connector_id: idleConnectorId, name: "a", service_type: "postgres" })
    expect(notReady.status, scion.explain(notReady)).toBe(422)
    expect(notReady.body.detail).toMatch(/not ready to branch/)
  })

  it("reads, lists and deletes: 404 for unknown ids and other orgs, 422 without connector_id", async () => {
    expect((await scion.request("GET", "/v1/branches/br_unknown", { token: member.token })).status).toBe(404)
    expect((await scion.request("DELETE", "/v1/branches/br_unknown", { token: member.token })).status).toBe(404)
    expect((await scion.request("GET", "/v1/branches", { token: member.token })).status).toBe(422)
    expect((await scion.request("GET", `/v1/branches?connector_id=con_unknown`, { token: member.token })).status).toBe(404)
    expect((await scion.request("GET", `/v1/branches?connector_id=${idleConnectorId}`, { token: stranger.token })).status).toBe(404)
    const listed = await scion.request("GET", `/v1/branches?connector_id=${idleConnectorId}`, { token: viewer.token })
    expect(listed.status).toBe(200)
    expect(listed.body).toEqual({ branches: [] })
  })

  it("keeps masking rules per connector (connectors.update to write, branches.read to read)", async () => {
    const rules = { rules: [{ schema: "public", table: "customers", column: "email", method: "email" }] }
    expect((await scion.request("PUT", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: viewer.token, body: rules })).status).toBe(403)
    expect((await scion.request("PUT", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: stranger.token, body: rules })).status).toBe(404)
    const put = await scion.request("PUT", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: member.token, body: rules })
    expect(put.status, scion.explain(put)).toBe(200)
    // The policy defaults to permissive, nothing is marked safe.
    expect(put.body).toEqual({ ...rules, policy: "permissive", safe_columns: [] })
    const got = await scion.request("GET", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: viewer.token })
    // Never discovered: nothing to suggest.
    expect(got.body).toEqual({ ...rules, policy: "permissive", safe_columns: [], suggested_rules: [] })
    const bad = await scion.request("PUT", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: member.token, body: { rules: [{ schema: "s", table: "t", column: "c", method: "rot13" }] } })
    expect(bad.status).toBe(422)
    const badPolicy = await scion.request("PUT", `/v1/connectors/${idleConnectorId}/masking-rules`, { token: member.token, body: { rules: [], policy: "lenient" } })
    expect(badPolicy.status).toBe(422)
    expect(badPolicy.body.detail[0].loc).toEqual(["body", "policy"])
  })
})

/** Tables whose keys come from a sequence: serial, identity always and by default, and two sharing one sequence. */
const SEQUENCE_TABLES = ["seq_serial", "seq_always", "seq_by_default", "seq_shared_a", "seq_shared_b"]

/** Connects with node-postgres or postgres.js as an application would (test/support/driver-probe.mjs). */
const DRIVER_PROBE = fileURLToPath(new URL("../support/driver-probe.mjs", import.meta.url))


describe("branches of a ready engine", () => {
  let source: SourceCluster
  let connectorId: string
  let respawned: UnitProcess | undefined

  beforeAll(async () => {
    source = await startSourceCluster()
    await source.query("create database app")
    await source.query(
      `create table customers (id bigint primary key, email text not null, name text);
       create table orders (id bigint primary key, customer_id bigint references customers(id), total numeric not null);
       insert into customers select g, 'user' || g || '@example.com', 'Name ' || g from generate_series(1, 100) g;
       insert into orders select g, 1 + g % 100, g from generate_series(1, 500) g;`,
      "app"
    )
    // Every way a key draws from a sequence, rows on each before setup (more come after it).
    await source.query(
      `create table seq_serial (id serial primary key, note text);
       create table seq_always (id bigint generated always as identity primary key, note text);
       create table seq_by_default (id int generated by default as identity primary key, note text);
       create sequence shared_ids;
       create table seq_shared_a (id bigint primary key default nextval('shared_ids'), note text);
       create table seq_shared_b (id bigint primary key default nextval('shared_ids'), note text);
       ${SEQUENCE_TABLES.map((t) => `insert into ${t} (note) select 'before ' || g from generate_series(1, 20) g;`).join("\n")}`,
      "app"
    )
    const ready = await readyConnector(scion, { orgId, memberToken: member.token, adminToken: owner.token, source, database: "app" })
    connectorId = ready.connectorId
    const rules = { rules: [{ schema: "public", table: "customers", column: "email", method: "email" }] }
    expect((await scion.request("PUT", `/v1/connectors/${connectorId}/masking-rules`, { token: member.token, body: rules })).status).toBe(200)
  }, 400_000)

  afterAll(async () => {
    await respawned?.stop()
    await source?.stop()
  })

  it("creates a branch through the REST API whose URL works with psql over TLS; writes stay in the branch", async () => {
    const response = await create(member.token, { connector_id: connectorId, name: "feature-1", service_type: "postgres" })
    expect(response.status, scion.explain(response)).toBe(202)
    expect(response.body).toMatchObject({ type: "branch_create", status: "pending" })
    expect(response.body.resource_id).toMatch(/^br_/)
    const operation = await settleOperation(scion, response.body.operation_id, member.token)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    const branch = operation.result
    expect(branch).toMatchObject({ branch_id: response.body.resource_id, name: "feature-1", connector_id: connectorId, service_type: "postgres", status: "active" })
    expect(branch.branch_url).toMatch(/\?sslmode=require&channel_binding=disable$/)
    // Each step's time: created, then readable and writable at once (one grant), then masked.
    const at = (field: string) => Date.parse(branch[field])
    for (const field of ["created_at", "read_ready_at", "write_ready_at", "masked_ready_at"]) expect(branch[field], field).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
    expect(at("read_ready_at")).toBeGreaterThanOrEqual(at("created_at"))
    expect(at("write_ready_at")).toBe(at("read_ready_at"))
    expect(at("masked_ready_at")).toBeGreaterThanOrEqual(at("write_ready_at"))
    expect(at("masked_ready_at")).toBeLessThanOrEqual(Date.parse(operation.completed_at))
    // Pooled URLs when the engine has a PgBouncer (Debian's, when installed: .ci/run installs it).
    if (hasPgbouncer) {
      expect(branch.pooled_branch_url).toMatch(/^postgresql:\/\/.+\?sslmode=require&channel_binding=disable$/)
      expect(branch.pooled_branch_url).not.toBe(branch.branch_url)
      expect(branch.pooled_branch_prisma_url).toBe(`${branch.pooled_branch_url}&pgbouncer=true&connection_limit=1`)
      expect(psql(branch.pooled_branch_url, "select count(*) from orders")).toBe("500")
    } else {
      expect(branch).toMatchObject({ pooled_branch_url: null, pooled_branch_prisma_url: null })
    }
    expect(psql(branch.branch_url, "select count(*) from orders")).toBe("500")
    expect(psql(branch.branch_url, "select count(*) from customers where email like '%@example.com'")).toBe("0")
    psql(branch.branch_url, "delete from orders")
    expect(psql(branch.branch_url, "select count(*) from orders")).toBe("0")
    expect((await queryEngine(scion, connectorId, "select count(*)::int as n from orders")).rows[0].n).toBe(500)
    expect((await source.query("select count(*)::int as n from orders", "app")).rows[0].n).toBe(500)

    // Read again (member: with the URL; viewer: without), listed, and 404 for other orgs.
    const got = await scion.request("GET", `/v1/branches/${branch.branch_id}`, { token: member.token })
    expect(got.status).toBe(200)
    expect(got.body.branch_url).toBe(branch.branch_url)
    expect(got.body).toMatchObject({ created_at: branch.created_at, read_ready_at: branch.read_ready_at, write_ready_at: branch.write_ready_at, masked_ready_at: branch.masked_ready_at })
    const seen = await scion.request("GET", `/v1/branches/${branch.branch_id}`, { token: viewer.token })
    expect(seen.body.branch_url).toBeNull()
    // The operation shows the URL exactly to whom the branch does: a viewer reads the result without it.
    const viewed = await scion.request("GET", `/v1/operations/${response.body.operation_id}`, { token: viewer.token })
    expect(viewed.status).toBe(200)
    expect(viewed.body.result).toMatchObject({ branch_id: branch.branch_id, status: "active", branch_url: null, pooled_branch_url: null, pooled_branch_prisma_url: null })
    // Nor is the password stored with the operation.
    const [stored] = await queryMetadata(scion, "select result::text as result from operation.operations where id = $1", [response.body.operation_id])
    expect(stored.result).toContain(branch.branch_id)
    expect(stored.result).not.toContain(new URL(branch.branch_url).password)
    expect((await scion.request("GET", `/v1/branches/${branch.branch_id}`, { token: stranger.token })).status).toBe(404)
    const listed = await scion.request("GET", `/v1/branches?connector_id=${connectorId}`, { token: member.token })
    expect(listed.body.branches.map((b: { branch_id: string }) => b.branch_id)).toContain(branch.branch_id)
    // The same name again is 409.
    expect((await create(member.token, { connector_id: connectorId, name: "feature-1", service_type: "postgres" })).status).toBe(409)
  })

  it("branch URLs work as returned with psql, node-postgres and postgres.js, trusting the served engine authority", async () => {
    const served = await fetch(`${scion.baseUrl}/v1/engines/ca-certificate`)
    expect(served.status).toBe(200)
    expect(served.headers.get("content-type")).toMatch(/^application\/x-pem-file/)
    const pem = await served.text()
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/)
    const caFile = join(tmpdir(), `scion-engine-ca-${randomBytes(4).toString("hex")}.pem`)
    await writeFile(caFile, pem)
    try {
      const response = await create(member.token, { connector_id: connectorId, name: "drivers", service_type: "postgres" })
      const operation = await settleOperation(scion, response.body.operation_id, member.token)
      expect(operation.status, JSON.stringify(operation)).toBe("completed")
      const urls: Array<string> = [operation.result.branch_url, ...(hasPgbouncer ? [operation.result.pooled_branch_url] : [])]
      const probe = (driver: "pg" | "postgres", url: string, env: NodeJS.ProcessEnv) =>
        execFileSync(process.execPath, [DRIVER_PROBE, driver, url], { env, encoding: "utf8", timeout: 30_000, stdio: "pipe" })
      const withAuthority = { ...process.env, NODE_EXTRA_CA_CERTS: caFile }
      for (const url of urls) {
        // psql as returned, and verifying the server's name and chain against the authority.
        expect(psql(url, "select 1")).toBe("1")
        expect(psql(`${url.replace("sslmode=require", "sslmode=verify-full")}&sslrootcert=${caFile}`, "select 42")).toBe("42")
        // node-postgres treats sslmode=require as verify-full: it needs the authority, and nothing else.
        expect(JSON.parse(probe("pg", url, withAuthority))).toEqual({ n: 42 })
      }
      // postgres.js (sslmode=require: encrypted, not verified) sends the URL's channel_binding to
      // the server as a setting: the pooler ignores it, so the pooled URL works as returned; the
      // engine itself refuses it (README: drop the parameter for postgres.js).
      if (hasPgbouncer) expect(JSON.parse(probe("postgres", operation.result.pooled_branch_url, process.env))).toEqual({ n: 42 })
      expect(() => probe("postgres", operation.result.branch_url, process.env)).toThrow(/channel_binding/)
      expect(JSON.parse(probe("postgres", operation.result.branch_url.replace("&channel_binding=disable", ""), process.env))).toEqual({ n: 42 })
      // Without the authority node-postgres refuses the engine's certificate: the one setting is what makes it work.
      const { NODE_EXTRA_CA_CERTS: _unused, ...without } = process.env
      expect(() => probe("pg", operation.result.branch_url, without)).toThrow(/certificate/)
    } finally {
      await rm(caFile, { force: true })
    }
  })

  it("one request id finds the REST call, the branch unit's RPC and the job it started in the logs", async () => {
    const requestId = `e2e-${Date.now().toString(36)}`
    const response = await create(member.token, { connector_id: connectorId, name: "traced", service_type: "postgres" }, { "x-request-id": requestId })
    expect(response.status).toBe(202)
    expect(response.headers.get("x-request-id")).toBe(requestId)
    expect((await settleOperation(scion, response.body.operation_id, member.token)).status).toBe("completed")
    const lines = scion.branch
      .output()
      .split("\n")
      .filter((line) => line.includes(`"request_id":"${requestId}"`))
      .map((line) => JSON.parse(line) as { message: string; annotations: Record<string, unknown> })
    // The RPC handler's line and the worker's, for the same operation.
    expect(lines.map((l) => l.message)).toEqual(expect.arrayContaining(["branch create started", "branch ready"]))
    expect(lines.find((l) => l.message === "branch ready")?.annotations.operation_id).toBe(response.body.operation_id)
    // A client id that could forge a log line is replaced by one of ours.
    const replaced = await scion.request("GET", `/v1/branches/${response.body.resource_id}`, { token: member.token, headers: { "x-request-id": "bad id\"}" } })
    expect(replaced.headers.get("x-request-id")).toMatch(/^req_[0-9a-z]+$/i)
  })

  it("every process serves Prometheus metrics: REST requests by route, RPCs by method and code, jobs by outcome", async () => {
    const scrape = async (unit: string) => {
      const response = await fetch(scion.metricsUrl(unit))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
      return response.text()
    }
    const value = (text: string, series: string) => Number(text.split("\n").find((line) => line.startsWith(`${series} `))?.split(" ")[1] ?? NaN)
    const gateway = await scrape("gateway")
    expect(gateway).toContain("# TYPE scion_http_requests_total counter")
    expect(value(gateway, 'scion_http_requests_total{method="POST",route="/v1/branch/create",status="202"}')).toBeGreaterThanOrEqual(1)
    expect(gateway).toMatch(/scion_http_request_duration_seconds_bucket\{method="GET",route="\/v1\/operations\/\{operation_id\}",le="\+Inf"\} \d+/)
    const branch = await scrape("branch")
    expect(value(branch, 'scion_rpc_server_requests_total{service="scion.branch.v1.BranchService",method="CreateBranch",code="OK"}')).toBeGreaterThanOrEqual(1)
    expect(value(branch, 'scion_jobs_total{unit="branch",type="create",outcome="completed"}')).toBeGreaterThanOrEqual(1)
    expect(value(branch, "process_resident_memory_bytes")).toBeGreaterThan(10_000_000)
    // Another unit's own registry: the operation unit answered the branch unit's reports.
    const operation = await scrape("operation-1")
    expect(operation).toMatch(/scion_rpc_server_requests_total\{service="scion\.operation\.v1\.OperationService",method="ReportOperation",code="OK"\} \d+/)
    // Resource counts, refreshed every METRICS_REFRESH_INTERVAL (1 s here).
    await new Promise((resolve) => setTimeout(resolve, 1500))
    expect(value(await scrape("operation-1"), 'scion_operations{type="branch_create",status="completed"}')).toBeGreaterThanOrEqual(1)
    expect(value(await scrape("branch"), 'scion_branches{status="active"}')).toBeGreaterThanOrEqual(1)
    expect(value(await scrape("connector"), 'scion_connectors{branching_engine_status="ready"}')).toBeGreaterThanOrEqual(1)
    expect((await fetch(scion.metricsUrl("gateway").replace("/metrics", "/other"))).status).toBe(404)
  })

  it("one trace spans the REST call, the branch unit's RPC and the job, across processes (W3C traceparent, OTLP)", async () => {
    const traceId = randomBytes(16).toString("hex")
    const response = await create(member.token, { connector_id: connectorId, name: "traced-otel", service_type: "postgres" }, { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` })
    expect(response.status).toBe(202)
    expect((await settleOperation(scion, response.body.operation_id, member.token)).status).toBe("completed")
    const wanted = ["http.server POST", "rpc scion.branch.v1.BranchService/CreateBranch", "Branches.create", "job branch.create"]
    const spans = await otlp.waitForSpans(traceId, (found) => wanted.every((name) => found.some((span) => span.name === name)))
    const byName = (name: string) => spans.find((span) => span.name === name)
    expect(byName("http.server POST")?.service).toBe("scion-gateway")
    expect(byName("rpc scion.branch.v1.BranchService/CreateBranch")?.service).toBe("scion-branch")
    expect(byName("job branch.create")?.service).toBe("scion-branch")
    // The RPC's parent is a span of the gateway's, the job's a span of the branch unit's RPC path.
    const ids = new Set(spans.map((span) => span.spanId))
    expect(ids.has(byName("rpc scion.branch.v1.BranchService/CreateBranch")!.parentSpanId)).toBe(true)
    expect(ids.has(byName("job branch.create")!.parentSpanId)).toBe(true)
    // A service function's span (kit tracedFn) is recorded while tracing, inside the RPC's.
    expect(byName("Branches.create")?.service).toBe("scion-branch")
    expect(byName("Branches.create")!.parentSpanId).toBe(byName("rpc scion.branch.v1.BranchService/CreateBranch")!.spanId)
  })

  it("a branch's sequences stand past the rows it holds: an insert without a key works in every table, after the source moved on", async () => {
    // Rows written after setup reach the mirror by replication, which carries no sequence values:
    // the mirror's sequences stay behind its rows.
    await source.query(SEQUENCE_TABLES.map((t) => `insert into ${t} (note) select 'after ' || g from generate_series(1, 50) g;`).join("\n"), "app")
    const maxima = `select ${SEQUENCE_TABLES.map((t) => `(select max(id) from ${t})::bigint as ${t}`).join(", ")}`
    const onSource = (await source.query(maxima, "app")).rows[0] as Record<string, string>
    await waitFor("the mirror to hold the rows written after setup", async () =>
      JSON.stringify((await queryEngine(scion, connectorId, maxima)).rows[0]) === JSON.stringify(onSource), 60_000)
    const response = await create(member.token, { connector_id: connectorId, name: "sequences", service_type: "postgres" })
    expect(response.status, scion.explain(response)).toBe(202)
    const operation = await settleOperation(scion, response.body.operation_id, member.token)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    const url = operation.result.branch_url as string
    const shared = Math.max(Number(onSource.seq_shared_a), Number(onSource.seq_shared_b))
    for (const table of SEQUENCE_TABLES) {
      // generated always takes DEFAULT only; the others take no key at all.
      const insert = table === "seq_always" ? `insert into ${table} (id, note) values (default, 'branch')` : `insert into ${table} (note) values ('branch')`
      const id = Number(psql(url, `with added as (${insert} returning id) select id from added`))
      expect(id, table).toBeGreaterThan(table.startsWith("seq_shared") ? shared : Number(onSource[table]))
    }
    // The step is recorded, so a redelivery skips it.
    const [row] = await queryMetadata(scion, "select sequences_aligned_at is not null as aligned from branch.branches where id = $1", [operation.result.branch_id])
    expect(row).toEqual({ aligned: true })
  }, 180_000)

  it("replays an idempotency key, refuses it for another request, and makes one branch of 50 concurrent identical requests", async () => {
    const body = { connector_id: connectorId, name: "idem-1", service_type: "postgres" }
    const first = await create(member.token, body, { "x-idempotency-key": "key-idem-1" })
    expect(first.status).toBe(202)
    expect(first.headers.get("x-idempotency-replay")).toBeNull()
    const again = await create(member.token, body, { "idempotency-key": "key-idem-1" })
    expect(again.status).toBe(202)
    expect(again.headers.get("x-idempotency-replay")).toBe("true")
    expect(again.body.operation_id).toBe(first.body.operation_id)
    expect(again.body.resource_id).toBe(first.body.resource_id)
    const reused = await create(member.token, { ...body, name: "idem-2" }, { "x-idempotency-key": "key-idem-1" })
    expect(reused.status).toBe(409)
    // The same create in flight without a key is 409.
    const inFlight = await create(member.token, body)
    expect([409]).toContain(inFlight.status)
    await settleOperation(scion, first.body.operation_id, member.token)

    const burst = { connector_id: connectorId, name: "burst", service_type: "postgres" }
    const responses = await Promise.all(Array.from({ length: 50 }, () => create(member.token, burst, { "x-idempotency-key": "key-burst" })))
    expect(responses.every((r) => r.status === 202), JSON.stringify(responses.map((r) => r.status))).toBe(true)
    expect(new Set(responses.map((r) => r.body.resource_id)).size).toBe(1)
    expect(responses.filter((r) => r.headers.get("x-idempotency-replay") === null).length).toBe(1)
    const operation = await settleOperation(scion, responses[0]!.body.operation_id, member.token)
    expect(operation.status).toBe("completed")
    const rows = await queryMetadata(scion, "select count(*)::int as n from branch.branches where connector_id = $1 and name = 'burst'", [connectorId])
    expect(rows[0].n).toBe(1)
  })

  it("keeps two branches independent and deletes one: database and role dropped", async () => {
    const [a, b] = await Promise.all(["two-a", "two-b"].map((name) => create(member.token, { connector_id: connectorId, name, service_type: "postgres" })))
    const [opA, opB] = await Promise.all([a!, b!].map((r) => settleOperation(scion, r.body.operation_id, member.token)))
    psql(opA!.result.branch_url, "update customers set name = 'changed'")
    expect(psql(opB!.result.branch_url, "select count(*) from customers where name = 'changed'")).toBe("0")
    // A branch's credentials open that branch only: not another branch, not the mirror.
    const elsewhere = (url: string, database: string) => Object.assign(new URL(url), { pathname: `/${database}` }).toString()
    const databaseB = new URL(opB!.result.branch_url).pathname.slice(1)
    expect(() => psql(elsewhere(opA!.result.branch_url, databaseB), "select 1")).toThrow(/permission denied for database/)
    const [{ mirror_database: mirror }] = await queryMetadata(scion, "select mirror_database from connector.engines where connector_id = $1", [connectorId])
    expect(() => psql(elsewhere(opA!.result.branch_url, mirror), "select 1")).toThrow(/permission denied for database/)
    const deleted = await scion.request("DELETE", `/v1/branches/${opA!.result.branch_id}`, { token: member.token })
    expect(deleted.status).toBe(202)
    expect(deleted.body).toMatchObject({ type: "branch_delete", resource_id: opA!.result.branch_id })
    expect((await settleOperation(scion, deleted.body.operation_id, member.token)).status).toBe("completed")
    expect(() => psql(opA!.result.branch_url, "select 1")).toThrow()
    expect((await scion.request("GET", `/v1/branches/${opA!.result.branch_id}`, { token: member.token })).status).toBe(404)
    expect((await scion.request("DELETE", `/v1/branches/${opB!.result.branch_id}`, { token: viewer.token })).status).toBe(403)
  })

  it("PATCH renames, protects and sets the expiry; a protected branch refuses delete (409) until unset", async () => {
    const created = await create(member.token, { connector_id: connectorId, name: "keeper", service_type: "postgres" })
    const done = await settleOperation(scion, created.body.operation_id, member.token)
    expect(done.result).toMatchObject({ protected: false, expires_at: null })
    const id = done.result.branch_id
    const patch = (token: string, body: unknown) => scion.request("PATCH", `/v1/branches/${id}`, { token, body })

    const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
    const patched = await patch(member.token, { name: "keeper-renamed", protected: true, expires_at: expiresAt })
    expect(patched.status, scion.explain(patched)).toBe(200)
    expect(patched.body).toMatchObject({ branch_id: id, name: "keeper-renamed", protected: true, expires_at: expiresAt, status: "active" })
    // The URL (and password) stay with the branch, not its name.
    expect(patched.body.branch_url).toBe(done.result.branch_url)
    expect(psql(patched.body.branch_url, "select count(*) from orders")).toBe("500")
    expect((await scion.request("GET", `/v1/branches/${id}`, { token: viewer.token })).body).toMatchObject({ name: "keeper-renamed", protected: true })

    const refused = await scion.request("DELETE", `/v1/branches/${id}`, { token: member.token })
    expect(refused.status).toBe(409)
    expect(refused.body.detail).toMatch(/protected/)
    expect(psql(done.result.branch_url, "select 1")).toBe("1")

    // Rules: 400 for a bad name or an expiry in the past, 422 for wrong types, 409 for a taken
    // name, 403 for a viewer, 404 for another org and unknown ids; nothing changes.
    const other = await settleOperation(scion, (await create(member.token, { connector_id: connectorId, name: "keeper-other", service_type: "postgres" })).body.operation_id, member.token)
    expect((await patch(member.token, { name: "keeper-other" })).status).toBe(409)
    const badName = await patch(member.token, { name: "Not A Name!" })
    expect(badName.status).toBe(400)
    expect(typeof badName.body.detail).toBe("string")
    expect((await patch(member.token, { expires_at: new Date(Date.now() - 60_000).toISOString() })).status).toBe(400)
    const wrongType = await patch(member.token, { protected: "yes" })
    expect(wrongType.status).toBe(422)
    expect(wrongType.body.detail[0].loc).toEqual(["body", "protected"])
    expect((await patch(viewer.token, { protected: false })).status).toBe(403)
    expect((await patch(stranger.token, { protected: false })).status).toBe(404)
    expect((await scion.request("PATCH", "/v1/branches/br_doesnotexist", { token: member.token, body: {} })).status).toBe(404)
    expect((await scion.request("GET", `/v1/branches/${id}`, { token: member.token })).body).toMatchObject({ name: "keeper-renamed", protected: true, expires_at: expiresAt })

    // Unprotected and without an expiry, it deletes.
    const unset = await patch(member.token, { protected: false, expires_at: null })
    expect(unset.body).toMatchObject({ protected: false, expires_at: null })
    const deleted = await scion.request("DELETE", `/v1/branches/${id}`, { token: member.token })
    expect(deleted.status).toBe(202)
    expect((await settleOperation(scion, deleted.body.operation_id, member.token)).status).toBe("completed")
    const cleanup = await scion.request("DELETE", `/v1/branches/${other.result.branch_id}`, { token: member.token })
    await settleOperation(scion, cleanup.body.operation_id, member.token)
  })

  it("an expired branch is deleted by the sweeper through a branch_delete operation: database and role gone; a protected one stays", async () => {
    expect((await create(member.token, { connector_id: connectorId, name: "both", service_type: "postgres", ttl_seconds: 60, expires_at: new Date(Date.now() + 60_000).toISOString() })).status).toBe(400)
    expect((await create(member.token, { connector_id: connectorId, name: "zero", service_type: "postgres", ttl_seconds: 0 })).status).toBe(400)
    const [short, guarded] = await Promise.all(
      ["short-lived", "guarded"].map((name) => create(member.token, { connector_id: connectorId, name, service_type: "postgres", ttl_seconds: 4 }))
    )
    const [shortOp, guardedOp] = await Promise.all([short!, guarded!].map((r) => settleOperation(scion, r.body.operation_id, member.token)))
    expect(shortOp!.status, JSON.stringify(shortOp)).toBe("completed")
    expect(typeof shortOp!.result.expires_at).toBe("string")
    const guardedId = guardedOp!.result.branch_id
    expect((await scion.request("PATCH", `/v1/branches/${guardedId}`, { token: member.token, body: { protected: true } })).status).toBe(200)
    const shortId = shortOp!.result.branch_id

    // The sweeper deletes it once expired: the branch reads 404, its URL stops working.
    const deadline = Date.now() + 30_000
    while ((await scion.request("GET", `/v1/branches/${shortId}`, { token: member.token })).status !== 404) {
      if (Date.now() > deadline) throw new Error("the expired branch was not deleted")
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const ops = await queryMetadata(scion, "select type, status from operation.operations where resource_id = $1 order by created_at", [shortId])
    expect(ops.map((r) => r.type)).toEqual(["branch_create", "branch_delete"])
    expect(() => psql(shortOp!.result.branch_url, "select 1")).toThrow()
    const leftovers = await queryEngine(
      scion,
      connectorId,
      `select (select count(*)::int from pg_database where datname = 'scion_${shortId}') as databases, (select count(*)::int from pg_roles where rolname = 'scion_${shortId}_owner') as roles`
    )
    expect(leftovers.rows[0]).toEqual({ databases: 0, roles: 0 })
    // The protected one outlived its expiry.
    const kept = await scion.request("GET", `/v1/branches/${guardedId}`, { token: member.token })
    expect(kept.body).toMatchObject({ status: "active", protected: true })
    expect(psql(guardedOp!.result.branch_url, "select 1")).toBe("1")
    await scion.request("PATCH", `/v1/branches/${guardedId}`, { token: member.token, body: { protected: false, expires_at: null } })
    const cleanup = await scion.request("DELETE", `/v1/branches/${guardedId}`, { token: member.token })
    await settleOperation(scion, cleanup.body.operation_id, member.token)
  })

  it("reset gives a branch the mirror's current data under the same URL and password, ending open sessions; protected refuses", async () => {
    const created = await create(member.token, { connector_id: connectorId, name: "resettable", service_type: "postgres" })
    const done = await settleOperation(scion, created.body.operation_id, member.token)
    const { branch_id: id, branch_url: url } = done.result
    psql(url, "delete from orders where id > 10")
    expect(psql(url, "select count(*) from orders")).toBe("10")
    // The source moves on; the mirror follows.
    await source.query("insert into orders select g, 1, g from generate_series(100001, 100010) g", "app")
    await waitFor("the mirror to apply the new orders", async () => (await queryEngine(scion, connectorId, "select count(*)::int as n from orders")).rows[0].n === 510)
    // node-postgres reads sslmode=require as verify-full; the engine's certificate is self-signed
    // (issue 13's CA work), so this session connects without the URL's query.
    const session = new pg.Client({ connectionString: url.split("?")[0], ssl: { rejectUnauthorized: false } })
    await session.connect()
    session.on("error", () => {})
    expect((await session.query("select count(*)::int as n from orders")).rows[0].n).toBe(10)

    const reset = (token: string, branchId = id) => scion.request("POST", `/v1/branches/${branchId}/reset`, { token })
    expect((await reset(viewer.token)).status).toBe(403)
    expect((await reset(stranger.token)).status).toBe(404)
    expect((await reset(member.token, "br_doesnotexist")).status).toBe(404)
    expect((await scion.request("PATCH", `/v1/branches/${id}`, { token: member.token, body: { protected: true } })).status).toBe(200)
    const refused = await reset(member.token)
    expect(refused.status).toBe(409)
    expect(refused.body.detail).toMatch(/protected/)
    expect((await scion.request("PATCH", `/v1/branches/${id}`, { token: member.token, body: { protected: false } })).status).toBe(200)

    const accepted = await reset(member.token)
    expect(accepted.status, scion.explain(accepted)).toBe(202)
    expect(accepted.body).toMatchObject({ type: "branch_reset", resource_id: id })
    const operation = await settleOperation(scion, accepted.body.operation_id, member.token)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", type: "branch_reset" })
    expect(operation.result).toMatchObject({ branch_id: id, name: "resettable", status: "active", branch_url: url })
    // Same URL and password; the mirror's current rows, the branch's own changes gone.
    expect(psql(url, "select count(*) from orders")).toBe("510")
    expect(psql(url, "select count(*) from customers where email like '%@example.com'")).toBe("0")
    await expect(session.query("select 1")).rejects.toThrow()
    await session.end().catch(() => {})
    const cleanup = await scion.request("DELETE", `/v1/branches/${id}`, { token: member.token })
    await settleOperation(scion, cleanup.body.operation_id, member.token)
  })

  it("schema diff lists exactly what a migration on the branch changed, as SQL that makes another branch the same", async () => {
    const [migrated, fresh] = await Promise.all(
      ["migrated", "replayed"].map(async (name) => (await settleOperation(scion, (await create(member.token, { connector_id: connectorId, name, service_type: "postgres" })).body.operation_id, member.token)).result)
    )
    const diff = (id: string, token = member.token) => scion.request("GET", `/v1/branches/${id}/schema-diff`, { token })
    const untouched = await diff(migrated.branch_id, viewer.token)
    expect(untouched.status, scion.explain(untouched)).toBe(200)
    expect(untouched.body).toEqual({ branch_id: migrated.branch_id, sql: "", changes: [] })

    psql(
      migrated.branch_url,
      `create type order_state as enum ('open', 'paid');
       alter table orders add column state order_state not null default 'open';
       alter table orders alter column total type numeric(12,2);
       alter table customers drop column name;
       alter table customers alter column email drop not null;
       create index orders_state_idx on orders (state);
       create table invoices (id bigint primary key, order_id bigint not null references orders(id), amount numeric not null);`
    )
    const after = await diff(migrated.branch_id)
    expect(after.status).toBe(200)
    expect(after.body.changes.map((c: { kind: string; table: string | null; name: string }) => [c.kind, c.table, c.name])).toEqual([
      ["create_enum", null, "order_state"],
      ["create_table", "invoices", "invoices"],
      ["add_column", "orders", "state"],
      ["alter_column_type", "orders", "total"],
      ["drop_not_null", "customers", "email"],
      ["add_constraint", "invoices", "invoices_order_id_fkey"],
      ["add_constraint", "invoices", "invoices_pkey"],
      ["create_index", "orders", "orders_state_idx"],
      ["drop_column", "customers", "name"]
    ])
    expect(after.body.sql).toBe(after.body.changes.map((c: { sql: string }) => c.sql).join("\n"))
    // The SQL is the migration: run on an untouched branch, it leaves the same difference.
    psql(fresh.branch_url, after.body.sql)
    expect((await diff(fresh.branch_id)).body.changes).toEqual(after.body.changes)

    expect((await diff(migrated.branch_id, stranger.token)).status).toBe(404)
    expect((await scion.request("GET", "/v1/branches/br_doesnotexist/schema-diff", { token: member.token })).status).toBe(404)
    for (const id of [migrated.branch_id, fresh.branch_id]) {
      const deleted = await scion.request("DELETE", `/v1/branches/${id}`, { token: member.token })
      await settleOperation(scion, deleted.body.operation_id, member.token)
    }
  })

  it("snapshots: a named copy of the mirror that branches are cut from without the source's later rows; list, get, delete", async () => {
    const taken = await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: "seed" } })
    expect(taken.status, scion.explain(taken)).toBe(202)
    expect(taken.body).toMatchObject({ type: "snapshot_create", status: "pending" })
    const snapshotId: string = taken.body.resource_id
    expect(snapshotId).toMatch(/^snap_/)
    const made = await settleOperation(scion, taken.body.operation_id, member.token)
    expect(made.status, JSON.stringify(made)).toBe("completed")
    expect(made.result).toMatchObject({ snapshot_id: snapshotId, connector_id: connectorId, name: "seed", status: "ready", error: null })
    expect(typeof made.result.source_lsn).toBe("string")

    // The source moves on after the snapshot.
    await source.query("insert into orders select g, 1, g from generate_series(900001, 900005) g", "app")
    const fromSnapshot = (name: string) => create(member.token, { connector_id: connectorId, name, service_type: "postgres", snapshot_id: snapshotId })
    const [a, b] = await Promise.all([fromSnapshot("from-seed-a"), fromSnapshot("from-seed-b")])
    const live = await create(member.token, { connector_id: connectorId, name: "after-seed", service_type: "postgres", consistent_with_source: true })
    const [opA, opB, opLive] = await Promise.all([a, b, live].map((r) => settleOperation(scion, r.body.operation_id, member.token)))
    for (const op of [opA, opB]) {
      expect(op?.status, JSON.stringify(op)).toBe("completed")
      expect(op?.result).toMatchObject({ snapshot_id: snapshotId, source_lsn: made.result.source_lsn, data_as_of: made.result.data_as_of })
      expect(psql(op!.result.branch_url, "select count(*) from orders where id >= 900001")).toBe("0")
    }
    expect(opLive?.status, JSON.stringify(opLive)).toBe("completed")
    expect(opLive?.result.snapshot_id).toBeNull()
    expect(psql(opLive!.result.branch_url, "select count(*) from orders where id >= 900001")).toBe("5")
    // Writes in one branch of the snapshot stay there; the snapshot itself never changes.
    psql(opA!.result.branch_url, "delete from orders")
    expect(psql(opB!.result.branch_url, "select count(*) > 0 from orders")).toBe("t")

    // Read, list, and the rules every branch endpoint follows.
    expect((await scion.request("GET", `/v1/snapshots/${snapshotId}`, { token: viewer.token })).body).toMatchObject({ snapshot_id: snapshotId, status: "ready" })
    const listed = await scion.request("GET", `/v1/connectors/${connectorId}/snapshots`, { token: viewer.token })
    expect(listed.body.snapshots.map((s: { snapshot_id: string }) => s.snapshot_id)).toContain(snapshotId)
    expect((await scion.request("GET", `/v1/snapshots/${snapshotId}`, { token: stranger.token })).status).toBe(404)
    expect((await scion.request("GET", `/v1/connectors/${connectorId}/snapshots`, { token: stranger.token })).status).toBe(404)
    expect((await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: viewer.token, body: { name: "nope" } })).status).toBe(403)
    expect((await scion.request("DELETE", `/v1/snapshots/${snapshotId}`, { token: viewer.token })).status).toBe(403)
    const again = await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: "seed" } })
    expect(again.status).toBe(409)
    const badName = await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: "Not A Name" } })
    expect(badName.status).toBe(400)
    expect(typeof badName.body.detail).toBe("string")
    expect((await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: 7 } })).status).toBe(422)
    expect((await create(member.token, { connector_id: connectorId, name: "x-bad", service_type: "postgres", snapshot_id: "not-a-snapshot" })).status).toBe(400)
    expect((await create(member.token, { connector_id: connectorId, name: "x-unknown", service_type: "postgres", snapshot_id: `snap_${"0".repeat(26)}` })).status).toBe(404)
    expect((await create(member.token, { connector_id: idleConnectorId, name: "x-other", service_type: "postgres", snapshot_id: snapshotId })).status).toBe(404)
    expect((await create(member.token, { connector_id: connectorId, name: "x-both", service_type: "postgres", snapshot_id: snapshotId, consistent_with_source: true })).status).toBe(400)

    // Delete: its database goes; branches cut from it stay.
    const deleted = await scion.request("DELETE", `/v1/snapshots/${snapshotId}`, { token: member.token })
    expect(deleted.status, scion.explain(deleted)).toBe(202)
    expect(deleted.body).toMatchObject({ type: "snapshot_delete", resource_id: snapshotId })
    expect((await settleOperation(scion, deleted.body.operation_id, member.token)).status).toBe("completed")
    expect((await scion.request("GET", `/v1/snapshots/${snapshotId}`, { token: member.token })).status).toBe(404)
    expect((await queryEngine(scion, connectorId, "select count(*)::int as n from pg_database where datname = $1", [`scion_${snapshotId}`], "postgres")).rows[0].n).toBe(0)
    expect(psql(opB!.result.branch_url, "select 1")).toBe("1")
    expect((await create(member.token, { connector_id: connectorId, name: "x-gone", service_type: "postgres", snapshot_id: snapshotId })).status).toBe(404)
    // The branches go too, so the file's other tests keep room under the plan's limit.
    for (const op of [opA, opB, opLive]) {
      const removed = await scion.request("DELETE", `/v1/branches/${op!.result.branch_id}`, { token: member.token })
      expect((await settleOperation(scion, removed.body.operation_id, member.token)).status).toBe("completed")
    }
  })

  it("snapshots count against the plan's branch limit with the branches: a burst past the room gets exactly the room; at the limit both are refused (403) until one goes", async () => {
    const [{ n: inUse }] = await queryMetadata(
      scion,
      `select (select count(*) from branch.branches where org_id = $1 and status in ('creating', 'active', 'deleting'))::int
            + (select count(*) from branch.snapshots where org_id = $1 and status in ('creating', 'ready', 'deleting'))::int as n`,
      [orgId]
    )
    const limit = 25 // the free plan's branches (GET /v1/billing/plans)
    const plans = await scion.request("GET", "/v1/billing/plans")
    expect(plans.body.plans.find((p: { plan_id: string }) => p.plan_id === "free").limits.branches).toBe(limit)
    expect(inUse).toBeLessThan(limit)
    const abandonedCount = async () =>
      (await queryMetadata(scion, "select count(*)::int as n from operation.operations where org_id = $1 and status = 'failed' and error like 'The request that started this work failed%'", [orgId]))[0].n as number
    const abandonedBefore = await abandonedCount()
    // Three more than the room, all at once, branches among the snapshots: exactly the room gets in.
    const room = limit - inUse
    const burst = await Promise.all(
      Array.from({ length: room + 3 }, (_, i) =>
        i % 8 === 0
          ? create(member.token, { connector_id: connectorId, name: `burst-${i}`, service_type: "postgres" })
          : scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: `fill-${i}` } })
      )
    )
    const accepted = burst.filter((r) => r.status === 202)
    for (const refused of burst.filter((r) => r.status !== 202)) expect(refused.status, scion.explain(refused)).toBe(403)
    expect(accepted).toHaveLength(room)
    const settled = await Promise.all(accepted.map((r) => settleOperation(scion, r.body.operation_id, member.token)))
    for (const done of settled) expect(done.status).toBe("completed")
    const burstBranches = settled.filter((done) => done.type === "branch_create").map((done) => done.result.branch_id as string)
    const taken = accepted.filter((r) => r.body.type === "snapshot_create")
    expect(taken.length).toBeGreaterThan(0)
    // The refused creates made their operations before the limit refused them: none is left pending.
    await waitFor("the refused creates' operations to be failed", async () => {
      const [{ n }] = await queryMetadata(scion, "select count(*)::int as n from operation.operations where org_id = $1 and status = 'pending'", [orgId])
      return n === 0
    })
    expect((await abandonedCount()) - abandonedBefore).toBe(3)
    const snapshotOver = await scion.request("POST", `/v1/connectors/${connectorId}/snapshots`, { token: member.token, body: { name: "one-too-many" } })
    expect(snapshotOver.status, scion.explain(snapshotOver)).toBe(403)
    expect(snapshotOver.body.detail).toMatch(/free plan allows 25 branches/)
    const branchOver = await create(member.token, { connector_id: connectorId, name: "one-too-many", service_type: "postgres" })
    expect(branchOver.status, scion.explain(branchOver)).toBe(403)
    // One snapshot gone: room for one branch again.
    const freed = await scion.request("DELETE", `/v1/snapshots/${taken[0]!.body.resource_id}`, { token: member.token })
    expect((await settleOperation(scion, freed.body.operation_id, member.token)).status).toBe("completed")
    const fits = await create(member.token, { connector_id: connectorId, name: "fits-again", service_type: "postgres" })
    expect(fits.status, scion.explain(fits)).toBe(202)
    const made = await settleOperation(scion, fits.body.operation_id, member.token)
    // The rest go, so the file's other tests keep their room.
    const removals = await Promise.all([
      ...[made.result.branch_id, ...burstBranches].map((id) => scion.request("DELETE", `/v1/branches/${id}`, { token: member.token })),
      ...taken.slice(1).map((t) => scion.request("DELETE", `/v1/snapshots/${t.body.resource_id}`, { token: member.token }))
    ])
    for (const r of removals) expect((await settleOperation(scion, r.body.operation_id, member.token)).status).toBe("completed")
  }, 180_000)

  it("no secret the suite made reaches a log line of any unit, or a response not meant to carry it", async () => {
    const key = await scion.request("POST", `/v1/orgs/${orgId}/api-keys`, { token: owner.token, body: { name: "leak-check", role_id: "role_org_member" } })
    expect(key.status).toBe(201)
    expect((await scion.request("GET", `/v1/branches?connector_id=${connectorId}`, { token: key.body.secret })).status).toBe(200)
    const made = await create(member.token, { connector_id: connectorId, name: "leak-check", service_type: "postgres" })
    expect((await settleOperation(scion, made.body.operation_id, member.token)).status).toBe("completed")
    // Every branch's password: this one's and those the tests before made (same process logs).
    const listed = await scion.request("GET", `/v1/branches?connector_id=${connectorId}`, { token: member.token })
    const branchPasswords = (listed.body.branches as Array<{ branch_url: string | null }>)
      .flatMap((b) => (b.branch_url === null ? [] : [decodeURIComponent(new URL(b.branch_url).password)]))
    expect(branchPasswords.length).toBeGreaterThan(0)
    expect(psql((listed.body.branches as Array<{ branch_url: string }>).find((b) => b.branch_url !== null)!.branch_url, "select 1")).toBe("1")
    const secrets: Record<string, ReadonlyArray<string>> = {
      "session tokens": [owner.token, member.token, viewer.token, stranger.token],
      "the users' password": ["correct-horse-battery"],
      "an API key": [key.body.secret],
      "the source's password": [source.password],
      "the engine's superuser password": [(await engineRecordOf(scion, connectorId)).password],
      "branch passwords": branchPasswords
    }
    const units = [scion.identity, ...scion.operations, scion.billing, scion.connector, scion.branch, scion.gateway]
    for (const unit of units) {
      const output = unit.output()
      expect(output.length).toBeGreaterThan(0)
      for (const [what, values] of Object.entries(secrets)) {
        for (const value of values) expect(output.includes(value), `${what} in ${unit.name}'s log`).toBe(false)
      }
    }
    // Reads that describe a connector or its engine never carry the source's or the engine's password.
    const connector = JSON.stringify((await scion.request("GET", `/v1/connectors/${connectorId}`, { token: member.token })).body)
    expect(connector.includes(source.password)).toBe(false)
    expect(connector.includes(secrets["the engine's superuser password"]![0]!)).toBe(false)
  })

  it("two branch unit replicas cut branches of one engine at once: every create completes, none waits out the other's sessions", async () => {
    // A second replica, as the Deployment runs two: the same bus namespace and durable, so the
    // jobs are shared between both; the gateway keeps calling the first.
    const port = await freePort()
    const second = startUnit("branch-2", scion.branch.script, { ...scion.branch.env, PORT: String(port), METRICS_PORT: String(await freePort()) })
    try {
      await waitFor("the second branch replica", () => healthServing(`http://127.0.0.1:${port}`), 30_000)
      const accepted = await Promise.all(Array.from({ length: 6 }, (_, i) => create(member.token, { connector_id: connectorId, name: `replicas-${i}`, service_type: "postgres" })))
      for (const response of accepted) expect(response.status, scion.explain(response)).toBe(202)
      const operations = await Promise.all(accepted.map((response) => settleOperation(scion, response.body.operation_id, member.token, 60_000)))
      for (const operation of operations) expect(operation.status, JSON.stringify(operation)).toBe("completed")
      // Both replicas ran jobs (the shared durable hands them to whichever asks), and no copy
      // waited out BRANCH_TEMPLATE_WAIT (10 s) for the other replica's session on the mirror.
      const ready = (unit: UnitProcess) => unit.output().split("\n").filter((line) => line.includes("branch ready") && operations.some((o) => line.includes(o.result.branch_id))).length
      expect(ready(scion.branch) + ready(second)).toBe(6)
      expect(ready(second)).toBeGreaterThan(0)
      expect(ready(scion.branch)).toBeGreaterThan(0)
      // A copy that waited for the other replica's kept session would have failed its wait (the
      // session outlives it) and logged so before a redelivery completed it: not a clock, which a
      // loaded machine stretches without any wait.
      for (const unit of [scion.branch, second]) expect(unit.output()).not.toContain("stayed connected to the mirror database")
      // Every branch answers with the mirror's rows (the source did not change meanwhile: the same in all).
      const counts = operations.map((operation) => Number(psql(operation.result.branch_url, "select count(*) from orders")))
      expect(counts[0]).toBeGreaterThanOrEqual(500)
      expect(new Set(counts).size).toBe(1)
      for (const operation of operations) {
        const deleted = await scion.request("DELETE", `/v1/branches/${operation.result.branch_id}`, { token: member.token })
        expect(deleted.status, scion.explain(deleted)).toBe(202)
        expect((await settleOperation(scion, deleted.body.operation_id, member.token)).status).toBe("completed")
      }
    } finally {
      await second.stop()
    }
  }, 180_000)

  it("SIGKILL of the branch worker mid-create: the operation ends and nothing is leaked", async () => {
    // A source position 16 MB ahead of the source's WAL: the create waits for the mirror to reach
    // it, running at its catch_up stage (its role made meanwhile), until the source gets there.
    const position = (await source.query("select (pg_current_wal_lsn() + 16777216)::text as lsn")).rows[0].lsn as string
    const response = await create(member.token, { connector_id: connectorId, name: "killed", service_type: "postgres", min_source_lsn: position })
    expect(response.status, scion.explain(response)).toBe(202)
    await waitFor("the create running at catch_up", async () => {
      const read = await scion.request("GET", `/v1/operations/${response.body.operation_id}`, { token: member.token })
      return read.body.status === "running" && read.body.stage === "catch_up"
    })
    await scion.branch.stop("SIGKILL")
    // The source passes the position (segment switches, then a change the mirror applies).
    const past = async () => (await source.query(`select pg_current_wal_lsn() >= '${position}'::pg_lsn as past`)).rows[0].past as boolean
    for (let i = 0; i < 4 && !(await past()); i++) await source.query("select txid_current(); select pg_switch_wal()")
    expect(await past()).toBe(true)
    await source.query("update customers set name = name where id = 1", "app")
    respawned = respawn(scion.branch)
    await waitFor("the branch unit again", () => healthServing(scion.branchUrl), 30_000)
    // The job is redelivered to the new worker, resumes and completes with a working branch.
    const operation = await settleOperation(scion, response.body.operation_id, member.token, 120_000)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(operation.result.branch_url).toMatch(/^postgresql:\/\//)
    expect(psql(operation.result.branch_url, "select 1")).toBe("1")
    // Every branch database and role on the engine belongs to a live branch.
    const live = await queryMetadata(scion, "select database_name, role_name from branch.branches where connector_id = $1 and status in ('active', 'creating')", [connectorId])
    const databases = (await queryEngine(scion, connectorId, "select datname from pg_database where datname like 'scion_br_%'", [], "postgres")).rows.map((r) => r.datname).sort()
    const roles = (await queryEngine(scion, connectorId, "select rolname from pg_roles where rolname like 'scion_br_%'", [], "postgres")).rows.map((r) => r.rolname).sort()
    expect(databases).toEqual(live.map((r) => r.database_name).sort())
    expect(roles).toEqual(live.map((r) => r.role_name).sort())
  }, 180_000)

  it("an autovacuum worker busy on the mirror does not hold a branch up: the copy ends it, as CREATE DATABASE would", async () => {
    // A table of the mirror's own, vacuumed as slowly as Postgres allows, by a launcher that looks every second.
    await queryEngine(scion, connectorId, "alter system set autovacuum_naptime = 1", [], "postgres")
    await queryEngine(scion, connectorId, "select pg_reload_conf()", [], "postgres")
    try {
      await queryEngine(
        scion,
        connectorId,
        `create table public.scratch_vacuumed (id int, note text) with (autovacuum_vacuum_insert_threshold = 1, autovacuum_vacuum_insert_scale_factor = 0,
           autovacuum_analyze_threshold = 1000000000, autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1)`
      )
      await queryEngine(scion, connectorId, "insert into public.scratch_vacuumed select g, repeat('x', 100) from generate_series(1, 100000) g")
      const vacuuming = async () =>
        (await queryEngine(scion, connectorId, "select count(*)::int as n from pg_stat_activity where datname = 'mirror' and backend_type = 'autovacuum worker'", [], "postgres")).rows[0].n > 0
      await waitFor("an autovacuum worker on the mirror", vacuuming, 120_000).catch(async (error: Error) => {
        // What the launcher had to go on, for the failure's report.
        const stats = await queryEngine(scion, connectorId, "select n_ins_since_vacuum, last_autovacuum, autovacuum_count from pg_stat_user_tables where relname = 'scratch_vacuumed'")
        const workers = await queryEngine(scion, connectorId, "select datname, backend_type, state, query from pg_stat_activity where backend_type like 'autovacuum%'", [], "postgres")
        throw new Error(`${error.message}: table ${JSON.stringify(stats.rows)}, autovacuum processes ${JSON.stringify(workers.rows)}`)
      })

      const response = await create(member.token, { connector_id: connectorId, name: "past-autovacuum", service_type: "postgres" })
      expect(response.status, scion.explain(response)).toBe(202)
      const operation = await settleOperation(scion, response.body.operation_id, member.token, 60_000)
      expect(operation.status, JSON.stringify(operation)).toBe("completed")
      expect(psql(operation.result.branch_url, "select 1")).toBe("1")
    } finally {
      await queryEngine(scion, connectorId, "drop table if exists public.scratch_vacuumed")
      await queryEngine(scion, connectorId, "alter system reset autovacuum_naptime", [], "postgres")
      await queryEngine(scion, connectorId, "select pg_reload_conf()", [], "postgres")
    }
  }, 240_000)

  it("SIGTERM of the branch unit while its copy holds the mirror paused: the mirror runs again before the unit exits", async () => {
    // A session of our own on the mirror keeps it busy: the copy's pause waits for it to leave
    // (BRANCH_TEMPLATE_WAIT), subscriptions disabled meanwhile.
    const record = await engineRecordOf(scion, connectorId)
    const holder = new pg.Client({ host: record.host, port: record.port, user: record.username, password: record.password, database: "mirror", ssl: { rejectUnauthorized: false } })
    await holder.connect()
    const subscriptionsEnabled = async () => (await queryEngine(scion, connectorId, "select bool_and(subenabled) as enabled from pg_subscription")).rows[0].enabled as boolean
    let unit = respawned ?? scion.branch
    try {
      const response = await create(member.token, { connector_id: connectorId, name: "stopped-mid-pause", service_type: "postgres" })
      expect(response.status, scion.explain(response)).toBe(202)
      await waitFor("the copy's pause", async () => !(await subscriptionsEnabled()), 20_000)
      expect(await unit.stop("SIGTERM")).toBe(0)
      // The stopping unit releases its pause: the subscriptions run again, not left to whichever
      // create comes next, and its engine pools were still open for it.
      expect(await subscriptionsEnabled()).toBe(true)
      expect(unit.output()).not.toContain("Cannot use a pool after calling end")
      await holder.end()
      unit = respawned = respawn(unit)
      await waitFor("the branch unit again", () => healthServing(scion.branchUrl), 30_000)
      // The create, redelivered, completes on the new process.
      const operation = await settleOperation(scion, response.body.operation_id, member.token, 120_000)
      expect(operation.status, JSON.stringify(operation)).toBe("completed")
      expect(psql(operation.result.branch_url, "select 1")).toBe("1")
    } finally {
      await holder.end().catch(() => undefined)
    }
  }, 180_000)

  it("deleting the connector deletes its branches first: they read 404 and their URLs stop working", async () => {
    const kept = await create(member.token, { connector_id: connectorId, name: "before-delete", service_type: "postgres" })
    const branch = (await settleOperation(scion, kept.body.operation_id, member.token)).result
    expect(psql(branch.branch_url, "select 1")).toBe("1")
    const removed = await scion.request("DELETE", `/v1/connectors/${connectorId}?force=true`, { token: owner.token })
    expect(removed.status, scion.explain(removed)).toBe(202)
    const operation = await settleOperation(scion, removed.body.operation_id, owner.token, 120_000)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", result: { engine: { status: "destroyed" } } })
    expect((await scion.request("GET", `/v1/branches/${branch.branch_id}`, { token: member.token })).status).toBe(404)
    expect(await queryMetadata(scion, "select count(*)::int as n from branch.branches where connector_id = $1 and status <> 'deleted'", [connectorId])).toEqual([{ n: 0 }])
    expect(() => psql(branch.branch_url, "select 1")).toThrow()
    // Nothing of Scion's is left on the source.
    const leftovers = await source.query(`select (select count(*) from pg_replication_slots)::int as slots, (select count(*) from pg_publication)::int as publications`, "app")
    expect(leftovers.rows[0]).toEqual({ slots: 0, publications: 0 })
  }, 180_000)
})
