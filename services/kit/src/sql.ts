import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { Migrator, SqlClient, SqlError } from "@effect/sql"
import { Config, Duration, Effect, Layer, Redacted } from "effect"
import { compensatedTransaction } from "./rollback-undo.js"

/**
 * Forward-only migrations kept as numbered SQL files (`0001_initial.sql`) in a unit's
 * `migrations/` folder, read at start. SQL files stay reviewable and need no build step.
 */
export const sqlFileMigrations = (directory: URL): Migrator.Loader =>
  Effect.sync(() => {
    const dir = fileURLToPath(directory)
    return readdirSync(dir)
      .flatMap((file) => {
        const match = file.match(/^(\d+)_(.+)\.sql$/)
        if (!match) return []
        const sqlText = readFileSync(`${dir}/${file}`, "utf8")
        const migration = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(sqlText).raw)
        return [[Number(match[1]), match[2]!, Effect.succeed(migration)] as const]
      })
      .sort((a, b) => a[0] - b[0])
  })

// No schema dumps: the SQL files are the record.
const runMigrations = Migrator.make({})

const withSearchPath = (url: string, schema: string): string => {
  const parsed = new URL(url)
  parsed.searchParams.set("options", `-c search_path=${schema}`)
  return parsed.toString()
}

export interface UnitDatabaseOptions {
  /** The Postgres schema the unit owns; every table of the unit lives there. */
  readonly schema: string
  readonly migrations: URL
  readonly maxConnections?: number
}

/**
 * The unit's SQL client (DATABASE_URL, search_path set to its own schema) with its migrations
 * applied. Replicas may start together: schema and migrations table are created under an
 * advisory lock, and the Migrator locks that table while it migrates.
 */
export const unitDatabase = (options: UnitDatabaseOptions) => {
  const client = Layer.unwrapEffect(
    Effect.gen(function* () {
      const url = yield* Config.redacted("DATABASE_URL")
      const maxConnections = yield* Config.integer("DATABASE_MAX_CONNECTIONS").pipe(Config.withDefault(options.maxConnections ?? 10))
      // Connections above the floor close after the idle timeout; the floor stays open, so the
      // first request after a quiet spell does not open connections (traced: 1.5-7 ms a statement
      // instead of 0.3-0.6 when every pool had emptied after pg-pool's 10 s).
      const minConnections = yield* Config.integer("DATABASE_MIN_CONNECTIONS").pipe(Config.withDefault(2))
      const idleTimeout = yield* Config.integer("DATABASE_IDLE_TIMEOUT_MS").pipe(Config.withDefault(10_000))
      const floor = Math.min(minConnections, maxConnections)
      // The floor is logged in as the unit starts, not by its first requests (pg-pool keeps
      // the floor open but does not open it): traced, a unit's first statements waited 7-13 ms
      // for a login each.
      const warm = Layer.effectDiscard(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          Effect.all(Array.from({ length: floor }, () => sql`select 1`), { concurrency: "unbounded", discard: true })
        ).pipe(Effect.ignore)
      )
      return Layer.provideMerge(
        warm,
        PgClient.layer({
          url: Redacted.make(withSearchPath(Redacted.value(url), options.schema)),
          maxConnections,
          minConnections: floor,
          idleTimeout: Duration.millis(idleTimeout),
          applicationName: `scion-${options.schema}`
        })
      )
    })
  )
  const migrate = Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // The Migrator serialises replicas by locking its table, but creating that table races on
      // a new database; so schema and table are created first under an advisory lock (same
      // shape as the Migrator's own).
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`select pg_advisory_xact_lock(hashtext(${"scion-schema-" + options.schema}))`
          yield* sql.unsafe(`create schema if not exists "${options.schema}"`)
          yield* sql.unsafe(`create table if not exists "${options.schema}".schema_migrations (
            migration_id integer primary key,
            created_at timestamp with time zone not null default now(),
            name text not null
          )`)
        })
      )
      yield* runMigrations({ loader: sqlFileMigrations(options.migrations), table: "schema_migrations" })
    }).pipe(Effect.withSpan("unitDatabase.migrate", { attributes: { schema: options.schema } }))
  )
  return Layer.provideMerge(migrate, client).pipe(Layer.orDie)
}

/** An SQL failure of the unit's own database is infrastructure: a defect, as at every repository edge. */
export const dieOnSqlError = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, SqlError.SqlError>, R> =>
  Effect.catchIf(effect as Effect.Effect<A, E | SqlError.SqlError, R>, (e): e is SqlError.SqlError => e instanceof SqlError.SqlError, Effect.die) as never

/**
 * A unit's transaction runner: domain failures roll back and pass through; SQL failures die. What
 * remote calls inside it registered with `undoOnRollback` is undone when its work fails.
 */
export const transactional =
  (sql: SqlClient.SqlClient) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, SqlError.SqlError>, R> =>
    dieOnSqlError(compensatedTransaction(effect, (work) => sql.withTransaction(work)))
