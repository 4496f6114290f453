/**
 * Starts Scion in its production shape for end-to-end tests: each unit is its own Node process
 * (built output under dist/), they talk HTTP/2 gRPC, metadata lives in a fresh database on the
 * machine's Postgres, and tests drive the gateway's REST API with fetch.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { randomBytes, randomInt } from "node:crypto"
import { appendFileSync, mkdirSync } from "node:fs"
import { mkdir, readdir, readFile, rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { connect as natsConnect } from "nats"
import pg from "pg"
import { healthServing, makeSecrets, productionShape, UNIT_NODE_FLAGS } from "../../deploy/local/production-shape.mjs"

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..")

export const adminUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/**
 * Ports for the processes and clusters tests start: below the kernel's ephemeral range
 * (32768–60999) and production-shape.test.ts's ports (20000+), in a block per vitest worker.
 * Asking the kernel for a free ephemeral port and binding it later in another process races: the
 * kernel can hand the same port to the other worker, or to an outgoing connection, in between. CI
 * once saw a connector unit lose its port to another system's unit, which answered health SERVING
 * and 404 to every connector call. Within a block, ports are taken in turn from a random start
 * (each test file loads this module afresh) and checked by binding them.
 */
const PORT_BLOCK = 1_200
const FIRST_PORT = 10_000
const portBlock = Number(process.env.VITEST_POOL_ID ?? 0) % 8
let nextPort = randomInt(PORT_BLOCK)

const bindable = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

export const freePort = async (): Promise<number> => {
  for (let tries = 0; tries < PORT_BLOCK; tries++) {
    const port = FIRST_PORT + portBlock * PORT_BLOCK + (nextPort++ % PORT_BLOCK)
    if (await bindable(port)) return port
  }
  throw new Error(`no free port in block ${portBlock}`)
}

export const createDatabase = async (prefix: string, server: string = adminUrl): Promise<{ name: string; url: string; drop: () => Promise<void> }> => {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`
  const admin = new pg.Client({ connectionString: server })
  await admin.connect()
  await admin.query(`create database "${name}"`)
  await admin.end()
  const url = new URL(server)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: server })
      await client.connect()
      await client.query(`drop database if exists "${name}" with (force)`)
      await client.end()
    }
  }
}

export interface UnitProcess {
  readonly name: string
  readonly script: string
  readonly env: Record<string, string>
  readonly child: ChildProcess
  readonly output: () => string
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

const RELAXED_RATE_LIMITS = {
  RATE_LIMIT_PER_MINUTE: "1000000",
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: "1000000",
  RATE_LIMIT_CODE_HOST_PER_MINUTE: "1000000",
  LOGIN_FAILURES_BEFORE_DELAY: "0"
}

export const startUnit = (name: string, script: string, env: Record<string, string>): UnitProcess => {
  // BENCH_NODE_FLAGS (for example "--cpu-prof --cpu-prof-dir=/tmp/prof") reach every unit, as in the benches that start their own.
  const extraFlags = (process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean)
  const child = spawn(process.execPath, [...UNIT_NODE_FLAGS, ...extraFlags, join(repoRoot, script)], {
    cwd: repoRoot,
    // Tests make many requests from one address and one key, and fail logins on purpose: the rate
    // limits stay on at a height no test reaches (test/e2e/rate-limits.test.ts sets its own).
    // SCION_TEST_LOG_LEVEL (e.g. Debug) beside SCION_TEST_LOG_DIR says more when a run is read after.
    env: { ...process.env, LOG_LEVEL: process.env.SCION_TEST_LOG_LEVEL ?? "Warning", ...RELAXED_RATE_LIMITS, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  // SCION_TEST_LOG_DIR keeps every unit's output in a file too, for reading after a failed run.
  const logDir = process.env.SCION_TEST_LOG_DIR
  if (logDir !== undefined && logDir !== "") mkdirSync(logDir, { recursive: true })
  const logFile = logDir ? join(logDir, `${name}-${child.pid ?? "x"}.log`) : undefined
  const keep = (chunk: Buffer) => {
    output += chunk
    if (logFile !== undefined) appendFileSync(logFile, chunk)
  }
  child.stdout?.on("data", keep)
  child.stderr?.on("data", keep)
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return {
    name,
    script,
    env,
    child,
    output: () => output,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    }
  }
}

/** The same unit again (same script, port and environment), e.g. after a SIGKILL. */
export const respawn = (unit: UnitProcess): UnitProcess => startUnit(unit.name, unit.script, unit.env)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const waitFor = async (what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

export { healthServing }

export interface ApiResponse<T = any> {
  readonly status: number
  readonly body: T
  readonly headers: Headers
}

export interface Scion {
  readonly baseUrl: string
  readonly identityUrl: string
  readonly identity: UnitProcess
  readonly gateway: UnitProcess
  /** The operation unit's replicas; the gateway talks to the first. */
  readonly operations: ReadonlyArray<UnitProcess>
  readonly operationUrls: ReadonlyArray<string>
  /** The billing unit: consumes org events from NATS with a durable of this system's own. */
  readonly billing: UnitProcess
  readonly billingUrl: string
  /** The connector unit (environments) and the SECRET_KEYS it was given. */
  readonly connector: UnitProcess
  readonly connectorUrl: string
  /** ENGINE_DATA_DIR of the connector unit: one directory per engine. */
  readonly engineDataDir: string
  readonly secretKeys: string
  /** The branch unit (branches, their jobs); BRANCH_BUS_NAMESPACE of its own. */
  readonly branch: UnitProcess
  readonly branchUrl: string
  readonly databaseUrl: string
  /** BUS_NAMESPACE of this system: its streams and subjects on the machine's NATS. */
  readonly busNamespace: string
  /** SERVICE_CREDENTIAL of this deployment: what a worker presents to identity for a service principal. */
  readonly serviceCredential: string
  readonly request: <T = any>(method: string, path: string, options?: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> }) => Promise<ApiResponse<T>>
  /**
   * A response for an assertion's message: its body, and for a 5xx what the units logged last,
   * so a failure in CI says why without a second run.
   */
  readonly explain: (response: Pick<ApiResponse, "status" | "body">) => string
  readonly stop: () => Promise<void>
  /** GET /metrics of a process by unit name ("gateway", "branch", "operation-1", …), when started with `metrics`. */
  readonly metricsUrl: (unit: string) => string
}

export interface StartOptions {
  /** Environment for every process. */
  readonly env?: Record<string, string>
  /** How many operation processes to run (default 1); the gateway talks to the first. */
  readonly operationReplicas?: number
  /** Environment for the operation processes only (e.g. a short sweeper deadline). */
  readonly operationEnv?: Record<string, string>
  /** Each process serves Prometheus metrics on a port of its own (`Scion.metricsUrl`). */
  readonly metrics?: boolean
  /** A NATS of the test's own (default NATS_URL, the machine's): for tests that restart it. */
  readonly natsUrl?: string
  /** The PostgreSQL server (its postgres database's URL) the metadata database is made on (default the machine's). */
  readonly metadataServerUrl?: string
}

/**
 * Identity, the operation unit (one or more replicas) and the gateway as separate processes over
 * HTTP/2 gRPC, against a fresh database and the machine's NATS (NATS_URL, default
 * nats://127.0.0.1:4222).
 */
export const startScion = async (options: StartOptions = {}): Promise<Scion> => {
  const database = await createDatabase("scion_e2e", options.metadataServerUrl)
  const replicas = options.operationReplicas ?? 1
  const ports = {
    gateway: await freePort(),
    gatewayHealth: await freePort(),
    identity: await freePort(),
    operation: await Promise.all(Array.from({ length: replicas }, () => freePort())),
    billing: await freePort(),
    connector: await freePort(),
    branch: await freePort()
  }
  const metricsPorts = new Map<string, number>()
  if (options.metrics === true) {
    for (const name of ["identity", "billing", "connector", "branch", "gateway", ...Array.from({ length: replicas }, (_, i) => `operation-${i + 1}`)]) {
      metricsPorts.set(name, await freePort())
    }
  }
  // The deployment's secrets, made as deploy/local/production-shape.mjs makes them.
  const secrets = makeSecrets()
  // Engines (one Postgres cluster per connector) live under a directory of this system's own,
  // removed with it; it must be traversable by the unprivileged user the engines run as.
  const engineDataDir = join(tmpdir(), `scion-e2e-engines-${randomBytes(5).toString("hex")}`)
  await mkdir(engineDataDir, { recursive: true, mode: 0o755 })
  // Every test system shares the machine's NATS: a namespace of its own for every stream, subject
  // and durable keeps systems from taking each other's jobs and events.
  const busNamespace = `e2e${randomBytes(5).toString("hex")}`
  const natsUrl = options.natsUrl ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222"
  const shape = productionShape({
    ports,
    databaseUrl: database.url,
    natsUrl,
    busNamespace,
    secrets,
    engineDataDir,
    env: options.env ?? {},
    operationEnv: options.operationEnv ?? {},
    unitEnv: Object.fromEntries(Array.from(metricsPorts, ([name, port]) => [name, { METRICS_PORT: String(port) }]))
  })
  const started = shape.map((unit) => startUnit(unit.name, unit.script, unit.env))
  const byName = (name: string) => started.find((unit) => unit.name === name)!
  const identity = byName("identity")
  const operations = started.filter((unit) => unit.name.startsWith("operation-"))
  const billing = byName("billing")
  const connector = byName("connector")
  const branch = byName("branch")
  const gateway = byName("gateway")
  const url = (port: number) => `http://127.0.0.1:${port}`
  const identityUrl = url(ports.identity)
  const operationUrls = ports.operation.map(url)
  const billingUrl = url(ports.billing)
  const connectorUrl = url(ports.connector)
  const branchUrl = url(ports.branch)
  const serviceCredential = secrets.serviceCredential
  const secretKeys = secrets.secretKeys
  const gatewayPort = ports.gateway
  const units = [identity, ...operations, billing, connector, branch, gateway]
  const baseUrl = `http://127.0.0.1:${gatewayPort}`
  const request: Scion["request"] = async (method, path, { token, body, rawBody, headers } = {}) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined || rawBody !== undefined ? { "content-type": "application/json" } : {}),
        ...headers
      },
      ...(rawBody !== undefined ? { body: rawBody } : body !== undefined ? { body: JSON.stringify(body) } : {})
    })
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = text.length > 0 ? JSON.parse(text) : null
    } catch {}
    return { status: response.status, body: parsed as any, headers: response.headers }
  }
  try {
    await waitFor("identity, operation and gateway", async () => {
      for (const unit of units) if (unit.child.exitCode !== null) throw new Error(`${unit.name} exited:\n${unit.output()}`)
      const response = await request("POST", "/v1/auth/login", { body: { email: "probe@example.com", password: "probe-password" } })
      if (response.status !== 401) return false
      return (await Promise.all([...operationUrls, billingUrl, connectorUrl, branchUrl].map(healthServing))).every(Boolean)
    }, 60_000)
  } catch (error) {
    await Promise.all(units.map((unit) => unit.stop("SIGKILL")))
    await database.drop()
    throw new Error(`${String(error)}\n${units.map((unit) => `--- ${unit.name} ---\n${unit.output()}`).join("\n")}`)
  }
  // Units log at Warning and above here: their last lines are the story behind a 5xx.
  const explain = (response: Pick<ApiResponse, "status" | "body">) => {
    const body = JSON.stringify(response.body)
    if (response.status < 500) return body
    const tails = units.map((unit) => `--- ${unit.name} ---\n${unit.output().trimEnd().split("\n").slice(-15).join("\n")}`)
    return `${body}\n${tails.join("\n")}`
  }
  return {
    explain,
    metricsUrl: (unit: string) => {
      const port = metricsPorts.get(unit)
      if (port === undefined) throw new Error(`no metrics port for ${unit}: start the system with { metrics: true }`)
      return `http://127.0.0.1:${port}/metrics`
    },
    baseUrl,
    identityUrl,
    identity,
    gateway,
    operations,
    operationUrls,
    billing,
    billingUrl,
    connector,
    connectorUrl,
    engineDataDir,
    secretKeys,
    branch,
    branchUrl,
    databaseUrl: database.url,
    busNamespace,
    serviceCredential,
    request,
    stop: async () => {
      await gateway.stop()
      await Promise.all([...operations.map((unit) => unit.stop()), billing.stop(), connector.stop(), branch.stop(), identity.stop()])
      await stopEngines(engineDataDir)
      await database.drop()
      await dropBusNamespace(natsUrl, busNamespace)
    }
  }
}

/** Deletes a test system's streams (their consumers go with them) from the shared NATS. */
const dropBusNamespace = async (natsUrl: string, namespace: string) => {
  const nc = await natsConnect({ servers: natsUrl })
  try {
    const jsm = await nc.jetstreamManager()
    for await (const stream of jsm.streams.list()) {
      if (stream.config.name.startsWith(`${namespace}_`)) await jsm.streams.delete(stream.config.name)
    }
  } finally {
    await nc.close()
  }
}

let counter = 0

/** A new user with a session token; emails are unique per call. */
export const signUp = async (scion: Scion, name = "user"): Promise<{ token: string; userId: string; email: string }> => {
  const email = `${name}-${Date.now()}-${counter++}@example.com`
  const response = await scion.request("POST", "/v1/auth/signup", { body: { email, password: "correct-horse-battery", full_name: `Test ${name}` } })
  if (response.status !== 201) throw new Error(`signup failed: ${response.status} ${JSON.stringify(response.body)}`)
  return { token: response.body.session_token, userId: response.body.user.user_id, email }
}

/**
 * Stops every engine under a data directory (an immediate shutdown of its postmaster: the engines
 * are detached and outlive the unit) and removes the directory.
 */
export const stopEngines = async (engineDataDir: string): Promise<void> => {
  const entries = await readdir(engineDataDir).catch(() => [] as Array<string>)
  await Promise.all(
    entries.map(async (entry) => {
      // The engine's PgBouncer, when there is one (killed: a safe shutdown waits for its clients),
      // then its postmaster.
      const poolerPid = Number((await readFile(join(engineDataDir, entry, "pooler", "pgbouncer.pid"), "utf8").catch(() => "")).trim())
      if (Number.isInteger(poolerPid) && poolerPid > 0) {
        try {
          process.kill(poolerPid, "SIGKILL")
        } catch {
          // Already gone.
        }
      }
      const pidFile = await readFile(join(engineDataDir, entry, "pgdata", "postmaster.pid"), "utf8").catch(() => "")
      const pid = Number(pidFile.split("\n")[0])
      if (!Number.isInteger(pid) || pid <= 0) return
      try {
        process.kill(pid, "SIGQUIT")
      } catch {
        return
      }
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(pid, 0)
        } catch {
          return
        }
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    })
  )
  // A unit killed while it was starting an engine or its pooler leaves one that wrote its pid file
  // after the look above: whatever still runs from this directory goes too.
  await killProcessesUnder(engineDataDir)
  await rm(engineDataDir, { recursive: true, force: true })
}

/**
 * Kills every process started from a path under `dir` (a postmaster, a PgBouncer) that is still
 * running, including one that starts in the next moments: a test leaves no server behind.
 */
export const killProcessesUnder = async (dir: string): Promise<void> => {
  for (let round = 0; round < 5; round++) {
    const stragglers = await processesUnder(dir)
    for (const pid of stragglers) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // Already gone.
      }
    }
    if (stragglers.length === 0 && round > 0) return
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Processes whose command line names a path under `dir` (engines and poolers started from it). */
const processesUnder = async (dir: string): Promise<Array<number>> => {
  const pids = (await readdir("/proc").catch(() => [] as Array<string>)).filter((name) => /^\d+$/.test(name))
  const found: Array<number> = []
  for (const pid of pids) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
    if (cmdline.includes(dir)) found.push(Number(pid))
  }
  return found.filter((pid) => pid !== process.pid)
}

/** Runs one statement with psql against a URL as a user would (errors stop it), answering its unaligned output. */
export const psql = (url: string, sql: string) => execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql], { encoding: "utf8", timeout: 30_000 }).trim()
