import { randomBytes } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer, Redacted } from "effect"

/** The server tests create their throwaway databases on (the machine's Postgres by default). */
export const testServerUrl = (): string => process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const adminClient = PgClient.layer({ url: Redacted.make(testServerUrl()), maxConnections: 1 })

/**
 * A fresh database for one test file, dropped when the scope closes. Yields its URL.
 */
export const freshDatabase = (prefix: string) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const name = `${prefix}_${randomBytes(5).toString("hex")}`
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`create database "${name}"`)
      const url = new URL(testServerUrl())
      url.pathname = `/${name}`
      return { name, url: url.toString() }
    }).pipe(Effect.provide(adminClient)),
    ({ name }) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`drop database if exists "${name}" with (force)`)).pipe(
        Effect.provide(adminClient),
        Effect.ignore
      )
  ).pipe(Effect.orDie, Effect.map(({ url }) => url))

/** Provides DATABASE_URL (and any other settings) to a layer through a config provider. */
export const withConfig = (values: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(values))))

/** A layer's config pointed at a fresh database for this test file. */
export const onFreshDatabase = <A, E, R>(prefix: string, layer: Layer.Layer<A, E, R>) =>
  Layer.unwrapScoped(Effect.map(freshDatabase(prefix), (url) => Layer.provide(layer, withConfig({ DATABASE_URL: url }))))

/**
 * How often `effect`, run in one transaction, scanned `table` sequentially and by index: Postgres's
 * count of the session's scans not yet reported, read before and after on the same connection.
 */
export const scansDuring = <A, E, R>(table: string, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const counted = Effect.map(
      sql<{ seqScans: number; indexScans: number }>`select seq_scan::int as "seqScans", coalesce(idx_scan, 0)::int as "indexScans" from pg_stat_xact_user_tables where relname = ${table}`,
      (rows) => rows[0] ?? { seqScans: 0, indexScans: 0 }
    )
    return sql.withTransaction(
      Effect.gen(function* () {
        const before = yield* counted
        const value = yield* effect
        const after = yield* counted
        return { value, scans: { seqScans: after.seqScans - before.seqScans, indexScans: after.indexScans - before.indexScans } }
      })
    )
  })
