import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import pg from "pg"
import { unitDatabase } from "../src/index.js"
import { freshDatabase, testServerUrl, withConfig } from "../src/testing.js"

const database = unitDatabase({ schema: "widgets_unit", migrations: new URL("./fixtures/migrations/", import.meta.url), maxConnections: 2 })

describe("unit databases", () => {
  it.live("migrate once when several replicas start on a new database at the same moment", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabase("kit_sql_test")
        const replicas = yield* Effect.forEach(
          [1, 2, 3, 4],
          () => Layer.build(database.pipe(Layer.provide(withConfig({ DATABASE_URL: url })))),
          { concurrency: "unbounded" }
        )
        const sql = replicas[0]!.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
        const applied = yield* sql<{ readonly migration_id: number }>`select migration_id from schema_migrations`
        expect(applied.map((m) => Number(m.migration_id))).toEqual([1])
        yield* sql`insert into widgets (name) values ('sprocket')`
        expect((yield* sql<{ readonly n: string }>`select count(*)::text as n from widgets_unit.widgets`)[0]!.n).toBe("1")
      })
    ),
    60_000
  )

  it.live("open their floor of connections as they start, keep it through a quiet spell, and close the rest", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabase("kit_sql_floor")
        const pooled = unitDatabase({ schema: "floor_unit", migrations: new URL("./fixtures/migrations/", import.meta.url), maxConnections: 6 })
        const context = yield* Layer.build(pooled.pipe(Layer.provide(withConfig({ DATABASE_URL: url, DATABASE_IDLE_TIMEOUT_MS: "300" }))))
        const sql = context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
        const open = Effect.promise(async () => {
          const client = new pg.Client({ connectionString: testServerUrl() })
          await client.connect()
          try {
            return (await client.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where application_name = 'scion-floor_unit'")).rows[0]!.n
          } finally {
            await client.end()
          }
        })
        // Logged in as the unit starts, before any request asks: the floor (2 by default).
        expect(yield* open).toBe(2)
        // A burst opens more than the floor.
        yield* Effect.all(Array.from({ length: 5 }, () => sql`select pg_sleep(0.1)`), { concurrency: "unbounded" })
        expect(yield* open).toBeGreaterThanOrEqual(5)
        // A quiet spell longer than the idle timeout: the floor (2 by default) stays.
        yield* Effect.sleep("1500 millis")
        expect(yield* open).toBe(2)
      })
    ),
    60_000
  )
})
