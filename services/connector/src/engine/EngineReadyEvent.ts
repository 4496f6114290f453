import type { SqlClient } from "@effect/sql"
import { ENGINE_READY } from "@scion/kit"
import { Effect } from "effect"
import type { EngineSetupPayload } from "./SetupPlan.js"

/**
 * ENGINE_READY (the kit's EngineReady) written to the unit's outbox in the caller's transaction,
 * on the repository's `sql`, with the state change it announces. `eventId` makes it once-only: a
 * retried commit of the same verdict announces nothing new.
 */
export const announceEngineReady = (sql: SqlClient.SqlClient, connectorId: string, eventId: string, mode: EngineSetupPayload["mode"] | "switch") =>
  sql`insert into outbox (subject, msg_id, payload)
      select ${ENGINE_READY}, ${`engine_ready.${eventId}`},
             jsonb_build_object('connector_id', id, 'org_id', org_id, 'mode', ${mode}::text, 'ready_at', now())
      from connectors where id = ${connectorId}
      on conflict (msg_id) do nothing`.pipe(Effect.asVoid)
