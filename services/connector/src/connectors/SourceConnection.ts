import { connectPostgres, type PostgresFailure, type PostgresSession, tlsForSslmode } from "@scion/kit"
import { Effect, Redacted, type Scope } from "effect"
import type { PostgresDetails } from "./ConnectionDetails.js"

export interface SourceConnectionOptions {
  readonly applicationName: string
  readonly connectMillis: number
  /** Also the statement timeout on the server. */
  readonly queryMillis: number
  /** Every transaction of the session read-only (discovery never writes to a source). */
  readonly readOnly?: boolean
}

/**
 * A session on a team's source database with the connector's credentials, in the caller's scope,
 * with connect and statement timeouts. Like libpq, sslmode=prefer falls back to a plain connection
 * when the server has no TLS. The password is used for the login only; say what failed with
 * `sourceReason`, which never echoes it.
 */
export const openSourceSession = (details: PostgresDetails, password: string, options: SourceConnectionOptions): Effect.Effect<PostgresSession, PostgresFailure, Scope.Scope> => {
  const connect = (ssl: ReturnType<typeof tlsForSslmode>) =>
    connectPostgres(
      { host: details.host, port: details.port, database: details.database, user: details.username, password: Redacted.make(password), ssl },
      { applicationName: options.applicationName, connectMillis: options.connectMillis, queryMillis: options.queryMillis, statementMillis: options.queryMillis, readOnly: options.readOnly ?? false }
    )
  return connect(tlsForSslmode(details.sslmode)).pipe(
    Effect.catchTag("PostgresFailure", (failure) => (details.sslmode === "prefer" && /does not support SSL/i.test(failure.message) ? connect(false) : Effect.fail(failure)))
  )
}

/** A driver error as a reason safe to show: connection strings removed, the SQLSTATE appended. */
export const sourceReason = (failure: PostgresFailure): string => {
  const message = failure.message.replace(/postgres(ql)?:\/\/[^\s]+/g, "<connection string>")
  return failure.sqlstate !== undefined ? `${message} (SQLSTATE ${failure.sqlstate})` : message
}
