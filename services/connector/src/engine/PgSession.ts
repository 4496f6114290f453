import { connectPostgres, engineCopyLockKey, type PostgresFailure, type PostgresSession, tlsWithoutVerification, tryWithAdvisoryLock, withAdvisoryLock } from "@scion/kit"
import { Effect, Schema, type Scope } from "effect"
import type { PostgresDetails } from "../connectors/ConnectionDetails.js"
import { openSourceSession, sourceReason } from "../connectors/SourceConnection.js"
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

const stepFailure = (target: "source" | "engine", database: string) => (failure: PostgresFailure) =>
  new PgStepFailed({ target, database, reason: sourceReason(failure), ...(failure.sqlstate !== undefined ? { sqlstate: failure.sqlstate } : {}) })

const sessionOf = (session: PostgresSession, target: "source" | "engine", database: string): PgSession => ({
  database,
  query: <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) => session.query<R>(text, values).pipe(Effect.mapError(stepFailure(target, database)))
})

/** A session on a source database with the connector's credentials, in the caller's scope. */
export const sourceSession = (
  details: PostgresDetails,
  password: string,
  options: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number }
): Effect.Effect<PgSession, PgStepFailed, Scope.Scope> =>
  openSourceSession(details, password, options).pipe(
    Effect.mapError(stepFailure("source", details.database)),
    Effect.map((session) => sessionOf(session, "source", details.database))
  )

export interface EngineSessionOptions {
  readonly applicationName: string
  readonly connectMillis: number
  readonly queryMillis?: number
}

/**
 * A session on an engine database as its superuser, over TLS (the engine refuses anything else;
 * its certificate is the operator's CA's, but the chain is not verified here, like sslmode=require).
 */
export const engineSession = (
  engine: Engine,
  database: string,
  options: EngineSessionOptions
): Effect.Effect<PgSession, PgStepFailed, Scope.Scope> =>
  connectPostgres(
    { host: engine.host, port: engine.port, database, user: engine.superuser.username, password: engine.superuser.password, ssl: tlsWithoutVerification },
    options
  ).pipe(
    Effect.mapError(stepFailure("engine", database)),
    Effect.map((session) => sessionOf(session, "engine", database))
  )

/**
 * `use` on a session of its own on an engine database, closed as soon as `use` ends. On the
 * mirror that matters: a branch batch copies it only once no session is connected to it, so a
 * session there lives no longer than the work it does.
 */
export const onEngineDatabase = <A, E, R>(
  engine: Engine,
  database: string,
  options: EngineSessionOptions,
  use: (session: PgSession) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | PgStepFailed, Exclude<R, Scope.Scope>> => Effect.scoped(Effect.flatMap(engineSession(engine, database, options), use))

/** The session that holds the subscription lock (on the engine's `postgres` database, never the mirror). */
const lockSession: EngineSessionOptions = { applicationName: "scion-connector", connectMillis: 10_000 }

/**
 * Runs `effect` holding the engine's subscription lock (engine.proto, `copy_lock_key`), waiting for
 * a branch's template copy to finish: neither side re-enables the subscription under the other.
 */
export const withSubscriptionLock = <A, E, R>(engine: Engine, mirrorDatabase: string, effect: Effect.Effect<A, E, R>) =>
  onEngineDatabase(engine, "postgres", lockSession, (admin) => withAdvisoryLock(admin, engineCopyLockKey(mirrorDatabase), effect))

/**
 * `use` on a session of the mirror opened once the engine's subscription lock is held, both
 * closed when it ends: every change to the mirror's schema or subscription goes through here.
 * The lock comes first because a branch batch holding it waits for the mirror to be free of
 * sessions: a session on the mirror waiting for the lock would hold both up.
 */
export const onMirrorUnderLock = <A, E, R>(
  engine: Engine,
  mirrorDatabase: string,
  options: EngineSessionOptions,
  use: (mirror: PgSession) => Effect.Effect<A, E, R>
) => withSubscriptionLock(engine, mirrorDatabase, onEngineDatabase(engine, mirrorDatabase, options, use))

/**
 * Runs `effect` holding the engine's subscription lock if nobody holds it now (None otherwise):
 * for a change to the mirror made by a caller that holds a session on the mirror, which a branch
 * batch holding the lock waits to see gone before it copies (waiting for the lock there would
 * hold both up until the batch gave up). A branch batch reads the mirror's schema while paused
 * and relies on it not changing until its copies are made.
 */
export const tryWithSubscriptionLock = <A, E, R>(engine: Engine, mirrorDatabase: string, effect: Effect.Effect<A, E, R>) =>
  onEngineDatabase(engine, "postgres", lockSession, (admin) => tryWithAdvisoryLock(admin, engineCopyLockKey(mirrorDatabase), effect))

/**
 * Runs a statement that carries the source's password (CREATE / ALTER SUBSCRIPTION … CONNECTION)
 * with the engine's statement logging off for it: by default Postgres writes a failing
 * statement, literal and all, to its server log (`log_min_error_statement = error`), and a
 * source that refuses the engine's connection makes these statements fail.
 */
export const withoutStatementLog = <A, E, R>(session: PgSession, statement: Effect.Effect<A, E, R>) =>
  Effect.zipRight(
    session.query("set log_min_error_statement = panic; set log_statement = none"),
    statement.pipe(Effect.ensuring(Effect.ignore(session.query("reset log_min_error_statement; reset log_statement"))))
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
