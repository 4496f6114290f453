#!/usr/bin/env node
// pnpm bench:operations — how fast a waiting client hears that its operation finished, and how
// many operations the unit creates and completes per second. Identity, the operation unit and the
// gateway run as separate processes over HTTP/2 gRPC, waits are woken over core NATS.
//
// 1. Wake-up: for each operation several clients wait on GET /v1/operations/{id}?wait=10 through
//    the gateway; a worker then sends the terminal report. Latency = from sending that report to
//    each waiter's response. Baseline in the same run: clients polling every second (no wait).
// 2. Throughput: workers with a service principal create, start and complete operations straight
//    on the operation unit (3 RPCs each), for BENCH_SECONDS.
import { healthServing, UNIT_NODE_FLAGS } from "../../deploy/local/production-shape.mjs"
import { spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { performance } from "node:perf_hooks"
import { createClient } from "@connectrpc/connect"
import { createGrpcTransport } from "@connectrpc/connect-node"
import { makeEffectClient, unitTransport, withPrincipalToken } from "@scion/kit"
import { Effect, Scope } from "effect"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { OperationService, OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import pg from "pg"
import { allProcesses, cpuInWindows, measured } from "./process-cpu.mjs"
import { machineNow } from "./machine.mjs"
import { freePorts } from "./ports.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const adminUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const OPERATIONS = Number(process.env.BENCH_OPERATIONS ?? 300)
const WAITERS = Number(process.env.BENCH_WAITERS ?? 4)
const PARALLEL = Number(process.env.BENCH_PARALLEL ?? 8)
const POLLED_OPERATIONS = Number(process.env.BENCH_POLLED_OPERATIONS ?? 40)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const start = (script, env) =>
  spawn(process.execPath, [...UNIT_NODE_FLAGS, ...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean), join(root, script)], { env: { ...process.env, LOG_LEVEL: "Warning", ...env }, stdio: ["ignore", "inherit", "inherit"] })
const waitFor = async (probe, what) => {
  for (let i = 0; i < 300; i++) {
    if (await probe().catch(() => false)) return
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
}
const summary = (values) => ({ n: values.length, p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values) })

const dbName = `scion_bench_${randomBytes(4).toString("hex")}`
const admin = new pg.Client({ connectionString: adminUrl })
await admin.connect()
await admin.query(`create database "${dbName}"`)
const dbUrl = new URL(adminUrl)
dbUrl.pathname = `/${dbName}`

const children = []
try {
  const [identityPort, operationPort, gatewayPort, healthPort] = await freePorts(4)
  const credential = randomBytes(24).toString("base64url")
  const identityUrl = `http://127.0.0.1:${identityPort}`
  const operationUrl = `http://127.0.0.1:${operationPort}`
  children.push(
    start("services/identity/dist/server.mjs", {
      PORT: String(identityPort),
      DATABASE_URL: dbUrl.toString(),
      SERVICE_CREDENTIAL: credential,
      IDENTITY_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
    }),
    start("services/operation/dist/server.mjs", { PORT: String(operationPort), DATABASE_URL: dbUrl.toString(), IDENTITY_URL: identityUrl }),
    // The bench is one session making thousands of requests a minute: the limiter stays on, out of reach.
    start("gateway/dist/server.mjs", { PORT: String(gatewayPort), HEALTH_PORT: String(healthPort), IDENTITY_URL: identityUrl, OPERATION_URL: operationUrl, RATE_LIMIT_PER_MINUTE: "100000000" })
  )
  const base = `http://127.0.0.1:${gatewayPort}`
  const call = async (method, path, token, body) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body ? JSON.stringify(body) : undefined
    })
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`)
    return response.json()
  }
  // Ready when a login round-trips to identity (401 for an unknown user).
  const probe = JSON.stringify({ email: "probe@example.com", password: "probe-password" })
  await waitFor(async () => (await fetch(`${base}/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: probe })).status === 401, "gateway and identity")
  const session = await call("POST", "/v1/auth/signup", null, { email: "bench@example.com", password: "correct-horse-battery", full_name: "Bench" })
  const org = await call("POST", "/v1/orgs", session.session_token, { name: "Bench" })
  const token = session.session_token

  // The operation unit serves (health SERVING) once it has identity's verification keys.
  await waitFor(() => healthServing(operationUrl), "the operation unit")
  const auth = createClient(AuthService, createGrpcTransport({ baseUrl: identityUrl }))
  await waitFor(async () => (await auth.issueServiceToken({ serviceName: "bench", credential })).principalToken !== "", "identity")
  // Workers reach the operation unit the way units call each other: the kit's transport
  // (UNIT_RPC_PROTOCOL, the direct unary gRPC path by default) and its Effect client.
  const unitClient = Effect.runSync(
    Scope.make().pipe(Effect.flatMap((scope) => Effect.provideService(unitTransport(operationUrl), Scope.Scope, scope)))
  )
  const operationClient = makeEffectClient(OperationService, unitClient)
  const operations = Object.fromEntries(
    Object.keys(OperationService.method).map((name) => [
      name,
      (request, options) => {
        const call = operationClient[name](request)
        const token = options?.headers?.["x-scion-principal"]
        // Without spans, as the units' own clients run when no trace exporter is configured
        // (the default runtime's tracer captured a stack per call: 5% of this client's CPU).
        return Effect.runPromise(
          (token ? call.pipe(withPrincipalToken(token)) : call).pipe(
            Effect.catchAll((error) => Effect.fail(Object.assign(new Error(error.message), { code: error.code }))),
            Effect.withTracerEnabled(false)
          )
        )
      }
    ])
  )
  // Ready when the operation unit answers at all (an unauthenticated call is refused, not unreachable).
  await waitFor(async () => {
    try {
      await operations.getOperation({ id: "op_probe" })
      return true
    } catch (error) {
      return error.code !== 14
    }
  }, "the operation unit")
  let principal = ""
  let principalRenewAt = 0
  const headers = async () => {
    if (performance.now() > principalRenewAt) {
      principal = (await auth.issueServiceToken({ serviceName: "bench", credential })).principalToken
      principalRenewAt = performance.now() + 120_000
    }
    return { "x-scion-principal": principal }
  }
  let counter = 0
  const newOperation = async () => {
    const id = `op_bench${Date.now().toString(36)}${(counter++).toString(36)}`
    await operations.createOperation({ id, orgId: org.org_id, type: OperationType.BRANCH_CREATE, resourceId: `branch_${id}` }, { headers: await headers() })
    await operations.reportOperation({ id, status: OperationStatus.RUNNING }, { headers: await headers() })
    return id
  }
  const complete = async (id) => operations.reportOperation({ id, status: OperationStatus.COMPLETED, result: { ok: true } }, { headers: await headers() })

  // ---- 1a. long-poll waiters -------------------------------------------------------------------
  /** How long each terminal report took to be acknowledged: its commit, which every wake-up waits for, and one hop back. */
  let acknowledged = []
  /** An operation, running, with `waiters` clients waiting on it through the gateway. */
  const prepare = async (waiters) => {
    const id = await newOperation()
    const waiting = Array.from({ length: waiters }, async () => {
      const op = await call("GET", `/v1/operations/${id}?wait=10`, token)
      const at = performance.now()
      if (op.status !== "completed") throw new Error(`waiter returned ${op.status}`)
      return at
    })
    return { id, waiting }
  }
  /** The terminal report of a prepared operation: each of its waiters' latency from the report's sending. */
  const fire = async ({ id, waiting }) => {
    const sentAt = performance.now()
    await complete(id)
    acknowledged.push(performance.now() - sentAt)
    if (process.env.BENCH_DEBUG) console.log("report acked after", (performance.now() - sentAt).toFixed(1), "ms")
    return (await Promise.all(waiting)).map((at) => at - sentAt)
  }
  /**
   * `count` operations at once, each reported terminal 50 ms after its waits went out; the CPU
   * each process spends from the first of those reports to the last waiter's answer is added to
   * `burstCpu` when given (the operations' creations are done by then).
   */
  const burst = async (waiters, count, burstCpu) => {
    let fired = 0
    const latencies = await Promise.all(
      Array.from({ length: count }, async () => {
        const operation = await prepare(waiters)
        // Let the waits reach the operation unit and subscribe before the report goes out.
        await sleep(50)
        if (fired++ === 0) burstCpu?.start()
        return fire(operation)
      })
    )
    burstCpu?.stop()
    return latencies.flat()
  }
  if (process.env.BENCH_DEBUG) {
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now()
      const id = `op_dbg${Date.now().toString(36)}${i}`
      await operations.createOperation({ id, orgId: org.org_id, type: OperationType.BRANCH_CREATE, resourceId: `branch_${id}` }, { headers: await headers() })
      const t1 = performance.now()
      await operations.reportOperation({ id, status: OperationStatus.RUNNING }, { headers: await headers() })
      const t2 = performance.now()
      await operations.getOperation({ id }, { headers: await headers() })
      console.log(`create ${(t1 - t0).toFixed(1)} ms, report ${(t2 - t1).toFixed(1)} ms, get ${(performance.now() - t2).toFixed(1)} ms`)
    }
  }
  for (let i = 0; i < 20; i++) await burst(WAITERS, 1) // warm-up
  const waitPhase = async (waiters, operations, burstCpu) => {
    const samples = []
    for (let i = 0; i < operations; i += PARALLEL) samples.push(...(await burst(waiters, Math.min(PARALLEL, operations - i), burstCpu)))
    return samples
  }
  const [identityChild, operationChild, gatewayChild] = children
  const natsServer = allProcesses().find((p) => p.comm === "nats-server")?.pid
  const burstCpu = cpuInWindows({ operation: operationChild.pid, gateway: gatewayChild.pid, identity: identityChild.pid, "bench client": process.pid, nats: natsServer })
  acknowledged = []
  const waited = await waitPhase(WAITERS, OPERATIONS, burstCpu)
  const waitedReports = summary(acknowledged)
  // The same with eight times the waiters per operation (256 at once by default).
  const crowded = await waitPhase(WAITERS * 8, Math.max(PARALLEL, Math.floor(OPERATIONS / 8)))

  // ---- 1b. baseline: polling every second -------------------------------------------------------
  const pollOne = async () => {
    const id = await newOperation()
    let sentAt = Infinity
    const pollers = Array.from({ length: WAITERS }, async (_, n) => {
      await sleep((1000 / WAITERS) * n) // pollers spread over the second, as independent clients would be
      while (true) {
        const op = await call("GET", `/v1/operations/${id}`, token)
        if (op.status === "completed") return performance.now()
        await sleep(1000)
      }
    })
    await sleep(1000 + Math.random() * 1000)
    sentAt = performance.now()
    await complete(id)
    return (await Promise.all(pollers)).map((at) => at - sentAt)
  }
  const polled = (await Promise.all(Array.from({ length: POLLED_OPERATIONS }, pollOne))).flat()

  // ---- 2. throughput --------------------------------------------------------------------------
  // Each worker is a fiber calling the unit as units' workers do (the kit's Effect client, its
  // service principal on the fiber), not a promise per call.
  let done = 0
  const startedAt = performance.now()
  const workerPrincipal = (await headers())["x-scion-principal"]
  const throughput = await measured(
    async () => {
      const deadline = performance.now() + SECONDS * 1000
      const worker = Effect.gen(function* () {
        while (performance.now() < deadline) {
          const id = `op_bench${Date.now().toString(36)}${(counter++).toString(36)}`
          yield* operationClient.createOperation({ id, orgId: org.org_id, type: OperationType.BRANCH_CREATE, resourceId: `branch_${id}` })
          yield* operationClient.reportOperation({ id, status: OperationStatus.RUNNING })
          yield* operationClient.reportOperation({ id, status: OperationStatus.COMPLETED, result: { ok: true } })
          done++
        }
      })
      await Effect.runPromise(
        Effect.all(Array.from({ length: CONCURRENCY }, () => worker), { concurrency: "unbounded", discard: true }).pipe(
          withPrincipalToken(workerPrincipal),
          Effect.withTracerEnabled(false)
        )
      )
      return { total: done }
    },
    { operation: operationChild.pid, identity: identityChild.pid, gateway: gatewayChild.pid, "bench client": process.pid }
  )
  const perSecond = done / ((performance.now() - startedAt) / 1000)

  const w = summary(waited)
  const p = summary(polled)
  const fmt = (s) => `p50 ${s.p50.toFixed(1).padStart(7)} ms   p99 ${s.p99.toFixed(1).padStart(7)} ms   max ${s.max.toFixed(1).padStart(7)} ms   (n=${s.n})`
  console.log(`\nTerminal report → waiting client's response (${WAITERS} clients per operation, ${PARALLEL} operations at once)\n`)
  console.log(`baseline (poll every 1 s)            ${fmt(p)}`)
  console.log(`scion (GET ?wait=10, NATS wake-up)   ${fmt(w)}`)
  console.log(`  the report itself acknowledged     ${fmt(waitedReports)}`)
  console.log(`scion, ${WAITERS * 8 * PARALLEL} waiters at once          ${fmt(summary(crowded))}`)
  // What a burst asks of the machine's two cores: its last waiter cannot hear before half of it.
  const bursts = burstCpu.windows()
  const burstTotal = Object.values(burstCpu.spent).reduce((a, b) => a + b, 0) / bursts
  const burstShares = Object.entries(burstCpu.spent).map(([name, ms]) => `${name} ${(ms / bursts).toFixed(1)}`).join(", ")
  console.log(`  CPU of a burst (${PARALLEL} reports → ${WAITERS * PARALLEL} answers): ${burstTotal.toFixed(1)} ms in all, ms: ${burstShares}`)
  console.log(`\nratio baseline/scion p50: ${(p.p50 / w.p50).toFixed(0)}x; scion p99 ${w.p99.toFixed(1)} ms with ${WAITERS * PARALLEL} waiters (target < 10 ms)`)
  console.log(`\nOperations created + started + completed (3 RPCs each), ${CONCURRENCY} workers, ${SECONDS}s: ${perSecond.toFixed(0)} ops/s (target >= 1000)`)
  const cpu = Object.entries(throughput.cpuUsPerRequest).map(([name, us]) => `${name} ${us.toFixed(0)} µs`).join(", ")
  console.log(`CPU per operation: ${cpu}`)
  console.log(`\n${await machineNow(adminUrl)}`)
} finally {
  for (const child of children) child.kill("SIGTERM")
  await sleep(800)
  await admin.query(`drop database if exists "${dbName}" with (force)`)
  await admin.end()
}
