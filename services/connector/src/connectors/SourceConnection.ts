import type { ConnectionOptions } from "node:tls"
import pg from "pg"
import { Effect } from "effect"
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
 * One connection to a source database, acquired and released in the caller's scope, with connect
 * and statement timeouts. The password is used for the login only. Fails with the driver's error
 * as is (callers classify it and never echo the password).
 */
export const connectSource = (details: PostgresDetails, password: string, ssl: false | ConnectionOptions, options: SourceConnectionOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new pg.Client({
          host: details.host,
          port: details.port,
          database: details.database,
          user: details.username,
          password,
          ssl,
          connectionTimeoutMillis: options.connectMillis,
          query_timeout: options.queryMillis,
          statement_timeout: options.queryMillis,
          application_name: options.applicationName
        })
        // A socket error after connect must not become an uncaught exception.
        client.on("error", () => {})
        try {
          await client.connect()
          if (options.readOnly) await client.query("set session characteristics as transaction read only")
        } catch (error) {
          await client.end().catch(() => {})
          throw error
        }
        return client
      },
      catch: (error) => error
    }),
    (client) => Effect.promise(() => client.end().catch(() => {}))
  )
