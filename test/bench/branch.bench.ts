/**
 * pnpm bench:branch — what a branch costs, from POST /v1/branch/create to a completed operation
 * whose branch_url answers a query, next to the raw template copy and a logical dump/restore of
 * the same data, measured in the same run. Every unit is its own process (as in the e2e tests),
 * the source is a throwaway Postgres 18 cluster with a generated pgbench-like table, the engine is
 * the connector unit's local engine, set up through the REST API.
 *
 *   1. ~BENCH_SMALL_MB (300) MB on the default engine storage (ext4 here): branch vs
 *      CREATE DATABASE … TEMPLATE (each branch followed by one raw copy, so both meet the disk
 *      with the same write-back behind them) vs dump | restore; prints the ratios (target: branch ≤ 1.1× the
 *      template copy), then 10 creates at once against a single one (target ≤ 2×).
 *   2. The engines' data directory on XFS made with reflink=1 (a loop device; needs root and
 *      xfsprogs) and file_copy_method = clone, at ~BENCH_SMALL_MB and ~BENCH_LARGE_MB (3000) MB
 *      (targets: p50 ≤ 120 ms and ≤ 2× the clone, p99 ≤ 250 ms), and 10 creates at once there too
 *      (clones: what the pause and the plumbing cost when the copies do not bound the burst).
 *      Skipped, with the reason, when XFS cannot be made.
 *
 * BENCH_BRANCHES (5) creates per size; BENCH_SKIP_EXT4=1 skips part 1, BENCH_SKIP_XFS=1 part 2;
 * BENCH_LARGE_MB=0 skips 3 GB.
 */
import { execFileSync, execSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { afterAll, expect, it } from "vitest"
import { readyConnector } from "../support/engine.js"
import { addMember, createOrg, settleOperation } from "../support/flows.js"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { type Scion, signUp, startScion, stopEngines } from "../support/system.js"

const BRANCHES = Number(process.env.BENCH_BRANCHES ?? 5)
const SMALL_MB = Number(process.env.BENCH_SMALL_MB ?? 300)
const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 3000)
const XFS_IMAGE = process.env.BENCH_XFS_IMAGE ?? "/var/tmp/scion-bench-xfs.img"
const XFS_MOUNT = process.env.BENCH_XFS_MOUNT ?? "/mnt/scion-bench-xfs"

const out = (line = "") => process.stdout.write(`${line}\n`)
const ms = (v: number) => `${v.toFixed(0)} ms`
const p50 = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!

interface EngineRecord {
  readonly host: string
  readonly port: number
  readonly username: string
  readonly password: string
}

const engineClient = async (record: EngineRecord, database: string) => {
  const client = new pg.Client({ host: record.host, port: record.port, user: record.username, password: record.password, database, ssl: { rejectUnauthorized: false } })
  await client.connect()
  return client
}

/** A pgbench-like accounts table of about `mb` MB (table and primary key), plus a small branches table. */
const generate = async (source: SourceCluster, mb: number) => {
  const rows = Math.round((mb / 300) * 2_000_000)
  const started = performance.now()
  await source.query("create database app")
  await source.query(
    `create table branches_t (bid int primary key, bbalance int not null, filler char(88));
     create table accounts (aid int primary key, bid int not null references branches_t (bid), abalance int not null, filler char(84));
     insert into branches_t select g, 0, '' from generate_series(1, ${Math.max(1, Math.round(rows / 100_000))}) g;
     insert into accounts select g, 1 + (g % ${Math.max(1, Math.round(rows / 100_000))}), 0, '' from generate_series(1, ${rows}) g;`,
    "app"
  )
  await source.query("vacuum analyze", "app")
  const size = (await source.query("select pg_database_size('app')::bigint as b", "app")).rows[0].b
  out(`  source: ${rows.toLocaleString("en")} accounts rows, ${(Number(size) / 2 ** 20).toFixed(0)} MB (generated in ${ms(performance.now() - started)})`)
  return Number(size)
}

/** POST → completed operation → the URL answers a query, BRANCHES times. */
/** Where each create's time went, seen from the client: the 202, the completed operation, the first query. */
const phases = { accepted: [] as Array<number>, completed: [] as Array<number>, connected: [] as Array<number> }

/** The branches made so far on the connector being measured (deleted before a burst: the plan's limit counts them). */
const made: Array<string> = []

/** Deletes the branches made so far, through the API, and waits for each delete to finish. */
const deleteMade = async (scion: Scion, token: string) => {
  for (const id of made.splice(0, made.length)) {
    const response = await scion.request("DELETE", `/v1/branches/${id}`, { token })
    if (response.status !== 202) throw new Error(`delete: ${response.status} ${JSON.stringify(response.body)}`)
    await settleOperation(scion, response.body.operation_id, token)
  }
}

/** One branch, POST → a query answered on its URL; with `record`, its client-side phases too. */
const timeOne = async (scion: Scion, token: string, connectorId: string, name: string, record = false) => {
  const started = performance.now()
  const response = await scion.request("POST", "/v1/branch/create", { token, body: { connector_id: connectorId, name, service_type: "postgres" } })
  if (response.status !== 202) throw new Error(`create: ${response.status} ${JSON.stringify(response.body)}`)
  const accepted = performance.now()
  const operation = await settleOperation(scion, response.body.operation_id, token)
  if (operation.status !== "completed" || !operation.result?.branch_url) throw new Error(`branch: ${JSON.stringify(operation)}`)
  const completed = performance.now()
  made.push(operation.result.branch_id)
  const url = new URL(operation.result.branch_url)
  const client = new pg.Client({
    host: url.hostname,
    port: Number(url.port),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1),
    // sslmode=require: TLS, the engine's self-signed certificate not verified.
    ssl: { rejectUnauthorized: false }
  })
  await client.connect()
  await client.query("select count(*) from branches_t")
  await client.end()
  if (record) {
    phases.accepted.push(accepted - started)
    phases.completed.push(completed - accepted)
    phases.connected.push(performance.now() - completed)
  }
  return performance.now() - started
}

/** The machine's CPU time so far, all cores (/proc/stat, ticks of 10 ms): busy, waiting on I/O, and in all. */
const machineCpu = () => {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number) as Array<number>
  const busy = user! + nice! + system! + irq! + softirq!
  return { busy: busy * 10, iowait: iowait! * 10, total: (busy + idle! + iowait! + steal!) * 10 }
}

/**
 * CPU time so far of every process this bench involves, by role: each unit, the bench client, NATS,
 * and each Postgres cluster (metadata, engine, source) with its backends — those that ended count
 * through their postmaster's reaped-children time (/proc/<pid>/stat cutime + cstime).
 */
const cpuByRole = (engineDir: string) => {
  const procs: Array<{ pid: number; ppid: number; comm: string; self: number; reaped: number; args: string }> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number)
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ")
      procs.push({ pid: Number(entry), ppid: f[1]!, comm, self: (f[11]! + f[12]!) * 10, reaped: (f[13]! + f[14]!) * 10, args })
    } catch {
      // Gone between the listing and the read.
    }
  }
  const byPid = new Map(procs.map((p) => [p.pid, p]))
  const roleOf = (p: (typeof procs)[number]): string | undefined => {
    if (p.pid === process.pid) return "bench client"
    if (p.comm === "nats-server") return "nats"
    const unit = /(?:services\/(\w+)|(gateway))\/dist\/server\.mjs/.exec(p.args)
    if (unit !== null) return unit[1] ?? unit[2]
    if (p.comm !== "postgres") return undefined
    const parent = byPid.get(p.ppid)
    const postmaster = parent?.comm === "postgres" ? parent : p
    const dir = / -D (\S+)/.exec(postmaster.args)?.[1] ?? ""
    return dir.startsWith(engineDir) ? "postgres: engine" : dir.includes("scion-source") ? "postgres: source" : "postgres: metadata"
  }
  const totals = new Map<string, number>()
  for (const p of procs) {
    const role = roleOf(p)
    if (role === undefined) continue
    const isPostmaster = p.comm === "postgres" && byPid.get(p.ppid)?.comm !== "postgres"
    totals.set(role, (totals.get(role) ?? 0) + p.self + (isPostmaster ? p.reaped : 0))
  }
  return totals
}

/**
 * CPU spent over the stretches of time `measure` wraps, summed: the machine's (every process:
 * units, Postgres, this client) and each role's. Stretches, so what runs between them (the raw
 * copies of the baseline) is not counted.
 */
const cpuTally = (engineDir: string) => {
  const machine = { busy: 0, iowait: 0, total: 0 }
  const roles = new Map<string, number>()
  return {
    measure: async <A>(work: () => Promise<A>): Promise<A> => {
      const [machineBefore, rolesBefore] = [machineCpu(), cpuByRole(engineDir)]
      const result = await work()
      const [machineAfter, rolesAfter] = [machineCpu(), cpuByRole(engineDir)]
      machine.busy += machineAfter.busy - machineBefore.busy
      machine.iowait += machineAfter.iowait - machineBefore.iowait
      machine.total += machineAfter.total - machineBefore.total
      for (const [role, total] of rolesAfter) roles.set(role, (roles.get(role) ?? 0) + total - (rolesBefore.get(role) ?? 0))
      return result
    },
    /** The machine's use and each role's CPU per create, largest first. */
    describe: (creates: number) => {
      const share = (v: number) => `${((100 * v) / machine.total).toFixed(0)}%`
      return {
        machine: `CPU ${share(machine.busy)} busy, ${share(machine.iowait)} waiting on I/O; ${ms(machine.busy / creates)} of CPU per create`,
        roles: [...roles]
          .map(([role, total]) => [role, total / creates] as const)
          .filter(([, perCreate]) => perCreate >= 0.5)
          .sort((a, b) => b[1] - a[1])
          .map(([role, perCreate]) => `${role} ${ms(perCreate)}`)
          .join(", ")
      }
    }
  }
}
let sequentialCpu = { machine: "", roles: "" }

/**
 * BRANCHES creates one after another; after each, `between(i)` (untimed here: the baseline's raw
 * copy, so branch and baseline alternate and meet the disk in the same state).
 */
const timeBranches = async (scion: Scion, token: string, connectorId: string, label: string, engineDir: string, between: (i: number) => Promise<void>) => {
  const times: Array<number> = []
  for (const list of Object.values(phases)) list.length = 0
  const tally = cpuTally(engineDir)
  for (let i = 0; i < BRANCHES; i++) {
    times.push(await tally.measure(() => timeOne(scion, token, connectorId, `${label}-${i}`, true)))
    await between(i)
  }
  sequentialCpu = tally.describe(BRANCHES)
  return times
}

/** CONCURRENT creates on one connector at the same moment (one pause should serve them all). */
const CONCURRENT = 10
const timeConcurrent = (scion: Scion, token: string, connectorId: string, label: string) =>
  Promise.all(Array.from({ length: CONCURRENT }, (_, i) => timeOne(scion, token, connectorId, `${label}-c${i}`)))

/** One CREATE DATABASE … TEMPLATE mirror STRATEGY FILE_COPY alone, as bench_raw_<i> (subscriptions paused around it, not timed). */
const timeTemplateCopy = async (record: EngineRecord, i: number) => {
  const mirror = await engineClient(record, "mirror")
  const subscriptions = (await mirror.query("select subname from pg_subscription")).rows.map((r) => r.subname as string)
  for (const s of subscriptions) await mirror.query(`alter subscription "${s}" disable`)
  await mirror.end()
  const admin = await engineClient(record, "postgres")
  try {
    for (let attempt = 0; attempt < 50; attempt++) {
      if ((await admin.query("select count(*)::int as n from pg_stat_activity where datname = 'mirror'")).rows[0].n === 0) break
      await new Promise((r) => setTimeout(r, 20))
    }
    const started = performance.now()
    await admin.query(`create database bench_raw_${i} template mirror strategy file_copy`)
    return performance.now() - started
  } finally {
    await admin.end()
    const again = await engineClient(record, "mirror")
    for (const s of subscriptions) await again.query(`alter subscription "${s}" enable`)
    await again.end()
  }
}

const dropTemplateCopies = async (record: EngineRecord, count: number) => {
  const admin = await engineClient(record, "postgres")
  try {
    for (let i = 0; i < count; i++) await admin.query(`drop database if exists bench_raw_${i}`)
  } finally {
    await admin.end()
  }
}

/** Branches and raw copies in turn: each branch followed by one raw copy of the same mirror. */
const timeBranchesAndCopies = async (scion: Scion, token: string, connectorId: string, label: string, engineDir: string, record: EngineRecord) => {
  const template: Array<number> = []
  const branch = await timeBranches(scion, token, connectorId, label, engineDir, async (i) => void template.push(await timeTemplateCopy(record, i)))
  await dropTemplateCopies(record, BRANCHES)
  return { branch, template }
}

/**
 * pg_dump | pg_restore of the mirror into a new database on the engine when a pg_dump of the
 * engine's major version is on PATH; otherwise the same work done the way pg_restore does it
 * (schema, COPY of every table through a pipe, then primary keys, foreign keys and analyze), with
 * psql's \copy (Debian 12 ships no PostgreSQL 18 client tools).
 */
const timeDumpRestore = async (record: EngineRecord) => {
  const env = { ...process.env, PGPASSWORD: record.password, PGSSLMODE: "require" }
  const conn = (db: string) => `host=${record.host} port=${record.port} user=${record.username} dbname=${db}`
  const admin = await engineClient(record, "postgres")
  await admin.query("drop database if exists bench_dump")
  await admin.query("create database bench_dump template template0")
  let how: string
  const started = performance.now()
  let dumpMajor = 0
  try {
    dumpMajor = Number(/(\d+)/.exec(execFileSync("pg_dump", ["--version"], { encoding: "utf8" }))?.[1] ?? 0)
  } catch {}
  if (dumpMajor >= 18) {
    how = "pg_dump -Fc | pg_restore"
    execSync(`pg_dump -Fc "${conn("mirror")}" | pg_restore --no-owner -d "${conn("bench_dump")}"`, { env, stdio: ["ignore", "ignore", "inherit"] })
  } else {
    how = "schema + COPY pipe + keys (psql 15 \\copy; no pg_dump 18 here)"
    const target = await engineClient(record, "bench_dump")
    await target.query(
      "create table branches_t (bid int not null, bbalance int not null, filler char(88)); create table accounts (aid int not null, bid int not null, abalance int not null, filler char(84))"
    )
    for (const table of ["branches_t", "accounts"]) {
      execSync(`psql -X -q "${conn("mirror")}" -c "\\copy ${table} to stdout" | psql -X -q "${conn("bench_dump")}" -c "\\copy ${table} from stdin"`, { env, stdio: ["ignore", "ignore", "inherit"] })
    }
    await target.query("alter table branches_t add primary key (bid); alter table accounts add primary key (aid); alter table accounts add foreign key (bid) references branches_t (bid); analyze")
    await target.end()
  }
  const elapsed = performance.now() - started
  await admin.query("drop database bench_dump")
  await admin.end()
  return { elapsed, how }
}

/** A system, a ready connector over a generated source of `mb` MB, and its engine record. */
const setUp = async (mb: number, env: Record<string, string>, engineDir: string | undefined) => {
  // Info logs: the branch unit's "branch ready" lines carry its step timings (read below).
  const scion = await startScion({ env: { LOG_LEVEL: "Info", ...env } })
  made.length = 0
  const owner = await signUp(scion, "bench-owner")
  const orgId = (await createOrg(scion, owner.token, "Bench")).org_id
  const member = await addMember(scion, owner.token, orgId, "member")
  const source = await startSourceCluster()
  const bytes = await generate(source, mb)
  const started = performance.now()
  const { connectorId } = await readyConnector(scion, { orgId, memberToken: member.token, adminToken: owner.token, source, database: "app" })
  out(`  engine setup through the API (logical initial copy included): ${ms(performance.now() - started)}`)
  const record = JSON.parse(readFileSync(join(engineDir ?? scion.engineDataDir, connectorId, "engine.json"), "utf8")) as EngineRecord
  return {
    scion,
    source,
    bytes,
    token: member.token,
    connectorId,
    record,
    stop: async () => {
      await scion.stop()
      if (engineDir !== undefined) await stopEngines(engineDir)
      await source.stop()
    }
  }
}

/** A number a branch unit log line carries, by its annotation's name (NaN when absent). */
const logField = (line: string, name: string) => Number(new RegExp(`"?${name}"?[=:]\\s*"?(\\d+)`).exec(line)?.[1] ?? NaN)

/** The copier's batches so far, from the branch unit's "template copies done" lines: copies per pause and how long they took. */
const copierBatches = (scion: Scion) =>
  scion.branch
    .output()
    .split("\n")
    .filter((l) => l.includes("template copies done"))
    .map((l) => ({ copies: logField(l, "copies"), copying: logField(l, "copied_at_ms") - logField(l, "free_at_ms") }))

/** The branch unit's own view: job steps and the subscription pause, from its log lines. */
const unitTimings = (scion: Scion) => {
  const lines = scion.branch.output().split("\n")
  const values = (message: string, field: string) => lines.filter((l) => l.includes(message)).map((l) => logField(l, field)).filter((v) => !Number.isNaN(v))
  const show = (label: string, v: ReadonlyArray<number>) => (v.length > 0 ? `${label} p50 ${ms(p50(v))}` : `${label} n/a`)
  out(`    from the client:             POST → 202 p50 ${ms(p50(phases.accepted))}; → completed p50 ${ms(p50(phases.completed))}; → connected and queried p50 ${ms(p50(phases.connected))}`)
  out(`    the machine, all cores:      ${sequentialCpu.machine} (one create at a time)`)
  out(`    CPU per create, by process:  ${sequentialCpu.roles}`)
  out(
    `    in the branch unit:          ${show("job", values("branch ready", "total_ms"))}; ${show("reported", values("branch ready", "reported_ms"))}; ${show("copied", values("branch ready", "copied_ms"))}; ${show("recorded", values("branch ready", "recorded_ms"))}; ${show("connected", values("branch ready", "connected_ms"))}; ${show("stamped", values("branch ready", "stamped_ms"))}; ${show("readied (sequences, owner, CONNECT)", values("branch ready", "grant_ms"))} (cumulative); ${show("role, beside the copy", values("branch ready", "role_ms"))}`
  )
  out(
    `    the copier's batches:        ${show("subscriptions paused at", values("template copies done", "paused_at_ms"))}; ${show("mirror free at", values("template copies done", "free_at_ms"))}; ${show("copied at", values("template copies done", "copied_at_ms"))}; ${show("resumed at", values("template copies done", "pause_ms"))}`
  )
}

const report = (label: string, branch: ReadonlyArray<number>, template: ReadonlyArray<number>, dump?: { elapsed: number; how: string }) => {
  out(`  ${label}`)
  out(`    branch, POST → working URL   p50 ${ms(p50(branch))}   (all: ${branch.map((v) => v.toFixed(0)).join(", ")} ms)`)
  out(`    CREATE DATABASE … TEMPLATE   p50 ${ms(p50(template))}   (all: ${template.map((v) => v.toFixed(0)).join(", ")} ms)`)
  out(`    branch / template copy       ${(p50(branch) / p50(template)).toFixed(2)}×`)
  if (dump !== undefined) {
    out(`    dump | restore               ${ms(dump.elapsed)}   (${dump.how})`)
    out(`    branch / dump | restore      ${(p50(branch) / dump.elapsed).toFixed(2)}×`)
  }
}

/** CONCURRENT creates at once against the single creates measured before on the same connector: their pauses and the ratio. */
const concurrentBurst = async (scion: Scion, token: string, connectorId: string, label: string, single: ReadonlyArray<number>, engineDir: string) => {
  await deleteMade(scion, token)
  const batchesBefore = copierBatches(scion).length
  const tally = cpuTally(engineDir)
  const concurrent = await tally.measure(() => timeConcurrent(scion, token, connectorId, label))
  const cpu = tally.describe(CONCURRENT)
  out(`    ${CONCURRENT} concurrent creates     p50 ${ms(p50(concurrent))}   (all: ${concurrent.map((v) => v.toFixed(0)).join(", ")} ms)`)
  out(`    the machine, all cores:      ${cpu.machine}`)
  out(`    CPU per create, by process:  ${cpu.roles}`)
  const burst = copierBatches(scion).slice(batchesBefore)
  out(`    their pauses                 ${burst.length} (copies per pause: ${burst.map((b) => b.copies).join(", ")}; copying took ${burst.map((b) => ms(b.copying)).join(", ")})`)
  out(`    concurrent / single          ${(p50(concurrent) / p50(single)).toFixed(2)}× (target ≤ 2×)`)
}

/** Part 1: the default engine storage, with the template copy and dump | restore baselines. */
const defaultStorage = async () => {
  out(`1. ~${SMALL_MB} MB, default engine storage`)
  const small = await setUp(SMALL_MB, {}, undefined)
  teardown.push(small.stop)
  const { branch: branchTimes, template: templateTimes } = await timeBranchesAndCopies(small.scion, small.token, small.connectorId, "ext4", small.scion.engineDataDir, small.record)
  const dump = await timeDumpRestore(small.record)
  report(`${(small.bytes / 2 ** 20).toFixed(0)} MB (target: branch ≤ 1.1× the template copy)`, branchTimes, templateTimes, dump)
  unitTimings(small.scion)
  await concurrentBurst(small.scion, small.token, small.connectorId, "ext4", branchTimes, small.scion.engineDataDir)
  await small.stop()
  teardown.pop()
  expect(branchTimes.length).toBe(BRANCHES)
}

const teardown: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const stop of teardown.reverse()) await stop().catch((e) => out(`  cleanup: ${String(e)}`))
})

it("bench:branch", async () => {
  out(`\nbench:branch — ${BRANCHES} branches per size\n`)
  if (process.env.BENCH_SKIP_EXT4 === "1") out("1. default engine storage: skipped (BENCH_SKIP_EXT4=1)")
  else await defaultStorage()
  if (process.env.BENCH_SKIP_XFS === "1") return out("\n2. XFS reflink: skipped (BENCH_SKIP_XFS=1)")
  out(`\n2. engines on XFS (reflink=1), file_copy_method = clone`)
  try {
    if (process.getuid?.() !== 0) throw new Error("needs root for the loop device")
    if (!existsSync("/sbin/mkfs.xfs") && !existsSync("/usr/sbin/mkfs.xfs")) execSync("apt-get install -y xfsprogs", { stdio: "ignore" })
    mkdirSync(XFS_MOUNT, { recursive: true })
    try {
      execSync(`umount ${XFS_MOUNT}`, { stdio: "ignore" })
    } catch {}
    const gb = Math.ceil(((Math.max(SMALL_MB, LARGE_MB) * 3) / 1024) + 4)
    execSync(`rm -f ${XFS_IMAGE} && truncate -s ${gb}G ${XFS_IMAGE} && mkfs.xfs -q -f -m reflink=1 ${XFS_IMAGE} && mount -o loop ${XFS_IMAGE} ${XFS_MOUNT} && chmod 755 ${XFS_MOUNT}`)
  } catch (error) {
    return out(`  skipped: XFS could not be made (${String(error).split("\n")[0]})`)
  }
  teardown.push(async () => {
    execSync(`umount ${XFS_MOUNT} && rm -f ${XFS_IMAGE}`)
  })
  for (const mb of [SMALL_MB, LARGE_MB].filter((v) => v > 0)) {
    const dir = join(XFS_MOUNT, `engines-${mb}`)
    mkdirSync(dir, { recursive: true, mode: 0o755 })
    const sized = await setUp(mb, { ENGINE_DATA_DIR: dir, ENGINE_FILE_COPY_METHOD: "clone" }, dir)
    teardown.push(sized.stop)
    const { branch: times, template } = await timeBranchesAndCopies(sized.scion, sized.token, sized.connectorId, `xfs${mb}`, dir, sized.record)
    report(`${(sized.bytes / 2 ** 20).toFixed(0)} MB on XFS, clone (targets: p50 ≤ 120 ms and ≤ 2× the clone, p99 ≤ 250 ms)`, times, template)
    out(`    branch p99                   ${ms([...times].sort((a, b) => a - b)[Math.max(0, Math.ceil(times.length * 0.99) - 1)]!)}`)
    unitTimings(sized.scion)
    await concurrentBurst(sized.scion, sized.token, sized.connectorId, `xfs${mb}`, times, dir)
    await sized.stop()
    teardown.pop()
  }
})
