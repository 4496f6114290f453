#!/usr/bin/env node
// Scion's production shape on one machine: the six processes (identity, operation, billing,
// connector, branch, gateway) as separate Node processes talking HTTP/2 gRPC, against an
// existing PostgreSQL and a NATS server with JetStream.
//
//   node deploy/local/production-shape.mjs      (after `npm run setup`)
//
// It makes the deployment's secrets once (the Ed25519 key identity signs principals with, the
// shared SERVICE_CREDENTIAL of the workers, the connector's SECRET_KEYS) under SCION_PROD_DIR
// (default ./.scion-production, mode 0700, secrets.json 0600), creates the database when
// missing, starts every process with every setting it needs, waits until each reports SERVING,
// and stops them all on Ctrl-C. The end-to-end tests start their systems through
// `productionShape` below, so what this script runs is what the tests run.
//
// Settings: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/scion), NATS_URL (default
// nats://127.0.0.1:4222), BUS_NAMESPACE (prefix of every stream and subject when the NATS is
// shared), SCION_PORT_BASE (gateway on it, its health port +1, identity +2, operation +3,
// billing +4, connector +5, branch +6; default: 8080/8081 and 50051–50055), LOG_LEVEL.
import { execFileSync, spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises"
import { connect as http2Connect } from "node:http2"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")

/** The deployment's secrets: what deploy/ keeps in Kubernetes Secrets. */
export const makeSecrets = () => ({
  // identity signs principals with it; every unit verifies with the public half identity serves.
  signingKey: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  // what a worker (connector, branch) presents to identity for its service principal.
  serviceCredential: randomBytes(24).toString("base64url"),
  // the connector's secret store: <key id>:<32 bytes, base64>, the first one encrypts.
  secretKeys: `k1:${randomBytes(32).toString("base64")}`
})

/**
 * V8 settings every unit runs with (here, in the Deployments, tests and benches). Under load V8 let
 * a unit's old generation grow to ~4× its ~50 MB of live objects before collecting (peak RSS 260 MB
 * for the gateway); growing by half instead holds it near 150 MB for the same CPU per request
 * (measured with bench:gateway; capping the heap instead cost 40–60% more CPU). The collector works
 * on the unit's own thread (`--single-threaded-gc`): on a few shared cores its helper threads took
 * CPU from the other processes of a request's path, and bench:gateway's p99 went 27–31 → 19–21 ms
 * with 8–14% less CPU a request; 4 MB semi-spaces (not 8) keep the peak RSS where it was.
 */
export const UNIT_NODE_FLAGS = ["--single-threaded-gc", "--heap-growing-percent=50", "--max-semi-space-size=4"]

/** The standard ports, or consecutive ones from a base. */
export const portsFrom = (base) =>
  base === undefined
    ? { gateway: 8080, gatewayHealth: 8081, identity: 50051, operation: [50052], billing: 50053, connector: 50054, branch: 50055 }
    : { gateway: base, gatewayHealth: base + 1, identity: base + 2, operation: [base + 3], billing: base + 4, connector: base + 5, branch: base + 6 }

/**
 * Every process of the production shape with every setting it needs: [{ name, script, env }].
 * `ports.operation` lists one port per operation replica; the other units talk to the first.
 */
export const productionShape = ({ ports, host = "127.0.0.1", databaseUrl, natsUrl, busNamespace, secrets, engineDataDir, env = {}, operationEnv = {}, unitEnv = {} }) => {
  const url = (port) => `http://${host}:${port}`
  const identityUrl = url(ports.identity)
  const operationUrl = url(ports.operation[0])
  const billingUrl = url(ports.billing)
  const connectorUrl = url(ports.connector)
  const branchUrl = url(ports.branch)
  const shared = { NATS_URL: natsUrl, ...(busNamespace ? { BUS_NAMESPACE: busNamespace } : {}) }
  // Later wins: the unit's own settings, the caller's for every process, then for this one.
  const unit = (name, script, own) => ({ name, script, env: { ...own, ...env, ...(name.startsWith("operation-") ? operationEnv : {}), ...(unitEnv[name] ?? {}) } })
  return [
    unit("identity", "services/identity/dist/server.mjs", {
      PORT: String(ports.identity),
      DATABASE_URL: databaseUrl,
      IDENTITY_SIGNING_KEY: secrets.signingKey,
      SERVICE_CREDENTIAL: secrets.serviceCredential,
      BILLING_URL: billingUrl,
      ...shared
    }),
    ...ports.operation.map((port, i) =>
      unit(`operation-${i + 1}`, "services/operation/dist/server.mjs", { PORT: String(port), DATABASE_URL: databaseUrl, IDENTITY_URL: identityUrl, ...shared })
    ),
    unit("billing", "services/billing/dist/server.mjs", { PORT: String(ports.billing), DATABASE_URL: databaseUrl, IDENTITY_URL: identityUrl, ...shared }),
    unit("connector", "services/connector/dist/server.mjs", {
      PORT: String(ports.connector),
      DATABASE_URL: databaseUrl,
      IDENTITY_URL: identityUrl,
      BILLING_URL: billingUrl,
      OPERATION_URL: operationUrl,
      BRANCH_URL: branchUrl,
      SERVICE_CREDENTIAL: secrets.serviceCredential,
      SECRET_KEYS: secrets.secretKeys,
      ENGINE_DATA_DIR: engineDataDir,
      ...shared
    }),
    unit("branch", "services/branch/dist/server.mjs", {
      PORT: String(ports.branch),
      DATABASE_URL: databaseUrl,
      IDENTITY_URL: identityUrl,
      OPERATION_URL: operationUrl,
      CONNECTOR_URL: connectorUrl,
      BILLING_URL: billingUrl,
      SERVICE_CREDENTIAL: secrets.serviceCredential,
      SECRET_KEYS: secrets.secretKeys,
      ...shared
    }),
    unit("gateway", "gateway/dist/server.mjs", {
      PORT: String(ports.gateway),
      HEALTH_PORT: String(ports.gatewayHealth),
      IDENTITY_URL: identityUrl,
      OPERATION_URL: operationUrl,
      BILLING_URL: billingUrl,
      CONNECTOR_URL: connectorUrl,
      BRANCH_URL: branchUrl
    })
  ]
}

/** grpc.health.v1 Check over the Connect protocol (JSON on HTTP/2): "SERVING", "NOT_SERVING" or "unreachable". */
export const healthStatus = (baseUrl) =>
  new Promise((done) => {
    const session = http2Connect(baseUrl)
    const finish = (value) => {
      session.close()
      done(value)
    }
    session.once("error", () => finish("unreachable"))
    const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/json" })
    let body = ""
    stream.setEncoding("utf8")
    stream.on("data", (chunk) => (body += chunk))
    stream.once("error", () => finish("unreachable"))
    stream.once("end", () => finish(body.includes("NOT_SERVING") ? "NOT_SERVING" : body.includes("SERVING") ? "SERVING" : "unreachable"))
    stream.end("{}")
  })

/** True when the unit at `baseUrl` reports SERVING. */
export const healthServing = async (baseUrl) => (await healthStatus(baseUrl)) === "SERVING"

/** Whether every process answers: the units' gRPC health, the gateway's /healthz. */
export const allServing = async (units) => {
  const checks = units.map((u) =>
    u.name === "gateway"
      ? fetch(`http://127.0.0.1:${u.env.PORT}/healthz`).then((r) => r.ok, () => false)
      : healthServing(`http://127.0.0.1:${u.env.PORT}`)
  )
  return (await Promise.all(checks)).every(Boolean)
}

const loadSecrets = async (dir) => {
  const file = join(dir, "secrets.json")
  if (existsSync(file)) return JSON.parse(await readFile(file, "utf8"))
  const secrets = makeSecrets()
  await writeFile(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 })
  await chmod(file, 0o600)
  console.log(`[scion] made the deployment's secrets in ${file} (keep it: the connector's stored secrets need SECRET_KEYS)`)
  return secrets
}

/** Creates the database when it does not exist (psql against the server's postgres database). */
const ensureDatabase = (databaseUrl) => {
  const url = new URL(databaseUrl)
  const name = decodeURIComponent(url.pathname.slice(1))
  const admin = new URL(databaseUrl)
  admin.pathname = "/postgres"
  const exists = execFileSync("psql", [admin.toString(), "-Atc", `select 1 from pg_database where datname = '${name.replaceAll("'", "''")}'`], { encoding: "utf8" }).trim()
  if (exists !== "1") {
    execFileSync("psql", [admin.toString(), "-qc", `create database "${name.replaceAll('"', '""')}"`])
    console.log(`[scion] created database ${name}`)
  }
}

const main = async () => {
  const dir = resolve(process.env.SCION_PROD_DIR ?? ".scion-production")
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const secrets = await loadSecrets(dir)
  const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/scion"
  ensureDatabase(databaseUrl)
  const engineDataDir = join(dir, "engines")
  await mkdir(engineDataDir, { recursive: true, mode: 0o755 })
  const base = process.env.SCION_PORT_BASE === undefined ? undefined : Number(process.env.SCION_PORT_BASE)
  const ports = portsFrom(base)
  const units = productionShape({
    ports,
    databaseUrl,
    natsUrl: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
    busNamespace: process.env.BUS_NAMESPACE,
    secrets,
    engineDataDir,
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "Info" }
  })
  const children = units.map((u) => {
    const child = spawn(process.execPath, [...UNIT_NODE_FLAGS, join(repoRoot, u.script)], { cwd: repoRoot, env: { ...process.env, ...u.env }, stdio: ["ignore", "pipe", "pipe"] })
    const prefix = (stream, out) => {
      let rest = ""
      stream.setEncoding("utf8")
      stream.on("data", (chunk) => {
        const lines = (rest + chunk).split("\n")
        rest = lines.pop() ?? ""
        for (const line of lines) out.write(`[${u.name}] ${line}\n`)
      })
    }
    prefix(child.stdout, process.stdout)
    prefix(child.stderr, process.stderr)
    return { unit: u, child }
  })
  let stopping = false
  const stop = async (code) => {
    if (stopping) return
    stopping = true
    // The gateway first (no new requests), then the units, each draining in its own grace period.
    const exit = (c) => new Promise((done) => (c.exitCode !== null || c.signalCode !== null ? done() : c.once("exit", done)))
    const gateway = children.find((c) => c.unit.name === "gateway")
    gateway?.child.kill("SIGTERM")
    if (gateway) await exit(gateway.child)
    for (const c of children) c.child.kill("SIGTERM")
    await Promise.all(children.map((c) => exit(c.child)))
    process.exit(code)
  }
  process.on("SIGINT", () => void stop(0))
  process.on("SIGTERM", () => void stop(0))
  for (const c of children) {
    c.child.once("exit", (code, signal) => {
      if (stopping) return
      console.error(`[scion] ${c.unit.name} exited (${signal ?? code}); stopping the others`)
      void stop(1)
    })
  }
  const deadline = Date.now() + 120_000
  while (!(await allServing(units))) {
    if (Date.now() > deadline) {
      console.error("[scion] not every process reported SERVING within 120 s")
      return stop(1)
    }
    await new Promise((r) => setTimeout(r, 250))
  }
  console.log(`[scion] the production shape is up: http://127.0.0.1:${ports.gateway} (units SERVING; Ctrl-C stops them)`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error) => {
    console.error(`[scion] ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  })
}
