/**
 * pnpm bench:schema-change — how soon the mirror follows a schema change: from the commit of
 * `ALTER TABLE … ADD COLUMN` on the source to the first row that uses the new column being
 * visible in the mirror, p50/p99 over BENCH_CHANGES (20) changes, for a source that captures
 * (its role may create event triggers) and one that reconciles (it may not; the monitor checks
 * every BENCH_MONITOR_INTERVAL, 2 s). The baseline, measured in the same run on the same mirror,
 * is a plain row: insert → visible. Targets: capture p99 < 1 s; reconcile p99 < one monitor
 * interval + 1 s. A missed target prints NOT MET; only correctness is asserted.
 */
import { cpus, loadavg } from "node:os"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { afterAll, expect, it } from "vitest"
import { engineRecordOf, readyConnector } from "../support/engine.js"
import { teamOrg } from "../support/flows.js"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { type Scion, startScion } from "../support/system.js"

const CHANGES = Math.max(2, Number(process.env.BENCH_CHANGES ?? 20))
const MONITOR_SECONDS = Number(process.env.BENCH_MONITOR_INTERVAL ?? 2)

const out = (line = "") => process.stdout.write(`${line}\n`)
const ms = (value: number) => `${value.toFixed(0)} ms`
const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

let scion: Scion | undefined
const sources: Array<SourceCluster> = []
const clients: Array<pg.Client> = []

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)))
  await Promise.all([scion?.stop(), ...sources.map((s) => s.stop())])
})

/** A client on the connector's mirror, kept open: polling must not pay a TLS handshake each time. */
const mirrorClient = async (system: Scion, connectorId: string) => {
  const record = await engineRecordOf(system, connectorId)
  const client = new pg.Client({ host: record.host, port: record.port, user: record.username, password: record.password, database: "mirror", ssl: { rejectUnauthorized: false } })
  await client.connect()
  clients.push(client)
  return client
}

const sourceClient = async (source: SourceCluster, user = source.username, password = source.password) => {
  const client = new pg.Client({ host: source.host, port: source.port, user, password, database: "postgres" })
  await client.connect()
  clients.push(client)
  return client
}

/** Polls until the probe answers true; the elapsed milliseconds since `from`. */
const visibleAfter = async (from: number, probe: () => Promise<boolean>, timeoutMs: number) => {
  while (performance.now() - from < timeoutMs) {
    if (await probe().catch(() => false)) return performance.now() - from
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error(`not visible within ${timeoutMs} ms`)
}

const measure = async (label: string, source: pg.Client, mirror: pg.Client, timeoutMs: number) => {
  const rows: Array<number> = []
  const changes: Array<number> = []
  for (let i = 0; i < CHANGES; i++) {
    // Baseline: a row on the same table, insert → visible.
    const rowStart = performance.now()
    const { rows: inserted } = await source.query("insert into public.items (label) values ('plain') returning id")
    const plainId = inserted[0].id
    rows.push(await visibleAfter(rowStart, async () => (await mirror.query("select 1 from public.items where id = $1", [plainId])).rowCount === 1, timeoutMs))

    // The change: ALTER committed, then a row that uses the new column.
    const column = `c${i}`
    const changeStart = performance.now()
    await source.query(`alter table public.items add column ${column} int`)
    const { rows: used } = await source.query(`insert into public.items (label, ${column}) values ('uses', ${i}) returning id`)
    const usedId = used[0].id
    changes.push(
      await visibleAfter(changeStart, async () => (await mirror.query(`select ${column} as v from public.items where id = $1`, [usedId])).rows[0]?.v === i, timeoutMs)
    )
  }
  const p50 = percentile(changes, 50)
  const p99 = percentile(changes, 99)
  out(`  ${label}: ADD COLUMN commit → first row using it visible: p50 ${ms(p50)}, p99 ${ms(p99)} over ${CHANGES} changes`)
  out(`  ${label}: baseline (a plain row, same table): p50 ${ms(percentile(rows, 50))}, p99 ${ms(percentile(rows, 99))}; ratio p50 ${(p50 / Math.max(1, percentile(rows, 50))).toFixed(1)}×`)
  return { p50, p99 }
}

it("schema change → visible in the mirror, with capture and with reconciliation", async () => {
  out(`\nbench:schema-change — ${cpus().length} CPUs, load ${loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  const [system, capturing, reconciling] = await Promise.all([
    startScion({ env: { QUARANTINE_MONITOR_INTERVAL: `${MONITOR_SECONDS} seconds`, LOG_LEVEL: "Warning" } }),
    startSourceCluster({ logical: true }),
    startSourceCluster({ logical: true })
  ])
  scion = system
  sources.push(capturing, reconciling)
  const ddl = "create table public.items (id bigserial primary key, label text not null)"
  await capturing.query(ddl)
  await reconciling.query(`
    create role app_owner login replication password 'owner-pw';
    grant create on database postgres to app_owner;
    grant create on schema public to app_owner;
    set role app_owner;
    ${ddl};
    reset role;`)
  const org = await teamOrg(system, "Bench Org")
  const setUp = (source: SourceCluster) => readyConnector(system, { orgId: org.orgId, memberToken: org.tokens.member, adminToken: org.tokens.admin, source })
  const captured = await setUp(capturing)
  const reconciled = await setUp({ ...reconciling, details: (o: Record<string, unknown> = {}) => reconciling.details({ username: "app_owner", password: "owner-pw", ...o }) })

  const capture = await measure("capture", await sourceClient(capturing), await mirrorClient(system, captured.connectorId), 30_000)
  const reconcile = await measure(`reconcile (monitor every ${MONITOR_SECONDS} s)`, await sourceClient(reconciling, "app_owner", "owner-pw"), await mirrorClient(system, reconciled.connectorId), 60_000)

  out()
  out(`  target capture p99 < 1000 ms: ${capture.p99 < 1000 ? "met" : "NOT MET"} (${ms(capture.p99)})`)
  const bound = MONITOR_SECONDS * 1000 + 1000
  out(`  target reconcile p99 < ${ms(bound)} (interval + 1 s): ${reconcile.p99 < bound ? "met" : "NOT MET"} (${ms(reconcile.p99)})`)
  expect(capture.p50).toBeGreaterThan(0)
  expect(reconcile.p50).toBeGreaterThan(0)
}, 1_800_000)
