import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { unitDatabase } from "../src/index.js"
import { freshDatabase, withConfig } from "../src/testing.js"

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
})
