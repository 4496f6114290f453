import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import pg from "pg"
import { pooledSession, PostgresPools, warmPool } from "../src/index.js"

const adminUrl = new URL(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres")
const endpoint = {
  host: adminUrl.hostname,
  port: Number(adminUrl.port || 5432),
  database: adminUrl.pathname.slice(1) || "postgres",
  user: decodeURIComponent(adminUrl.username || "postgres"),
  password: Redacted.make(decodeURIComponent(adminUrl.password)),
  ssl: false as const
}

/** The sessions the server holds for an application name, by state. */
const sessionsOf = async (applicationName: string) => {
  const client = new pg.Client({ connectionString: adminUrl.toString() })
  await client.connect()
  try {
    const { rows } = await client.query<{ state: string; n: number }>("select state, count(*)::int as n from pg_stat_activity where application_name = $1 group by state", [applicationName])
    return Object.fromEntries(rows.map((r) => [r.state, r.n]))
  } finally {
    await client.end()
  }
}

describe("warmPool", () => {
  it.scoped("logs the sessions in and leaves them idle in the pool, which then serves borrowers without a login", () =>
    Effect.gen(function* () {
      const applicationName = `scion-warm-${randomBytes(4).toString("hex")}`
      const options = { applicationName, connectMillis: 5_000, max: 8 }
      yield* warmPool(endpoint, options, 3)
      expect(yield* Effect.promise(() => sessionsOf(applicationName))).toEqual({ idle: 3 })
      // Enough already: nothing more opens.
      yield* warmPool(endpoint, options, 2)
      yield* warmPool(endpoint, options, 3)
      expect(yield* Effect.promise(() => sessionsOf(applicationName))).toEqual({ idle: 3 })
      // Three borrowers at once are served by the warm sessions: still three on the server.
      const pids = yield* Effect.all(
        Array.from({ length: 3 }, () => Effect.scoped(Effect.flatMap(pooledSession(endpoint, options), (session) => session.query<{ pid: number }>("select pg_backend_pid() as pid, pg_sleep(0.05)")))),
        { concurrency: "unbounded" }
      )
      expect(new Set(pids.map(([row]) => row!.pid)).size).toBe(3)
      expect(yield* Effect.promise(() => sessionsOf(applicationName))).toEqual({ idle: 3 })
      // Never more than the pool may hold.
      yield* warmPool(endpoint, { ...options, max: 4 }, 10)
      expect(yield* Effect.promise(() => sessionsOf(applicationName))).toEqual({ idle: 4 })
    }).pipe(Effect.provide(PostgresPools.layer))
  )

  it.scoped("never fails: a server that refuses the login leaves the pool empty", () =>
    Effect.gen(function* () {
      const applicationName = `scion-warm-${randomBytes(4).toString("hex")}`
      yield* warmPool({ ...endpoint, port: 1 }, { applicationName, connectMillis: 2_000, max: 8 }, 3)
      expect(yield* Effect.promise(() => sessionsOf(applicationName))).toEqual({})
    }).pipe(Effect.provide(PostgresPools.layer))
  )
})
