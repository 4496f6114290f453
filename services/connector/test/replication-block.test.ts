import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { freshDatabase, testServerUrl, withConfig } from "@scion/kit/testing"
import { Context, Effect, Fiber, Layer } from "effect"
import { QuarantineRepo } from "../src/engine/QuarantineRepo.js"
import { ConnectorDatabase } from "../src/index.js"
import { pgClientSession } from "./pgClient.js"

/** A session of its own on the unit's database, closed with the scope. */
const session = pgClientSession

describe("the connector's replication block", () => {
  it.live("a monitor round that waited for a cutover or rollback records the pipeline it switched to, not the one it replaced", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabase("connector_replication_block")
        const unit = yield* Layer.build(QuarantineRepo.Default.pipe(Layer.provideMerge(ConnectorDatabase), Layer.provide(withConfig({ DATABASE_URL: url }))))
        const sql = Context.get(unit, SqlClient.SqlClient)
        yield* sql`insert into connectors (id, org_id, name, service_name, connector_category) values ('con_race', 'org_race', 'race', 'postgresql', 'database')`
        yield* sql`insert into engines (connector_id, mirror_database, publication_name, slot_name, subscription_name)
                   values ('con_race', 'mirror_g2', 'scion_con_race_g2', 'scion_con_race_g2', 'scion_con_race_g2')`
        // A rollback to the first pipeline, written as PipelinesRepo's switch writes it, still open.
        const rollback = yield* session(url)
        yield* Effect.promise(() => rollback.query("begin"))
        yield* Effect.promise(() => rollback.query("update connector.engines set publication_name = 'scion_con_race', mirror_database = 'mirror' where connector_id = 'con_race'"))
        yield* Effect.promise(() =>
          rollback.query(`update connector.connectors set replication = jsonb_set(coalesce(replication, '{}'::jsonb), '{active_pipeline_id}', '"scion_con_race"') where id = 'con_race'`)
        )
        // The round's measurement, made while the rollback ran (so it names the pipeline it saw).
        const round = yield* Effect.fork(
          Context.get(unit, QuarantineRepo).recordReplication("con_race", {
            status: "streaming",
            lag_bytes: 0,
            last_applied_at: null,
            active_pipeline_id: "scion_con_race_g2",
            schema_follow: "capture",
            measured_at: new Date().toISOString()
          })
        )
        // The round waits for the rollback's lock on the connector's row.
        const observer = yield* session(testServerUrl())
        const waiting = Effect.promise(() =>
          observer.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and application_name = 'scion-connector'")
        )
        while ((yield* waiting).rows[0]!.n === 0) yield* Effect.sleep("20 millis")
        yield* Effect.promise(() => rollback.query("commit"))
        yield* Fiber.join(round)
        const [block] = yield* sql<{ active: string }>`select replication->>'active_pipeline_id' as active from connectors where id = 'con_race'`
        expect(block!.active).toBe("scion_con_race")
      })
    )
  )
})
