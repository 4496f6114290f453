import { SqlClient, SqlError } from "@effect/sql"
import { Effect } from "effect"

/**
 * Runs an effect in one transaction. Domain failures roll it back and pass through; an SQL failure
 * is infrastructure and becomes a defect, as at every repository edge.
 */
export class Database extends Effect.Service<Database>()("@scion/identity/Database", {
  effect: Effect.map(SqlClient.SqlClient, (sql) => ({
    transaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, SqlError.SqlError>, R> =>
      sql.withTransaction(effect).pipe(Effect.catchIf((e): e is SqlError.SqlError => e instanceof SqlError.SqlError, Effect.die)) as never
  }))
}) {}
