/**
 * Deep reset (issue 11), end to end with separate processes: a new pipeline is built in shadow
 * while branches keep being cut from the current mirror, cut over, rolled back, cut over again
 * by a second deep reset; every branch create in the meantime succeeds, and once the rollback
 * grace is over the cleanup leaves exactly one slot and one publication on the source.
 * Spare copies are on (BRANCH_SPARE_COPIES=on, though the engines here are not on reflink
 * storage): the branch unit cuts one as soon as the connector announces the engine ready, and
 * the creates under load take them across every switch of the mirror.
 */
import { execFileSync } from "node:child_process"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryEngine, readyConnector } from "../support/engine.js"
import { queryMetadata, settleOperation, teamOrg } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let source: SourceCluster
let tokens: Record<"viewer" | "member" | "admin" | "owner", string>
let strangerToken: string
let connectorId: string

beforeAll(async () => {
  ;[scion, source] = await Promise.all([
    startScion({ env: { QUARANTINE_MONITOR_INTERVAL: "1 seconds", SCHEMA_FOLLOW_INTERVAL: "200 millis", PIPELINE_ROLLBACK_GRACE: "20 seconds", BRANCH_SPARE_COPIES: "on" } }),
    startSourceCluster({ logical: true })
  ])
  await source.query(`
    create table public.accounts (id bigserial primary key, email text not null);
    insert into public.accounts (email) select 'a' || g || '@example.com' from generate_series(1, 5000) g;`)
  const org = await teamOrg(scion, "Deep Reset Org")
  tokens = org.tokens
  strangerToken = org.strangerToken
  connectorId = (await readyConnector(scion, { orgId: org.orgId, memberToken: tokens.member, adminToken: tokens.admin, source })).connectorId
}, 300_000)

afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

const post = (path: string, token = tokens.member) => scion.request("POST", `/v1/connectors/${connectorId}/${path}`, { token })
const activePipeline = async () => (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body.replication.active_pipeline_id as string
const settled = async (operationId: string) => {
  const operation = await settleOperation(scion, operationId, tokens.member, 180_000)
  expect(operation.status, JSON.stringify(operation)).toBe("completed")
  return operation
}

/** Creates (and deletes) branches one after another until stopped; answers what happened to each. */
const startBranchLoad = () => {
  let running = true
  const outcomes: Array<{ name: string; status: string; error?: string }> = []
  const done = (async () => {
    for (let n = 0; running; n++) {
      const name = `load-${n}`
      const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: connectorId, name, service_type: "postgres" } })
      if (created.status !== 202) {
        outcomes.push({ name, status: `http ${created.status}`, error: JSON.stringify(created.body) })
        continue
      }
      const operation = await settleOperation(scion, created.body.operation_id, tokens.member, 60_000)
      outcomes.push({ name, status: operation.status, ...(operation.error ? { error: operation.error } : {}) })
      if (operation.status === "completed") await scion.request("DELETE", `/v1/branches/${operation.result.branch_id}`, { token: tokens.member })
    }
  })()
  return { count: () => outcomes.length, stop: async () => ((running = false), await done, outcomes) }
}

/** The engine's stamped spares (databases the branch unit cut ahead of the next create) or its branches' databases, with their oids. */
const enginesDatabases = async (prefix: "scion_spare_" | "scion_br_") =>
  (
    await queryEngine(
      scion,
      connectorId,
      "select datname, oid::text as oid from pg_database where starts_with(datname, $1) and (shobj_description(oid, 'pg_database') is not null or $1 = 'scion_br_')",
      [prefix],
      "postgres"
    )
  ).rows as Array<{ datname: string; oid: string }>

describe("deep reset", () => {
  it("has a spare copy of the mirror cut as soon as the engine is ready, before any branch is asked for; the first create takes it", async () => {
    // No branch has been asked for on this connector: the spare comes from the connector's engine-ready event.
    expect((await scion.request("GET", `/v1/branches?connector_id=${connectorId}`, { token: tokens.member })).body.branches).toEqual([])
    await waitFor("a spare of the new mirror", async () => (await enginesDatabases("scion_spare_")).length === 1, 20_000)
    const [spare] = await enginesDatabases("scion_spare_")
    // The first create takes it: the spare's database, renamed to the branch's.
    const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: connectorId, name: "first", service_type: "postgres" } })
    expect(created.status, scion.explain(created)).toBe(202)
    const first = await settled(created.body.operation_id)
    expect((await enginesDatabases("scion_br_")).map((d) => d.oid)).toEqual([spare!.oid])
    // Readied ahead, it is the branch's own as any copy is: its role writes, alters and creates there.
    const written = execFileSync(
      "psql",
      [first.result.branch_url, "-v", "ON_ERROR_STOP=1", "-At", "-c", "insert into accounts (email) values ('spare@example.com'); alter table accounts add column note text; create table mine (id int); select count(*) from accounts"],
      { encoding: "utf8", timeout: 30_000 }
    )
    expect(written.trim().split("\n").at(-1)).toBe("5001")
    const deleted = await scion.request("DELETE", `/v1/branches/${first.result.branch_id}`, { token: tokens.member })
    expect(deleted.status).toBe(202)
    await settled(deleted.body.operation_id)
  })

  it("refuses callers that may not, other orgs, and a rollback with nothing to return to", async () => {
    expect((await post("deep-reset", tokens.viewer)).status).toBe(403)
    expect((await post("deep-reset", strangerToken)).status).toBe(404)
    const nothing = await post("replication-rollback")
    expect(nothing.status, scion.explain(nothing)).toBe(422)
    expect(nothing.body.detail).toMatch(/no replaced pipeline/)
  })

  it("shadow, cutover, rollback and cutover again while branches are created: none fails; the cleanup leaves one slot and one publication", async () => {
    const base = `scion_${connectorId.toLowerCase()}`
    expect(await activePipeline()).toBe(base)
    const load = startBranchLoad()

    // Deep reset: the shadow is built beside the active pipeline, then cut over.
    const first = await post("deep-reset")
    expect(first.status, scion.explain(first)).toBe(202)
    expect(first.body).toMatchObject({ type: "connector_deep_reset", resource_id: connectorId })
    expect((await post("reset")).status).toBe(409)
    const built = await settled(first.body.operation_id)
    expect(built.result).toMatchObject({ pipeline_id: `${base}_g2`, mirror_database: "mirror_g2" })
    const cutover = await settled(built.result.cutover_operation_id)
    expect(cutover).toMatchObject({ type: "connector_cdc_cutover", result: { active_pipeline_id: `${base}_g2`, retired_pipeline_id: base } })
    expect(await activePipeline()).toBe(`${base}_g2`)
    // The new mirror streams: a row written now reaches it.
    await source.query("insert into public.accounts (email) values ('after-cutover@example.com')")
    await waitFor("the row in the new mirror", async () =>
      (await queryEngine(scion, connectorId, "select count(*)::int as n from public.accounts where email = 'after-cutover@example.com'", [], "mirror_g2")).rows[0].n === 1, 30_000)

    // Rollback: branch creation goes back to the first pipeline, which kept replicating.
    const rollback = await post("replication-rollback")
    expect(rollback.status, scion.explain(rollback)).toBe(202)
    expect(rollback.body.type).toBe("connector_replication_rollback")
    const rolledBack = await settled(rollback.body.operation_id)
    expect(rolledBack.result).toMatchObject({ active_pipeline_id: base, retired_pipeline_id: `${base}_g2` })
    expect(await activePipeline()).toBe(base)
    // The first mirror kept replicating while retired: the row reaches it too (its apply worker
    // may trail the new mirror's under load; nothing waits for it to catch up at the switch).
    await waitFor("the row in the first mirror", async () =>
      (await queryEngine(scion, connectorId, "select count(*)::int as n from public.accounts where email = 'after-cutover@example.com'")).rows[0].n === 1, 30_000)

    // Cutover again: a second deep reset builds generation 3.
    const second = await post("deep-reset")
    expect(second.status, scion.explain(second)).toBe(202)
    const builtAgain = await settled(second.body.operation_id)
    await settled(builtAgain.result.cutover_operation_id)
    expect(await activePipeline()).toBe(`${base}_g3`)

    // Creates went on throughout; a few more run against the last cutover's mirror.
    const before = load.count()
    await waitFor("branch creates after the last cutover", async () => load.count() >= before + 2, 60_000)
    const outcomes = await load.stop()
    expect(outcomes.length).toBeGreaterThanOrEqual(3)
    expect(outcomes.filter((o) => o.status !== "completed"), JSON.stringify(outcomes)).toEqual([])

    // After the grace: the replaced pipelines are cleaned up, each by an operation of its own.
    await waitFor("the replaced pipelines to be cleaned up", async () => {
      const left = await source.query(
        `select (select count(*) from pg_replication_slots where slot_name like '${base}%')::int as slots,
                (select count(*) from pg_publication where pubname like '${base}%')::int as publications`
      )
      return left.rows[0].slots === 1 && left.rows[0].publications === 1
    }, 90_000)
    const [slot] = (await source.query(`select slot_name from pg_replication_slots where slot_name like '${base}%'`)).rows
    expect(slot.slot_name).toBe(`${base}_g3`)
    const databases = (await queryEngine(scion, connectorId, "select datname from pg_database where datname like 'mirror%' order by 1", [], "postgres")).rows.map((r) => r.datname)
    expect(databases).toEqual(["mirror_g3"])
    const pipelines = await queryMetadata(scion, "select id, status, cleanup_operation_id from connector.pipelines where connector_id = $1 order by generation", [connectorId])
    expect(pipelines.map((p: { id: string; status: string }) => [p.id, p.status])).toEqual([[base, "cleaned"], [`${base}_g2`, "cleaned"], [`${base}_g3`, "active"]])
    for (const p of pipelines.filter((p: { status: string }) => p.status === "cleaned")) {
      const cleanup = (await scion.request("GET", `/v1/operations/${p.cleanup_operation_id}`, { token: tokens.member })).body
      expect(cleanup).toMatchObject({ type: "connector_cdc_shadow_cleanup", status: "completed" })
    }
    // Branches are cut from the new mirror.
    const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: connectorId, name: "after-cleanup", service_type: "postgres" } })
    const operation = await settled(created.body.operation_id)
    const client = new pg.Client({ connectionString: operation.result.branch_url.replace("sslmode=require", "sslmode=no-verify") })
    await client.connect()
    try {
      expect((await client.query("select count(*)::int as n from public.accounts where email = 'after-cutover@example.com'")).rows[0].n).toBe(1)
    } finally {
      await client.end()
    }
  }, 400_000)
})
