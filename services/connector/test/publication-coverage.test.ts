import { describe, expect, it } from "@effect/vitest"
import { freshDatabase } from "@scion/kit/testing"
import { Effect } from "effect"
import type { PgSession } from "../src/engine/PgSession.js"
import { publicationChangedDetail, publicationCoverage } from "../src/replication/PublicationSql.js"
import { pgClientSession } from "./pgClient.js"

/** A real session on a fresh database of the machine's Postgres, shaped as the monitor's source session. */
const sourceOn = (url: string) =>
  pgClientSession(url).pipe(
    Effect.map(
      (client): PgSession => ({
        database: "source",
        query: <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) =>
          Effect.promise(() => client.query<R>(text, [...values])).pipe(Effect.map((result) => result.rows))
      })
    )
  )

describe("a publication's coverage of the tables a mirror follows", () => {
  it.live("complete, missing, a table left out, some actions left out, a row filter or column list, a dropped table, a schema-wide publication", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabase("connector_publication_coverage")
        const source = yield* sourceOn(url)
        yield* source.query(`
          create schema app;
          create table app.accounts (id int primary key, email text);
          create table app.orders (id int primary key, amount int);
          create table app.gone (id int primary key);
          create schema scion;
          create table scion.heartbeat (connector_id text primary key, at timestamptz);
          create publication scion_p for table app.accounts, app.orders, app.gone, scion.heartbeat`)
        const oids = yield* source.query<{ oid: string }>("select oid::text as oid from pg_class where relnamespace = 'app'::regnamespace and relkind = 'r' order by relname")
        const followed = oids.map((row) => row.oid)
        // Scion's own tables the mirror receives: the heartbeat here; the source has no capture log.
        const coverage = () => publicationCoverage(source, "scion_p", followed, ["scion.heartbeat", "scion.schema_log"])

        expect(yield* coverage()).toEqual({ state: "complete" })
        yield* source.query("alter publication scion_p drop table scion.heartbeat")
        expect(yield* coverage()).toEqual({ state: "incomplete", tables: ["scion.heartbeat"], partial: [], actions: [] })
        yield* source.query("alter publication scion_p add table scion.heartbeat")
        expect(yield* publicationCoverage(source, "scion_other", followed, [])).toEqual({ state: "missing" })

        // A table the mirror follows, dropped on the source: schema following's, not the publication's.
        yield* source.query("drop table app.gone")
        expect(yield* coverage()).toEqual({ state: "complete" })

        yield* source.query("alter publication scion_p drop table app.orders")
        yield* source.query("alter publication scion_p set (publish = 'insert, delete')")
        const left = yield* coverage()
        expect(left).toEqual({ state: "incomplete", tables: ["app.orders"], partial: [], actions: ["update", "truncate"] })
        expect(publicationChangedDetail("scion_p", left as Exclude<typeof left, { state: "complete" }>)).toMatch(
          /^The publication scion_p no longer publishes app\.orders, updates, truncates: the mirror missed/
        )

        yield* source.query("alter publication scion_p set (publish = 'insert, update, delete, truncate')")
        yield* source.query("alter publication scion_p set table app.accounts where (id > 10), app.orders (id), scion.heartbeat")
        const partial = yield* coverage()
        expect(partial).toEqual({ state: "incomplete", tables: [], partial: ["app.accounts", "app.orders"], actions: [] })
        expect(publicationChangedDetail("scion_p", partial as Exclude<typeof partial, { state: "complete" }>)).toContain("publishes only some rows or columns of app.accounts, app.orders")

        // Published through the schema instead of by name: still every row of every table.
        yield* source.query("drop publication scion_p")
        yield* source.query("create publication scion_p for tables in schema app, scion")
        expect(yield* coverage()).toEqual({ state: "complete" })
      })
    )
  )
})
