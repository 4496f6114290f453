/**
 * pnpm bench:engine — what setting up a connector's branching engine costs, from
 * POST /v1/connectors/{id}/engine-setup to a completed operation, next to the raw logical-replication
 * initial copy of the same data (CREATE SUBSCRIPTION … WITH (copy_data = true) on a fresh
 * Postgres 18 cluster until every table is ready), measured in the same run on the same source.
 * Target: engine setup ≤ 1.3× the raw copy. Every unit is its own process (as in the e2e tests); the
 * source is a throwaway Postgres 18 cluster with generated pgbench-like tables (~BENCH_MB MB); the
 * engine is the connector unit's local engine (initdb'd per connector).
 *
 * BENCH_MB (300) source size; BENCH_RUNS (3) runs of each, interleaved, medians reported. A bench
 * reports: a missed target prints NOT MET and the run still passes; only correctness is asserted
 * (the mirror and the raw target hold as many rows as the source).
 */
import { readFile, rm } from "node:fs/promises"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { afterAll, expect, it } from "vitest"
import { queryEngine } from "../support/engine.js"
import { addMember, createOrg, settleOperation } from "../support/flows.js"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { type Scion, signUp, startScion } from "../support/system.js"

const MB = Number(process.env.BENCH_MB ?? 300)
const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 3))
const TARGET = 1.3
const DATABASE = "app"

const out = (line = "") => process.stdout.write(`${line}\n`)
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** pgbench's tables (pgbench -i layout: history has no primary key), created the same way on the raw target. */
const DDL = `
  create table pgbench_branches (bid int primary key, bbalance int, filler char(88));
  create table pgbench_tellers (tid int primary key, bid int, tbalance int, filler char(84));
  create table pgbench_accounts (aid int primary key, bid int, abalance int, filler char(84));
  create table pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));`
const TABLES = ["pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history"]

/** pgbench -i at a scale giving ~`mb` MB (scale 20 ≈ 2,000,000 accounts ≈ 300 MB with the key), in SQL. */
const generate = async (source: SourceCluster, mb: number) => {
  const scale = Math.max(1, Math.round((mb / 300) * 20))
  const started = performance.now()
  await source.query(`create database ${DATABASE}`)
  await source.query(
    `${DDL}
     insert into pgbench_branches select g, 0, '' from generate_series(1, ${scale}) g;
     insert into pgbench_tellers select g, 1 + (g - 1) / 10, 0, '' from generate_series(1, ${scale * 10}) g;
     insert into pgbench_accounts select g, 1 + (g - 1) / 100000, 0, '' from generate_series(1, ${scale * 100_000}) g;
     insert into pgbench_history select 1 + g % ${scale * 10}, 1 + g % ${scale}, g, g % 1000, now(), '' from generate_series(1, ${scale * 1000}) g;`,
    DATABASE
  )
  await source.query("vacuum analyze", DATABASE)
  const size = Number((await source.query(`select pg_database_size('${DATABASE}')::bigint as b`, DATABASE)).rows[0].b)
  const counts = await rowCounts((sql) => source.query(sql, DATABASE))
  out(`  source: pgbench scale ${scale}, ${counts.pgbench_accounts!.toLocaleString("en")} accounts rows, pg_database_size ${(size / 2 ** 20).toFixed(0)} MB (generated in ${sec(performance.now() - started)})`)
  return { size, counts }
}

const rowCounts = async (query: (sql: string) => Promise<{ rows: Array<any> }>) => {
  const counts: Record<string, number> = {}
  for (const table of TABLES) counts[table] = Number((await query(`select count(*)::bigint as n from ${table}`)).rows[0].n)
  return counts
}

/**
 * The baseline: a fresh cluster (shared_buffers as the engine's, 128 MB) with the same tables, a
 * publication on the source, CREATE SUBSCRIPTION … copy_data = true timed until every
 * pg_subscription_rel row is 'r'. Subscription (and its slot), publication and cluster removed after.
 */
const rawCopy = async (source: SourceCluster, expected: Record<string, number>, run: number) => {
  const target = await startSourceCluster({ postgresFlags: ["-c", "shared_buffers=128MB"] })
  const name = `bench_raw_${run}`
  try {
    await target.query(DDL)
    await source.query(`create publication ${name} for table ${TABLES.join(", ")}`, DATABASE)
    const conninfo = `host=${source.host} port=${source.port} user=${source.username} password=${source.password} dbname=${DATABASE} sslmode=disable`
    const started = performance.now()
    await target.query(`create subscription ${name} connection '${conninfo}' publication ${name} with (copy_data = true)`)
    for (;;) {
      const { ready, total } = (
        await target.query("select count(*) filter (where srsubstate = 'r')::int as ready, count(*)::int as total from pg_subscription_rel")
      ).rows[0]
      if (total === TABLES.length && ready === total) break
      if (performance.now() - started > 600_000) throw new Error(`raw copy: ${ready} of ${total} tables ready after 10 min`)
      await sleep(50)
    }
    const elapsed = performance.now() - started
    expect(await rowCounts((sql) => target.query(sql))).toEqual(expected)
    await target.query(`drop subscription ${name}`)
    await source.query(`drop publication ${name}`, DATABASE)
    return elapsed
  } finally {
    await target.stop()
  }
}

interface ScionRun {
  readonly discovery: number
  readonly setup: number
  readonly operation: number
  readonly stages: ReadonlyArray<readonly [string, number]>
}

/**
 * Through the REST API: a fresh connector → discover (timed apart) → select everything → decisions
 * → POST engine-setup timed until the operation is completed, the operation's stages sampled on the
 * side. Then the engine is stopped and the connector deleted (which drops its slot and publication).
 */
const scionSetup = async (scion: Scion, tokens: { orgId: string; member: string; admin: string }, source: SourceCluster, expected: Record<string, number>, run: number): Promise<ScionRun> => {
  const expectStatus = (response: { status: number; body: any }, status: number, what: string) => {
    if (response.status !== status) throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`)
  }
  const created = await scion.request("POST", "/v1/connectors", {
    token: tokens.member,
    body: { org_id: tokens.orgId, service_name: "postgresql", name: `bench ${run}`, connection_details: source.details({ database: DATABASE }) }
  })
  expectStatus(created, 200, "create connector")
  const connectorId = created.body.connector_id as string

  const discoveryStarted = performance.now()
  const discovered = await scion.request("POST", `/v1/connectors/${connectorId}/discover`, { token: tokens.member })
  expectStatus(discovered, 202, "discover")
  const discovery = await settleOperation(scion, discovered.body.operation_id, tokens.member)
  if (discovery.status !== "completed") throw new Error(`discovery: ${JSON.stringify(discovery)}`)
  const discoveryMs = performance.now() - discoveryStarted

  const selected = await scion.request("POST", `/v1/connectors/${connectorId}/selection`, { token: tokens.admin, body: { selected_paths: ["*"] } })
  expectStatus(selected, 200, "selection")
  const missing: ReadonlyArray<string> = selected.body.replica_identity_preflight?.tables_without_replica_identity ?? []
  if (missing.length > 0) {
    const decisions = Object.fromEntries(missing.map((path) => [path, "replica_identity_full"]))
    expectStatus(await scion.request("PUT", `/v1/connectors/${connectorId}/replica-identity-decisions`, { token: tokens.admin, body: { decisions } }), 200, "decisions")
  }

  const started = performance.now()
  const response = await scion.request("POST", `/v1/connectors/${connectorId}/engine-setup`, { token: tokens.member })
  expectStatus(response, 202, "engine-setup")
  const operationId = response.body.operation_id as string
  // The stages as a client sees them: first sighting of each, sampled every 100 ms on the side.
  const stages: Array<readonly [string, number]> = []
  let done = false
  const sampler = (async () => {
    while (!done) {
      const seen = await scion.request("GET", `/v1/operations/${operationId}`, { token: tokens.member }).catch(() => undefined)
      const stage = seen?.body?.stage as string | null | undefined
      if (typeof stage === "string" && stages.at(-1)?.[0] !== stage) stages.push([stage, performance.now() - started])
      await sleep(100)
    }
  })()
  const operation = await settleOperation(scion, operationId, tokens.member, 600_000)
  const setupMs = performance.now() - started
  done = true
  await sampler
  if (operation.status !== "completed") throw new Error(`engine setup: ${JSON.stringify(operation)}`)
  const operationMs = Date.parse(operation.completed_at) - Date.parse(operation.created_at)

  const mirrored = await rowCounts((sql) => queryEngine(scion, connectorId, sql))
  expect(mirrored).toEqual(expected)

  await stopEngine(scion, connectorId)
  // What the setup made on the source: its slot (inactive once the engine is gone) and publication.
  for (let i = 0; i < 100; i++) {
    const active = (await source.query("select count(*)::int as n from pg_replication_slots where active", DATABASE)).rows[0].n
    if (active === 0) break
    await sleep(100)
  }
  // The connector goes (the free plan allows 3 per org): its delete job drops the slot and the
  // publication on the source; anything it left is dropped here.
  const deleted = await scion.request("DELETE", `/v1/connectors/${connectorId}`, { token: tokens.admin })
  expectStatus(deleted, 202, "delete connector")
  const deletion = await settleOperation(scion, deleted.body.operation_id, tokens.admin)
  if (deletion.status !== "completed") throw new Error(`connector delete: ${JSON.stringify(deletion)}`)
  await source.query("select pg_drop_replication_slot(slot_name) from pg_replication_slots where not active", DATABASE)
  for (const { pubname } of (await source.query("select pubname from pg_publication", DATABASE)).rows) {
    await source.query(`drop publication "${pubname}"`, DATABASE)
  }
  return { discovery: discoveryMs, setup: setupMs, operation: operationMs, stages }
}

/**
 * Stops one connector's engine (an immediate shutdown of its postmaster) and removes its directory.
 * The connector unit's monitors start an engine they find stopped (the local adapter's start is
 * "make sure it runs"), so one may come back while the directory goes: stopped again, and removed again.
 */
const stopEngine = async (scion: Scion, connectorId: string) => {
  const dir = join(scion.engineDataDir, connectorId)
  for (let attempt = 0; ; attempt++) {
    const pid = Number((await readFile(join(dir, "pgdata", "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0])
    if (Number.isInteger(pid) && pid > 0) {
      try {
        process.kill(pid, "SIGQUIT")
        for (let i = 0; i < 100; i++) {
          process.kill(pid, 0)
          await sleep(50)
        }
      } catch {}
    }
    try {
      return await rm(dir, { recursive: true, force: true })
    } catch (error) {
      if (attempt >= 10) throw error
      await sleep(200)
    }
  }
}

const teardown: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const stop of teardown.reverse()) await stop().catch((e) => out(`  cleanup: ${String(e)}`))
})

it("bench:engine", async () => {
  out(`\nbench:engine — engine setup vs the raw logical-replication initial copy, ~${MB} MB, ${RUNS} run(s) each\n`)
  const loadAtStart = loadavg().map((v) => v.toFixed(1)).join(" ")
  const source = await startSourceCluster({ logical: true })
  teardown.push(source.stop)
  const { size, counts } = await generate(source, MB)

  const scion = await startScion()
  teardown.push(scion.stop)
  const owner = await signUp(scion, "bench-owner")
  const orgId = (await createOrg(scion, owner.token, "Bench")).org_id
  const member = await addMember(scion, owner.token, orgId, "member")

  const raw: Array<number> = []
  const runs: Array<ScionRun> = []
  for (let run = 1; run <= RUNS; run++) {
    const rawMs = await rawCopy(source, counts, run)
    raw.push(rawMs)
    out(`  run ${run}: raw copy ${sec(rawMs)}`)
    const result = await scionSetup(scion, { orgId, member: member.token, admin: owner.token }, source, counts, run)
    runs.push(result)
    out(`  run ${run}: engine setup ${sec(result.setup)} (operation created_at → completed_at ${sec(result.operation)}; discovery before it ${sec(result.discovery)})`)
    out(`         stages first seen at: ${result.stages.map(([stage, at]) => `${stage} ${sec(at)}`).join(", ")}`)
  }

  const rawMedian = median(raw)
  const setupMedian = median(runs.map((r) => r.setup))
  const ratio = setupMedian / rawMedian
  out()
  const row = (label: string, value: string) => out(`  ${label.padEnd(52)} ${value}`)
  row("source size (pg_database_size)", `${(size / 2 ** 20).toFixed(0)} MB`)
  row("raw initial copy (CREATE SUBSCRIPTION → all 'r')", `median ${sec(rawMedian)}   (all: ${raw.map(sec).join(", ")})`)
  row("Scion engine setup (POST engine-setup → completed)", `median ${sec(setupMedian)}   (all: ${runs.map((r) => sec(r.setup)).join(", ")})`)
  row("  operation created_at → completed_at", `median ${sec(median(runs.map((r) => r.operation)))}`)
  row("  discovery (not in the ratio)", `median ${sec(median(runs.map((r) => r.discovery)))}`)
  row("ratio Scion / raw", `${ratio.toFixed(2)}×   target ≤ ${TARGET}× — ${ratio <= TARGET ? "MET" : "NOT MET"}`)
  out(`  (machine: ${cpus().length} CPUs, load average ${loadavg().map((v) => v.toFixed(1)).join(" ")} at the end, ${loadAtStart} at the start: other work on the machine skews both sides)`)
  out()

  await scion.stop()
  teardown.pop()
  await source.stop()
  teardown.pop()
})
