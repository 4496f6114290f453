import { Effect } from "effect"
import pg from "pg"

/** A connection of the test's own on a database (not through the unit), closed with the scope. */
export const pgClientSession = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end())
  )
