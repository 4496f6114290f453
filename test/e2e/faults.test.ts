/**
 * The fault matrix in the production shape: separate processes on a NATS and a metadata
 * PostgreSQL of this file's own (so they can be stopped without touching other tests), a real
 * source and a ready engine. Each fault: SIGKILL of every unit while a branch is being created,
 * of the operation unit during a long-poll wait and of the connector unit during a connector
 * delete and during an engine setup; NATS restarted mid-job; the metadata database restarted. Afterwards every operation has
 * ended (completed, or failed with a message), nothing is orphaned, the gateway answered 503
 * rather than 500 while something was down, and the system recovered by itself.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryEngine, readyConnector } from "../support/engine.js"
import { createOrg, queryMetadata, settleOperation } from "../support/flows.js"
import { type NatsServer, startNatsServer } from "../support/nats.js"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { healthServing, respawn, type Scion, signUp, startScion, type UnitProcess, waitFor, psql } from "../support/system.js"

let nats: NatsServer
let metadata: SourceCluster
let source: SourceCluster
let scion: Scion
let token: string
let connectorId: string
/** Units started again after a SIGKILL, by name: the latest process of each. */
const current = new Map<string, UnitProcess>()


const unitNamed = (name: string): UnitProcess =>
  current.get(name) ?? (name.startsWith("operation-") ? scion.operations[Number(name.split("-")[1]) - 1]! : (scion as unknown as Record<string, UnitProcess>)[name]!)

const healthUrl = (name: string) =>
  ({ identity: scion.identityUrl, "operation-1": scion.operationUrls[0]!, billing: scion.billingUrl, connector: scion.connectorUrl, branch: scion.branchUrl })[name]!

/** SIGKILL, then the same unit again; resolves once it reports SERVING. */
const killAndRestart = async (name: string, whileDown: () => Promise<void> = async () => {}) => {
  await unitNamed(name).stop("SIGKILL")
  await whileDown()
  const again = respawn(unitNamed(name))
  current.set(name, again)
  await waitFor(`${name} serving again`, () => healthServing(healthUrl(name)), 60_000)
}

/** Every branch database and role on the engine belongs to a live branch; nothing half-made stays. */
const expectNoOrphans = async () => {
  await waitFor("no branch left creating", async () => (await queryMetadata(scion, "select 1 from branch.branches where status in ('creating', 'deleting')")).length === 0, 60_000)
  const live = await queryMetadata(scion, "select database_name, role_name from branch.branches where connector_id = $1 and status = 'active'", [connectorId])
  const databases = (await queryEngine(scion, connectorId, "select datname from pg_database where datname like 'scion_br_%'", [], "postgres")).rows.map((r) => r.datname).sort()
  const roles = (await queryEngine(scion, connectorId, "select rolname from pg_roles where rolname like 'scion_br_%'", [], "postgres")).rows.map((r) => r.rolname).sort()
  expect(databases).toEqual(live.map((r) => r.database_name).sort())
  expect(roles).toEqual(live.map((r) => r.role_name).sort())
}

/** Waits for an operation to end, retrying through 503s; one that failed says why. Callers assert which end. */
const ended = async (operationId: string) => {
  const operation = await settleOperation(scion, operationId, token, 180_000)
  if (operation.status === "failed") expect(operation.error, JSON.stringify(operation)).toMatch(/\S/)
  return operation
}

/**
 * A source position 16 MB ahead of the source's WAL (its own background writes do not get there
 * meanwhile): a create given it as min_source_lsn stays running at its catch_up stage until
 * passSourcePosition, so a fault lands while the create is in flight.
 */
const aheadOfSource = async () => (await source.query("select (pg_current_wal_lsn() + 16777216)::text as lsn")).rows[0].lsn as string

/** Moves the source's WAL past `lsn` (segment switches), then commits a change the mirror applies. */
const passSourcePosition = async (lsn: string) => {
  const past = async () => (await source.query(`select pg_current_wal_lsn() >= '${lsn}'::pg_lsn as past`)).rows[0].past as boolean
  for (let i = 0; i < 4 && !(await past()); i++) await source.query("select txid_current(); select pg_switch_wal()")
  expect(await past()).toBe(true)
  await source.query("update items set title = title where id = 1", "app")
}

/** Resolves once GET /v1/operations/{id} reads the operation running at `stage`. */
const runningAt = (operationId: string, stage: string) =>
  waitFor(`operation ${operationId} running at ${stage}`, async () => {
    const read = await scion.request("GET", `/v1/operations/${operationId}`, { token })
    return read.body.status === "running" && read.body.stage === stage
  })

const createBranch = async (name: string, extra: Record<string, unknown> = {}) => {
  const response = await scion.request("POST", "/v1/branch/create", { token, body: { connector_id: connectorId, name, service_type: "postgres", ...extra } })
  expect(response.status, scion.explain(response)).toBe(202)
  return response.body as { operation_id: string; resource_id: string }
}

beforeAll(async () => {
  ;[nats, metadata, source] = await Promise.all([startNatsServer(), startSourceCluster({ postgresFlags: ["-c", "max_connections=300"] }), startSourceCluster()])
  await source.query("create database app")
  await source.query("create table items (id bigint primary key, title text not null); insert into items select g, 'item ' || g from generate_series(1, 200) g", "app")
  scion = await startScion({
    natsUrl: nats.url,
    metadataServerUrl: `postgres://postgres:${encodeURIComponent(metadata.password)}@127.0.0.1:${metadata.port}/postgres`,
    // Reads of a stopped unit fail fast; the branch jobs notice a lost worker within seconds.
    env: { BRANCH_JOB_ACK_WAIT: "3 seconds", BRANCH_CATCH_UP_TIMEOUT: "20 seconds" }
  })
  const owner = await signUp(scion, "faults")
  token = owner.token
  const orgId = (await createOrg(scion, token, "Faults")).org_id
  connectorId = (await readyConnector(scion, { orgId, memberToken: token, adminToken: token, source, database: "app" })).connectorId
}, 300_000)

afterAll(async () => {
  await Promise.all(Array.from(current.values(), (unit) => unit.stop()))
  await scion?.stop()
  await Promise.all([nats?.dispose(), metadata?.stop(), source?.stop()])
})

describe("the fault matrix", () => {
  it("SIGKILL of each unit while a branch is being created: the create ends, the gateway says 503 (never 500) meanwhile, nothing is orphaned", async () => {
    for (const name of ["branch", "operation-1", "connector", "identity", "billing"]) {
      // Held at catch_up (a source position not written yet): the kill lands while it runs.
      const position = await aheadOfSource()
      const started = await createBranch(`kill-${name}`, { min_source_lsn: position })
      await runningAt(started.operation_id, "catch_up")
      await killAndRestart(name, async () => {
        const read = await scion.request("GET", `/v1/branches/${started.resource_id}`, { token })
        expect([200, 503], `${name} down: ${read.status} ${JSON.stringify(read.body)}`).toContain(read.status)
        // The source moves on while the unit is down; the create goes on (or is redelivered) and completes.
        await passSourcePosition(position)
      })
      const operation = await ended(started.operation_id)
      expect(operation.status, `${name} killed: ${JSON.stringify(operation)}`).toBe("completed")
      expect(psql(operation.result.branch_url, "select count(*) from items")).toBe("200")
    }
    await expectNoOrphans()
  }, 600_000)

  it("SIGKILL of the operation unit during a long-poll wait: the wait answers 503, and waits work once it is back", async () => {
    // A create that waits for a source position the mirror will not reach for a while.
    const started = await createBranch("held", { min_source_lsn: "FF/FFFFFFFF" })
    const waiting = scion.request("GET", `/v1/operations/${started.operation_id}?wait=10`, { token })
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await killAndRestart("operation-1")
    const answered = await waiting
    expect(answered.status, scion.explain(answered)).toBe(503)
    const again = await scion.request("GET", `/v1/operations/${started.operation_id}?wait=1`, { token })
    expect(again.status).toBe(200)
    const operation = await ended(started.operation_id)
    expect(operation).toMatchObject({ status: "failed", error: expect.stringMatching(/did not reach the source position/) })
    await expectNoOrphans()
  }, 180_000)

  it("NATS restarted while a create is in flight: the create completes once, by itself", async () => {
    const started = await createBranch("through-nats-restart")
    await nats.stop()
    await new Promise((resolve) => setTimeout(resolve, 2000))
    await nats.start()
    const operation = await ended(started.operation_id)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(psql(operation.result.branch_url, "select count(*) from items")).toBe("200")
    // A redelivered job resumed: no second copy left behind, every branch database and role on
    // the engine belongs to a live branch.
    await expectNoOrphans()
  }, 180_000)

  it("the metadata database restarted: requests answer 503 while it is down, and the system recovers by itself", async () => {
    const orgs = await scion.request("GET", "/v1/orgs", { token })
    expect(orgs.status).toBe(200)
    await metadata.pause()
    try {
      for (const [method, path, body] of [
        ["GET", "/v1/orgs", undefined],
        ["GET", `/v1/branches?connector_id=${connectorId}`, undefined],
        ["POST", "/v1/branch/create", { connector_id: connectorId, name: "while-down", service_type: "postgres" }]
      ] as const) {
        const response = await scion.request(method, path, { token, ...(body === undefined ? {} : { body }) })
        expect(response.status, `${method} ${path}: ${response.status} ${JSON.stringify(response.body)}`).toBe(503)
        expect(typeof response.body.detail).toBe("string")
      }
    } finally {
      await metadata.resume()
    }
    await waitFor("reads to work again", async () => (await scion.request("GET", "/v1/orgs", { token })).status === 200, 60_000)
    const started = await createBranch("after-restart")
    expect((await ended(started.operation_id)).status).toBe("completed")
    await expectNoOrphans()
  }, 180_000)

  it("SIGKILL of the connector unit during engine setup: the setup ends by itself, and a second try or the delete leaves nothing behind", async () => {
    const created = await scion.request("POST", "/v1/connectors", {
      token,
      body: { org_id: (await queryMetadata(scion, "select org_id from connector.connectors where id = $1", [connectorId]))[0].org_id, service_name: "postgresql", name: "second", connection_details: source.details({ database: "app" }) }
    })
    expect(created.status, scion.explain(created)).toBe(200)
    const second = created.body.connector_id as string
    expect((await ended((await scion.request("POST", `/v1/connectors/${second}/discover`, { token })).body.operation_id)).status).toBe("completed")
    expect((await scion.request("POST", `/v1/connectors/${second}/selection`, { token, body: { selected_paths: ["*"] } })).status).toBe(200)
    const setup = await scion.request("POST", `/v1/connectors/${second}/engine-setup`, { token })
    expect(setup.status, scion.explain(setup)).toBe(202)
    // The setup of a small source takes a couple of seconds: the kill lands in its first steps.
    await new Promise((resolve) => setTimeout(resolve, 300))
    await killAndRestart("connector")
    const operation = await ended(setup.body.operation_id)
    if (operation.status === "failed") {
      // A setup that gave up can be started again and completes.
      const retried = await scion.request("POST", `/v1/connectors/${second}/engine-setup`, { token })
      expect(retried.status, scion.explain(retried)).toBe(202)
      expect((await ended(retried.body.operation_id)).status).toBe("completed")
    }
    await waitFor("the second engine ready", async () => (await scion.request("GET", `/v1/connectors/${second}`, { token })).body.branching_engine_status === "ready", 60_000)
    const removed = await scion.request("DELETE", `/v1/connectors/${second}`, { token })
    expect(removed.status, scion.explain(removed)).toBe(202)
    expect((await ended(removed.body.operation_id)).status).toBe("completed")
    // Only the first connector's slot and publication remain on the source.
    const slots = await source.query(`select slot_name from pg_replication_slots where slot_name like 'scion_${second.toLowerCase()}%'`, "app")
    expect(slots.rows).toEqual([])
  }, 300_000)

  it("SIGKILL of the connector unit during a connector delete: the delete completes, and nothing of Scion's is left on the source", async () => {
    const removed = await scion.request("DELETE", `/v1/connectors/${connectorId}?force=true`, { token })
    expect(removed.status, scion.explain(removed)).toBe(202)
    await new Promise((resolve) => setTimeout(resolve, 300))
    await killAndRestart("connector")
    const operation = await ended(removed.body.operation_id)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    const leftovers = await source.query("select (select count(*) from pg_replication_slots)::int as slots, (select count(*) from pg_publication)::int as publications", "app")
    expect(leftovers.rows[0]).toEqual({ slots: 0, publications: 0 })
    expect(await queryMetadata(scion, "select count(*)::int as n from branch.branches where connector_id = $1 and status <> 'deleted'", [connectorId])).toEqual([{ n: 0 }])
  }, 240_000)
})
