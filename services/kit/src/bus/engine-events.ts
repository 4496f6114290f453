import { Schema } from "effect"

/**
 * `events.connector.engine_ready`: a connector's engine mirrors what it should, in a mirror that is
 * new or newly filled (a setup, rollout or reset passed validation, or a cutover or rollback
 * switched the active pipeline). The connector unit writes it to its outbox with the change; the
 * branch unit cuts a spare copy of the mirror on it, so the first create after it is as quick as
 * the rest. One contract for both sides.
 */
export const ENGINE_READY = "events.connector.engine_ready"

export const EngineReady = Schema.Struct({
  connector_id: Schema.NonEmptyString,
  org_id: Schema.NonEmptyString,
  /** What made it ready: `setup`, `rollout`, `reset` or `switch`. */
  mode: Schema.String,
  ready_at: Schema.String
})
export type EngineReady = typeof EngineReady.Type
