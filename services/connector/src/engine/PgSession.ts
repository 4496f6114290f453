import type { ConnectionOptions } from "node:tls"
import pg from "pg"
import { Effect, Redacted, Schema, type Scope } from "effect"
import type { PostgresDetails } from "../connectors/ConnectionDetails.js"
import { reasonOf, tlsFor } from "../connectors/Preflight.js"
import { connectSource } from "../connectors/SourceConnection.js"
import type { Engine } from "./EngineProvisioner.js"

/**
 * A step of engine setup talking to the source or the engine failed. `reason` is safe to show
 * (the driver's message with connection strings removed, never a password).
 */
export class PgStepFailed extends Schema.TaggedError<PgStepFailed>()("PgStepFailed", {
  target: Schema.Literal("source", "engine"),
  database: Schema.String,
  reason: Schema.String,
  sqlstate: Schema.optional(Schema.String)
}) {
  override get message() {
    return `${this.target} database ${this.database}: ${this.reason}`
  }
}

/** One open connection: queries answer rows or a PgStepFailed. */
export interface PgSession {
  readonly database: string
  readonly query: <R extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<R>, PgStepFailed>
}

const sessionOf = (client: pg.Client, target: "source" | "engine", database: string): PgSession => ({
  database,
  query: <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) =>
    Effect.tryPromise({
      try: () => client.query<R>(text, [...values]).then((r) => r.rows),
      catch: (error) => failure(target, database, error)
    })
})

const failure = (target: "source" | "engine", database: string, error: unknown) => {
  const code = (error as { code?: unknown })?.code
  return new PgStepFailed({ target, database, reason: reasonOf(error), ...(typeof code === "string" && /^[A-Z0-9]{5}$/.test(code) ? { sqlstate: code } : {}) })
}

/**
 * A session on a source database with the connector's credentials, in the caller's scope. Like
 * libpq, sslmode=prefer falls back to a plain connection when the server has no TLS.
 */
export const sourceSession = (
  details: PostgresDetails,
  password: string,
  options: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number }
): Effect.Effect<PgSession, PgStepFailed, Scope.Scope> => {
  const connect = (ssl: false | ConnectionOptions) => connectSource(details, password, ssl, options)
  return connect(tlsFor(details.sslmode)).pipe(
    Effect.catchAll((error) =>
      details.sslmode === "prefer" && /does not support SSL/i.test((error as { message?: string })?.message ?? "") ? connect(false) : Effect.fail(error)
    ),
    Effect.mapError((error) => failure("source", details.database, error)),
    Effect.map((client) => sessionOf(client, "source", details.database))
  )
}

/**
 * A session on an engine database as its superuser, over TLS (the engine refuses anything else;
 * its certificate is self-signed, so the chain is not verified, like sslmode=require).
 */
export const engineSession = (
  engine: Engine,
  database: string,
  options: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis?: number }
): Effect.Effect<PgSession, PgStepFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new pg.Client({
          host: engine.host,
          port: engine.port,
          database,
          user: engine.superuser.username,
          password: Redacted.value(engine.superuser.password),
          ssl: { rejectUnauthorized: false },
          connectionTimeoutMillis: options.connectMillis,
          application_name: options.applicationName,
          ...(options.queryMillis !== undefined ? { query_timeout: options.queryMillis } : {})
        })
        client.on("error", () => {})
        try {
          await client.connect()
        } catch (error) {
          await client.end().catch(() => {})
          throw error
        }
        return client
      },
      catch: (error) => failure("engine", database, error)
    }),
    (client) => Effect.promise(() => client.end().catch(() => {}))
  ).pipe(Effect.map((client) => sessionOf(client, "engine", database)))

/**
 * The advisory lock, on the engine's `postgres` database, that the branch unit holds while it
 * pauses the subscription, copies the mirror and resumes (engine.proto documents the name). The
 * connector takes it around its own changes to the subscription, so neither re-enables the
 * subscription under the other's template copy.
 */
export const subscriptionLockKey = (mirrorDatabase: string) => `scion-branch-copy:${mirrorDatabase}`

/** Runs `effect` holding the engine's subscription lock (waiting for a branch copy to finish). */
export const withSubscriptionLock = <A, E, R>(engine: Engine, mirrorDatabase: string, effect: Effect.Effect<A, E, R>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const admin = yield* engineSession(engine, "postgres", { applicationName: "scion-connector", connectMillis: 10_000 })
      const key = subscriptionLockKey(mirrorDatabase)
      yield* Effect.acquireRelease(admin.query("select pg_advisory_lock(hashtext($1))", [key]), () =>
        admin.query("select pg_advisory_unlock(hashtext($1))", [key]).pipe(Effect.ignore)
      )
      return yield* effect
    })
  )

/** A libpq conninfo value: single-quoted, with quotes and backslashes escaped. */
const conninfoValue = (value: string | number) => `'${String(value).replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`

/** The source's conninfo for the engine's subscription (stored in the engine's catalog, superuser-only). */
export const subscriptionConninfo = (details: PostgresDetails, password: string) =>
  [
    `host=${conninfoValue(details.host)}`,
    `port=${conninfoValue(details.port)}`,
    `dbname=${conninfoValue(details.database)}`,
    `user=${conninfoValue(details.username)}`,
    `password=${conninfoValue(password)}`,
    `sslmode=${conninfoValue(details.sslmode)}`,
    // No application_name: the walsender then carries the subscription's name (scion_<id>), which
    // tells connectors apart on a shared source.
    "connect_timeout='10'"
  ].join(" ")
