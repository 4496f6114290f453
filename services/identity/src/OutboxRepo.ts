import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Events announced by identity, written in the transaction of the change they describe. */
export type IdentityEvent =
  | { readonly subject: "events.org.created"; readonly payload: { org_id: string; name: string; owner_user_id: string; created_at: string } }
  | { readonly subject: "events.org.deleted"; readonly payload: { org_id: string; name: string; deleted_by_user_id: string | null; deleted_at: string } }
  | { readonly subject: "events.user.deleted"; readonly payload: { user_id: string; deleted_at: string } }
  | {
      /** Something that can take access away changed: every unit's caches drop what it touches (kit AccessChange). */
      readonly subject: "events.access.changed"
      readonly payload: { session_id?: string | undefined; api_key_id?: string | undefined; user_id?: string | undefined; org_id?: string | undefined }
    }
  | {
      readonly subject: "events.project.deleted"
      readonly payload: { project_id: string; org_id: string; name: string; deleted_by_user_id: string | null; deleted_at: string }
    }

export class OutboxRepo extends Effect.Service<OutboxRepo>()("@scion/identity/OutboxRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      /** msg_id makes a re-publication collapse downstream (Nats-Msg-Id). */
      write: (msgId: string, event: IdentityEvent) =>
        sql`insert into outbox (subject, msg_id, payload) values (${event.subject}, ${msgId}, ${JSON.stringify(event.payload)}::jsonb)`.pipe(
          Effect.asVoid,
          Effect.orDie
        )
    } as const
  })
}) {}
