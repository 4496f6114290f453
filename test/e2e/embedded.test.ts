/**
 * The README's start command in its embedded default: one process with embedded Postgres 18 and
 * every unit. A new user goes from sign-up to a working branch URL through the REST API alone
 * (discovery, engine setup and the branch job all in-process); Ctrl-C stops the process and its
 * engines cleanly, and the data is kept across restarts.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { startSourceCluster } from "../support/sourceCluster.js"
import { freePort, killProcessesUnder, startUnit, stopEngines, waitFor, type UnitProcess } from "../support/system.js"

const dataDir = mkdtempSync(join(tmpdir(), "scion-embedded-"))
// The embedded server runs as an unprivileged user when we are root: it must reach its directory.
chmodSync(dataDir, 0o755)
let running: UnitProcess | undefined
let engineUrl = ""

afterAll(async () => {
  await running?.stop("SIGKILL")
  await stopEngines(join(dataDir, "engines"))
  // The embedded Postgres outlives a killed process too.
  await killProcessesUnder(dataDir)
  rmSync(dataDir, { recursive: true, force: true })
})

const start = async (port: number, pgPort: number) => {
  const unit = startUnit("embedded", "services/embedded/dist/main.js", { PORT: String(port), SCION_DATA_DIR: dataDir, SCION_POSTGRES_PORT: String(pgPort), LOG_LEVEL: "Info" })
  running = unit
  await waitFor(
    "embedded gateway",
    async () => {
      if (unit.child.exitCode !== null) throw new Error(`embedded exited:\n${unit.output()}`)
      return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok
    },
    90_000
  )
  return unit
}

const post = async (url: string, body: unknown, token?: string) => {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })
  return { status: response.status, body: (await response.json()) as any }
}

describe("embedded mode", () => {
  it("starts with one command, serves the API, stops cleanly and keeps its data", async () => {
    const [port, pgPort] = [await freePort(), await freePort()]
    const base = `http://127.0.0.1:${port}`
    const first = await start(port, pgPort)
    expect(first.output()).toContain(`http://localhost:${port}`)
    const signup = await post(`${base}/v1/auth/signup`, { email: "embedded@example.com", password: "correct-horse-battery", full_name: "Embedded" })
    expect(signup.status).toBe(201)
    const org = await post(`${base}/v1/orgs`, { name: "Embedded Org" }, signup.body.session_token)
    expect(org.status).toBe(201)
    // New emails count as verified in the embedded mode, so invites can be accepted locally.
    const friend = await post(`${base}/v1/auth/signup`, { email: "friend@example.com", password: "correct-horse-battery", full_name: "Friend" })
    const invite = await post(`${base}/v1/orgs/${org.body.org_id}/invite`, { email: "friend@example.com", role_key: "member" }, signup.body.session_token)
    expect(invite.status).toBe(200)
    expect((await post(`${base}/v1/invites/${invite.body.invite_token}/accept`, {}, friend.body.session_token)).status).toBe(200)
    // Org events travel identity's outbox → the in-memory bus → billing, which sets the org up.
    const owner = { authorization: `Bearer ${signup.body.session_token}` }
    let subscription: any
    await waitFor("billing to set up the new org", async () => {
      const response = await fetch(`${base}/v1/orgs/${org.body.org_id}/billing/subscription`, { headers: owner })
      subscription = await response.json()
      return response.status === 200
    })
    expect(subscription).toMatchObject({ plan_id: "free", status: "active" })
    expect(subscription.credits_balance).toBeGreaterThan(0)
    // Projects (identity) and environments (connector) are served in-process too.
    expect((await post(`${base}/v1/projects`, { org_id: org.body.org_id, name: "web" }, signup.body.session_token)).status).toBe(201)
    const connectors = await fetch(`${base}/v1/connectors?org_id=${org.body.org_id}`, { headers: owner })
    expect({ status: connectors.status, body: await connectors.json() }).toEqual({ status: 200, body: { connectors: [] } })
    // Discovery runs in-process too: the connector unit's outbox → the in-memory bus → its worker →
    // the operation unit over the in-memory transport.
    const source = await startSourceCluster({ logical: true })
    try {
      await source.query("create table public.things (id int primary key, name text); insert into public.things select g, 'thing ' || g from generate_series(1, 100) g")
      const connector = await post(`${base}/v1/connectors`, { org_id: org.body.org_id, service_name: "postgresql", connection_details: source.details() }, signup.body.session_token)
      expect(connector.status, JSON.stringify(connector.body)).toBe(200)
      const connectorId = connector.body.connector_id
      const settle = async (operationId: string) => {
        let operation: any
        await waitFor(`operation ${operationId} to end`, async () => {
          const response = await fetch(`${base}/v1/operations/${operationId}?wait=5`, { headers: owner })
          operation = await response.json()
          return operation.status === "completed" || operation.status === "failed"
        }, 120_000)
        return operation
      }
      const started = await post(`${base}/v1/connectors/${connectorId}/discover`, {}, signup.body.session_token)
      expect(started.status, JSON.stringify(started.body)).toBe(202)
      expect(await settle(started.body.operation_id)).toMatchObject({ status: "completed", result: { schema_version: 1, tables: 1 } })

      // The whole way to a branch, in this one process: select, engine setup (an engine under
      // SCION_DATA_DIR/engines), a branch, and its URL working with psql over TLS.
      expect((await post(`${base}/v1/connectors/${connectorId}/selection`, { selected_paths: ["*"] }, signup.body.session_token)).status).toBe(200)
      const setup = await post(`${base}/v1/connectors/${connectorId}/engine-setup`, {}, signup.body.session_token)
      expect(setup.status, JSON.stringify(setup.body)).toBe(202)
      expect(await settle(setup.body.operation_id)).toMatchObject({ status: "completed", result: { branching_engine_status: "ready" } })
      expect(existsSync(join(dataDir, "engines", connectorId, "engine.json"))).toBe(true)
      const branch = await post(`${base}/v1/branch/create`, { connector_id: connectorId, name: "local-dev", service_type: "postgres" }, signup.body.session_token)
      expect(branch.status, JSON.stringify(branch.body)).toBe(202)
      const created = await settle(branch.body.operation_id)
      expect(created, JSON.stringify(created)).toMatchObject({ status: "completed", result: { status: "active", name: "local-dev" } })
      expect(execFileSync("psql", [created.result.branch_url, "-At", "-c", "select count(*) from public.things"], { encoding: "utf8", timeout: 30_000 }).trim()).toBe("100")
      engineUrl = created.result.branch_url
      // The local authority the engines' certificates chain to: served, and at its documented path;
      // psql verifies the branch with it.
      const authority = await fetch(`${base}/v1/engines/ca-certificate`)
      expect(authority.status).toBe(200)
      const caFile = join(dataDir, "engines", "ca", "ca.crt")
      expect(await authority.text()).toBe(readFileSync(caFile, "utf8"))
      const verifyFull = `${engineUrl.replace("sslmode=require", "sslmode=verify-full")}&sslrootcert=${caFile}`
      expect(execFileSync("psql", [verifyFull, "-At", "-c", "select 1"], { encoding: "utf8", timeout: 30_000 }).trim()).toBe("1")

      const code = await first.stop("SIGINT")
      expect(code, first.output().split("\n").slice(-30).join("\n")).toBe(0)
    } finally {
      await source.stop()
    }
    // Ctrl-C stopped the engine with the process.
    expect(() => execFileSync("psql", [engineUrl, "-At", "-c", "select 1"], { encoding: "utf8", timeout: 30_000, stdio: "pipe" })).toThrow()

    await start(port, pgPort)
    const login = await post(`${base}/v1/auth/login`, { email: "embedded@example.com", password: "correct-horse-battery" })
    expect(login.status).toBe(200)
    const orgs = await fetch(`${base}/v1/orgs`, { headers: { authorization: `Bearer ${login.body.session_token}` } })
    expect(((await orgs.json()) as any[]).map((o) => o.name)).toEqual(["Embedded Org"])
    // The operation unit runs in-process too: an unknown operation is 404, a bad wait 422.
    const headers = { authorization: `Bearer ${login.body.session_token}` }
    expect((await fetch(`${base}/v1/operations/op_missing`, { headers })).status).toBe(404)
    expect((await fetch(`${base}/v1/operations/op_missing?wait=1`, { headers })).status).toBe(404)
    expect((await fetch(`${base}/v1/operations/op_missing?wait=11`, { headers })).status).toBe(422)
  }, 180_000)
})
