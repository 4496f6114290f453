/**
 * The operator's path: deploy/local/production-shape.mjs, as the README shows it, makes the
 * deployment's secrets and database, starts the six processes, says when they are up, serves the
 * API, stops cleanly on Ctrl-C, and starts again on the same secrets.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtemp, readFile, rm, stat } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect as natsConnect } from "nats"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { healthStatus, makeSecrets, productionShape } from "../../deploy/local/production-shape.mjs"
import { adminUrl, createDatabase, freePort, healthServing, repoRoot, startUnit, type UnitProcess, waitFor } from "../support/system.js"

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** Seven consecutive free ports (gateway, its health port, identity, operation, billing, connector, branch). */
const freeBase = async () => {
  for (;;) {
    // Above the other tests' port blocks (10000–19599), below the ephemeral range (32768+).
    const base = 20_000 + Math.floor(Math.random() * 1_200) * 10
    if ((await Promise.all(Array.from({ length: 7 }, (_, i) => portFree(base + i)))).every(Boolean)) return base
  }
}

let dir: string
let base: number
const databaseName = `scion_shape_${randomBytes(4).toString("hex")}`
const namespace = `shape${randomBytes(4).toString("hex")}`

interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const start = async (): Promise<Started> => {
  const databaseUrl = new URL(adminUrl)
  databaseUrl.pathname = `/${databaseName}`
  const child = spawn(process.execPath, [join(repoRoot, "deploy/local/production-shape.mjs")], {
    cwd: repoRoot,
    env: { ...process.env, SCION_PROD_DIR: dir, DATABASE_URL: databaseUrl.toString(), SCION_PORT_BASE: String(base), BUS_NAMESPACE: namespace, LOG_LEVEL: "Warning" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const deadline = Date.now() + 150_000
  while (!output.includes("the production shape is up")) {
    if (child.exitCode !== null) throw new Error(`the script exited ${child.exitCode}:\n${output}`)
    if (Date.now() > deadline) throw new Error(`not up after 150 s:\n${output}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return { child, output: () => output, exited }
}

const api = (method: string, path: string, body?: unknown, token?: string) =>
  fetch(`http://127.0.0.1:${base}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "scion-shape-"))
  base = await freeBase()
})

afterAll(async () => {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`drop database if exists "${databaseName}" with (force)`)
  await admin.end()
  const nc = await natsConnect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" })
  const jsm = await nc.jetstreamManager()
  for await (const stream of jsm.streams.list()) if (stream.config.name.startsWith(`${namespace}_`)) await jsm.streams.delete(stream.config.name)
  await nc.close()
  await rm(dir, { recursive: true, force: true })
})

describe("deploy/local/production-shape.mjs", () => {
  it("makes the secrets and the database, starts the six processes, serves, and stops on Ctrl-C; a restart keeps the secrets", async () => {
    const first = await start()
    const secretsFile = join(dir, "secrets.json")
    expect((await stat(secretsFile)).mode & 0o777).toBe(0o600)
    const secrets = JSON.parse(await readFile(secretsFile, "utf8"))
    expect(Object.keys(secrets).sort()).toEqual(["secretKeys", "serviceCredential", "signingKey"])
    expect(first.output()).toContain(`created database ${databaseName}`)
    // Every process, its own port: identity, operation, billing, connector and branch answered SERVING.
    const signup = await api("POST", "/v1/auth/signup", { email: `shape-${Date.now()}@example.com`, password: "correct-horse-battery", full_name: "Operator" })
    expect(signup.status).toBe(201)
    const token = ((await signup.json()) as { session_token: string }).session_token
    const org = await api("POST", "/v1/orgs", { name: "Shape" }, token)
    expect(org.status).toBe(201)
    const orgId = ((await org.json()) as { org_id: string }).org_id
    // A project asks billing for the plan's limit; a connector list goes to the connector unit.
    expect((await api("POST", "/v1/projects", { org_id: orgId, name: "p" }, token)).status).toBe(201)
    expect((await api("GET", `/v1/connectors?org_id=${orgId}`, undefined, token)).status).toBe(200)

    first.child.kill("SIGINT")
    expect(await first.exited).toBe(0)
    expect(await portFree(base)).toBe(true)

    const second = await start()
    try {
      expect(JSON.parse(await readFile(secretsFile, "utf8"))).toEqual(secrets)
      expect(second.output()).not.toContain("created database")
      // Sessions and orgs live in the database: the same token still works.
      expect((await api("GET", `/v1/orgs/${orgId}`, undefined, token)).status).toBe(200)
    } finally {
      second.child.kill("SIGTERM")
      expect(await second.exited).toBe(0)
    }
  }, 360_000)
})

describe("units and their dependencies", () => {
  it("a unit started before identity waits for it, answering NOT_SERVING, and serves once identity is up; a fatal error is logged with its message", async () => {
    const database = await createDatabase("scion_deps")
    const ports = { gateway: await freePort(), gatewayHealth: await freePort(), identity: await freePort(), operation: [await freePort()], billing: await freePort(), connector: await freePort(), branch: await freePort() }
    const shape = productionShape({ ports, databaseUrl: database.url, natsUrl: process.env.NATS_URL ?? "nats://127.0.0.1:4222", busNamespace: namespace, secrets: makeSecrets(), engineDataDir: dir })
    const unitOf = (name: string) => shape.find((u) => u.name === name)!
    const operation = startUnit("operation-1", unitOf("operation-1").script, { ...unitOf("operation-1").env, LOG_LEVEL: "Info" })
    let identity: UnitProcess | undefined
    try {
      await waitFor("the operation unit to say it waits for identity", async () => operation.output().includes("waiting for identity"), 30_000).catch((e) => {
        throw new Error(`${String(e)}\n${operation.output()}`)
      })
      // Past the old one-minute give-up it would still wait; here: alive and not serving yet.
      await new Promise((resolve) => setTimeout(resolve, 3000))
      expect(operation.child.exitCode).toBeNull()
      // The port is open and says not ready: probes see NOT_SERVING, not a refused connection.
      expect(await healthStatus(`http://127.0.0.1:${ports.operation[0]}`)).toBe("NOT_SERVING")
      identity = startUnit("identity", unitOf("identity").script, unitOf("identity").env)
      await waitFor("the operation unit to serve", () => healthServing(`http://127.0.0.1:${ports.operation[0]}`), 60_000)

      // The connector without its secret store's keys cannot start: the line says why.
      const { SECRET_KEYS: _keys, ...withoutKeys } = unitOf("connector").env
      const connector = startUnit("connector", unitOf("connector").script, withoutKeys)
      await waitFor("the connector to exit", async () => connector.child.exitCode !== null, 30_000)
      expect(connector.child.exitCode).not.toBe(0)
      const fatal = connector
        .output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { message: unknown; logLevel: string })
        .find((line) => line.logLevel === "ERROR" || line.logLevel === "FATAL")
      expect(fatal?.message).toEqual(expect.stringContaining("SECRET_KEYS"))
    } finally {
      await Promise.all([operation.stop(), identity?.stop()])
      await database.drop()
    }
  }, 180_000)
})
