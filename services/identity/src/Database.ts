import { SqlClient } from "@effect/sql"
import { transactional } from "@scion/kit"
import { Effect } from "effect"

/**
 * Runs an effect in one transaction. Domain failures roll it back and pass through; an SQL failure
 * is infrastructure and becomes a defect, as at every repository edge.
 */
export class Database extends Effect.Service<Database>()("@scion/identity/Database", {
  effect: Effect.map(SqlClient.SqlClient, (sql) => ({ transaction: transactional(sql) }))
}) {}
