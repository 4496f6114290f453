#!/usr/bin/env node
// pnpm bench:gateway — an authenticated read (an org API key reading its org) through the gateway
// and identity as separate processes over HTTP/2 gRPC, next to a single-process baseline measured
// in the same run: a plain Node HTTP server doing the same key lookup in Postgres.
import { spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import autocannon from "autocannon"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { UNIT_NODE_FLAGS } from "../../deploy/local/production-shape.mjs"
import { measured, peakRssMb } from "./process-cpu.mjs"
import { machineNow } from "./machine.mjs"
import { freePorts } from "./ports.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const adminUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const DURATION = Number(process.env.BENCH_SECONDS ?? 10)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const start = (script, env) => {
  const child = spawn(process.execPath, [...UNIT_NODE_FLAGS, ...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean), join(root, script)], { env: { ...process.env, LOG_LEVEL: "Warning", RATE_LIMIT_PER_MINUTE: "1000000000", ...env }, stdio: ["ignore", "inherit", "inherit"] })
  return child
}

const waitFor = async (probe, what) => {
  for (let i = 0; i < 300; i++) {
    if (await probe().catch(() => false)) return
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const json = async (base, method, path, token, body) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body ? JSON.stringify(body) : undefined
  })
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`)
  return response.json()
}

const warmUp = (url, token) => autocannon({ url, connections: CONNECTIONS, duration: 2, headers: { authorization: `Bearer ${token}` } })
const load = async (url, token) => {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers: { authorization: `Bearer ${token}` } })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx responses, ${result.errors} errors`)
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, total: result.requests.total }
}

const dbName = `scion_bench_${randomBytes(4).toString("hex")}`
const admin = new pg.Client({ connectionString: adminUrl })
await admin.connect()
await admin.query(`create database "${dbName}"`)
const dbUrl = new URL(adminUrl)
dbUrl.pathname = `/${dbName}`

const children = []
try {
  const [identityPort, gatewayPort, healthPort, baselinePort] = await freePorts(4)
  const identity = start("services/identity/dist/server.mjs", {
    PORT: String(identityPort),
    DATABASE_URL: dbUrl.toString(),
    IDENTITY_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
  })
  const gateway = start("gateway/dist/server.mjs", { PORT: String(gatewayPort), HEALTH_PORT: String(healthPort), IDENTITY_URL: `http://127.0.0.1:${identityPort}` })
  children.push(identity, gateway)
  const base = `http://127.0.0.1:${gatewayPort}`
  // Ready when a login round-trips to identity (401 for an unknown user).
  await waitFor(async () => (await fetch(`${base}/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email: "probe@example.com", password: "probe-password" }) })).status === 401, "gateway and identity")

  const session = await json(base, "POST", "/v1/auth/signup", null, { email: "bench@example.com", password: "correct-horse-battery", full_name: "Bench" })
  const org = await json(base, "POST", "/v1/orgs", session.session_token, { name: "Bench" })
  const key = await json(base, "POST", `/v1/orgs/${org.org_id}/api-keys`, session.session_token, { name: "bench", role_id: "role_org_viewer" })

  const baseline = start("test/bench/baseline-server.mjs", { PORT: String(baselinePort), DATABASE_URL: dbUrl.toString() })
  children.push(baseline)
  await waitFor(async () => (await fetch(`http://127.0.0.1:${baselinePort}/v1/orgs/${org.org_id}`, { headers: { authorization: `Bearer ${key.secret}` } })).ok, "baseline")

  console.log(`\nGET /v1/orgs/{org_id} with an API key, ${CONNECTIONS} connections, ${DURATION}s each\n`)
  if (process.env.BENCH_DEBUG) {
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now()
      await json(base, "GET", `/v1/orgs/${org.org_id}`, key.secret)
      const t1 = performance.now()
      await fetch(`http://127.0.0.1:${baselinePort}/v1/orgs/${org.org_id}`, { headers: { authorization: `Bearer ${key.secret}` } }).then((r) => r.json())
      console.log(`scion ${(t1 - t0).toFixed(1)} ms, baseline ${(performance.now() - t1).toFixed(1)} ms`)
    }
  }
  const baselineUrl = `http://127.0.0.1:${baselinePort}/v1/orgs/${org.org_id}`
  const scionUrl = `${base}/v1/orgs/${org.org_id}`
  // Warm up (JIT, pools, HTTP/2 sessions) before measuring.
  await warmUp(baselineUrl, key.secret)
  const base0 = await measured(() => load(baselineUrl, key.secret), { baseline: baseline.pid })
  await warmUp(scionUrl, key.secret)
  const scion = await measured(() => load(scionUrl, key.secret), { gateway: gateway.pid, identity: identity.pid })

  const rss = { baseline: peakRssMb(baseline.pid), gateway: peakRssMb(gateway.pid), identity: peakRssMb(identity.pid) }
  const row = (name, r, mem) => `${name.padEnd(34)} ${r.rps.toFixed(0).padStart(8)} req/s   p50 ${String(r.p50).padStart(3)} ms   p99 ${String(r.p99).padStart(3)} ms   peak RSS ${mem}`
  console.log(row("baseline (one process, pg lookup)", base0, `${rss.baseline.toFixed(0)} MB`))
  console.log(row("scion (gateway → identity, gRPC)", scion, `gateway ${rss.gateway.toFixed(0)} MB, identity ${rss.identity.toFixed(0)} MB`))
  const cpu = (r) => Object.entries(r.cpuUsPerRequest).map(([name, us]) => `${name} ${us.toFixed(0)} µs`).join(", ")
  console.log(`\nCPU per request: baseline: ${cpu(base0)}; scion: ${cpu(scion)}`)
  const ratio = scion.rps / base0.rps
  console.log(`\nratio scion/baseline: ${ratio.toFixed(2)}x (target >= 0.50x); p99 ${scion.p99} ms (target < 20 ms); max unit RSS ${Math.max(rss.gateway, rss.identity).toFixed(0)} MB (target < 150 MB)`)
  console.log(`\n${await machineNow(adminUrl)}`)
} finally {
  for (const child of children) child.kill("SIGTERM")
  await sleep(500)
  await admin.query(`drop database if exists "${dbName}" with (force)`)
  await admin.end()
}
