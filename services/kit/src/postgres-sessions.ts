import { createHash } from "node:crypto"
import type { ConnectionOptions } from "node:tls"
import pg from "pg"
import { Context, Effect, Layer, Option, Redacted, Schema, type Scope } from "effect"

/**
 * Sessions on Postgres databases that are not ours to own (a team's source, a branching engine),
 * for the connector and branch units: one connection in the caller's scope, or a connection
 * borrowed from this process's pool for the endpoint, returned (or discarded after a failed
 * statement) when the scope closes. Each unit turns `PostgresFailure` into its own error.
 */

/** TLS for sslmode=require and prefer: encrypted, the chain not verified (libpq's meaning). */
export const tlsWithoutVerification: ConnectionOptions = { rejectUnauthorized: false }

/** How node-postgres should do TLS for a libpq sslmode. `prefer` starts with TLS. */
export const tlsForSslmode = (sslmode: "disable" | "prefer" | "require" | "verify-ca" | "verify-full"): false | ConnectionOptions => {
  switch (sslmode) {
    case "disable":
      return false
    case "prefer":
    case "require":
      return tlsWithoutVerification
    case "verify-ca":
      // The chain is verified, the host name is not (libpq's verify-ca).
      return { rejectUnauthorized: true, checkServerIdentity: () => undefined }
    case "verify-full":
      return { rejectUnauthorized: true }
  }
}

/** A database to open sessions on, and as whom. */
export interface PostgresEndpoint {
  readonly host: string
  readonly port: number
  readonly database: string
  readonly user: string
  readonly password: Redacted.Redacted<string>
  readonly ssl: false | ConnectionOptions
}

export interface PostgresSessionOptions {
  readonly applicationName: string
  readonly connectMillis: number
  /** The client's bound on each query. */
  readonly queryMillis?: number
  /** Sets the server's statement_timeout too. */
  readonly statementMillis?: number
  /** Every transaction of the session read-only. */
  readonly readOnly?: boolean
}

/**
 * The driver's error, as it came: `sqlstate` when the server sent one. `message` is the driver's
 * and may name the endpoint (never its password); units redact it further as they need.
 */
export class PostgresFailure extends Schema.TaggedError<PostgresFailure>()("PostgresFailure", { cause: Schema.Defect }) {
  override get message(): string {
    const cause = this.cause as { readonly message?: unknown } | undefined
    return typeof cause?.message === "string" ? cause.message : String(this.cause)
  }
  get sqlstate(): string | undefined {
    const code = (this.cause as { readonly code?: unknown } | undefined)?.code
    return typeof code === "string" && /^[A-Z0-9]{5}$/.test(code) ? code : undefined
  }
}

/** One open session: each statement answers its rows or a PostgresFailure. */
export interface PostgresSession {
  readonly query: <R extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<R>, PostgresFailure>
}

const clientConfig = (endpoint: PostgresEndpoint, options: PostgresSessionOptions): pg.ClientConfig => ({
  host: endpoint.host,
  port: endpoint.port,
  database: endpoint.database,
  user: endpoint.user,
  password: Redacted.value(endpoint.password),
  ssl: endpoint.ssl,
  connectionTimeoutMillis: options.connectMillis,
  application_name: options.applicationName,
  ...(options.queryMillis !== undefined ? { query_timeout: options.queryMillis } : {}),
  ...(options.statementMillis !== undefined ? { statement_timeout: options.statementMillis } : {})
})

const sessionOn = (client: pg.ClientBase, onFailure: () => void = () => undefined): PostgresSession => ({
  query: <R extends Record<string, unknown>>(text: string, values: ReadonlyArray<unknown> = []) =>
    Effect.tryPromise({
      try: () => client.query<R>(text, [...values]).then((result) => result.rows),
      catch: (cause) => {
        onFailure()
        return new PostgresFailure({ cause })
      }
    })
})

/** One connection of its own, closed with the caller's scope. */
export const connectPostgres = (endpoint: PostgresEndpoint, options: PostgresSessionOptions): Effect.Effect<PostgresSession, PostgresFailure, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new pg.Client(clientConfig(endpoint, options))
        // A socket error after connect surfaces on the next statement; it must not crash the process.
        client.on("error", () => undefined)
        try {
          await client.connect()
          if (options.readOnly === true) await client.query("set session characteristics as transaction read only")
        } catch (error) {
          await client.end().catch(() => undefined)
          throw error
        }
        return client
      },
      catch: (cause) => new PostgresFailure({ cause })
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  ).pipe(Effect.map((client) => sessionOn(client)))

/**
 * This process's pools, one per endpoint and role (idle sessions close after 30 s): a TLS + SCRAM
 * login costs more than the few statements a branch create runs. The pools end with the layer.
 */
export class PostgresPools extends Context.Tag("@scion/kit/PostgresPools")<
  PostgresPools,
  { readonly poolFor: (endpoint: PostgresEndpoint, options: PostgresSessionOptions & { readonly max: number }) => pg.Pool }
>() {
  static readonly layer: Layer.Layer<PostgresPools> = Layer.scoped(
    PostgresPools,
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => new Map<string, pg.Pool>()),
        (pools) => Effect.promise(() => Promise.all(Array.from(pools.values(), (pool) => pool.end().catch(() => undefined))))
      ),
      (pools) =>
        PostgresPools.of({
          poolFor: (endpoint, options) => {
            // The password is part of the key (a rotated one makes a new pool), hashed so the key can be logged.
            const key = `${endpoint.host}:${endpoint.port}/${endpoint.database}:${endpoint.user}:${createHash("sha256").update(Redacted.value(endpoint.password)).digest("hex")}`
            const existing = pools.get(key)
            if (existing !== undefined) return existing
            const pool = new pg.Pool({ ...clientConfig(endpoint, options), idleTimeoutMillis: 30_000, max: options.max, allowExitOnIdle: true })
            pool.on("error", () => undefined)
            pools.set(key, pool)
            return pool
          }
        })
    )
  )
}

/**
 * A session borrowed from the endpoint's pool for the caller's scope. A session whose statement
 * failed is discarded rather than returned; session state (advisory locks, settings) must be undone
 * by the borrower before its scope closes.
 */
export const pooledSession = (
  endpoint: PostgresEndpoint,
  options: PostgresSessionOptions & { readonly max: number }
): Effect.Effect<PostgresSession, PostgresFailure, Scope.Scope | PostgresPools> =>
  Effect.flatMap(PostgresPools, (pools) => {
    const pool = pools.poolFor(endpoint, options)
    let broken = false
    return Effect.acquireRelease(
      Effect.tryPromise({ try: () => pool.connect(), catch: (cause) => new PostgresFailure({ cause }) }),
      (client) => Effect.sync(() => client.release(broken))
    ).pipe(Effect.map((client) => sessionOn(client, () => (broken = true))))
  })

/**
 * Opens sessions in the endpoint's pool until it holds `sessions` (idle or in use), all at once, and
 * leaves them idle in it: a caller that knows it will need them soon (a branch create, accepted
 * tens of milliseconds before its job copies) pays the TLS + SCRAM logins while it waits for
 * something else. A pool that holds enough already is left alone. A login that fails is dropped
 * (the session's own borrower will see the failure and report it).
 */
export const warmPool = (
  endpoint: PostgresEndpoint,
  options: PostgresSessionOptions & { readonly max: number },
  sessions: number
): Effect.Effect<void, never, PostgresPools> =>
  Effect.flatMap(PostgresPools, (pools) => {
    const pool = pools.poolFor(endpoint, options)
    const missing = Math.min(sessions, options.max) - pool.totalCount
    if (missing <= 0) return Effect.void
    // A borrow takes an idle session before it opens one, and all are borrowed before any goes
    // back (a session returned at once would serve the next borrow): the idle ones, and the missing.
    return Effect.forEach(
      Array.from({ length: pool.idleCount + missing }),
      () => Effect.option(Effect.tryPromise(() => pool.connect())),
      { concurrency: "unbounded" }
    ).pipe(
      Effect.flatMap((clients) =>
        Effect.sync(() => {
          for (const client of clients) if (Option.isSome(client)) client.value.release()
        })
      )
    )
  })

/**
 * The session advisory lock on an engine's `postgres` database that serializes changes to a mirror's
 * subscriptions with the branch unit's template copies (engine.proto, `copy_lock_key`: the connector
 * sends it, the branch unit takes what it was sent).
 */
export const engineCopyLockKey = (mirrorDatabase: string) => `scion-branch-copy:${mirrorDatabase}`

/** Runs `effect` holding the session advisory lock `key` on `session`, released when it ends. */
export const withAdvisoryLock = <A, E, R, E2>(
  session: { readonly query: (text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<unknown, E2> },
  key: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | E2, R> =>
  Effect.acquireUseRelease(
    session.query("select pg_advisory_lock(hashtext($1))", [key]),
    () => effect,
    () => session.query("select pg_advisory_unlock(hashtext($1))", [key]).pipe(Effect.ignore)
  )

/**
 * Runs `effect` holding the session advisory lock `key` on `session` if nobody holds it now, released
 * when it ends; None, without running it, when the lock is taken.
 */
export const tryWithAdvisoryLock = <A, E, R, E2>(
  session: { readonly query: <T extends Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<T>, E2> },
  key: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<Option.Option<A>, E | E2, R> =>
  Effect.flatMap(session.query<{ locked: boolean }>("select pg_try_advisory_lock(hashtext($1)) as locked", [key]), ([row]) =>
    row?.locked === true
      ? effect.pipe(
          Effect.map(Option.some),
          Effect.ensuring(session.query("select pg_advisory_unlock(hashtext($1))", [key]).pipe(Effect.ignore))
        )
      : Effect.succeed(Option.none<A>())
  )
