import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"

/** Dashboard sessions, stored by token digest. */
export class SessionsRepo extends Effect.Service<SessionsRepo>()("@scion/identity/SessionsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      create: (input: { id: string; userId: string; tokenDigest: string; ttlDays: number }) =>
        sql<{ readonly expires_at: Date }>`
          insert into sessions (id, user_id, token_digest, expires_at)
          values (${input.id}, ${input.userId}, ${input.tokenDigest}, now() + make_interval(days => ${input.ttlDays}))
          returning expires_at`.pipe(
          Effect.flatMap((rows) => Effect.fromNullable(rows[0]?.expires_at)),
          Effect.orDie
        ),

      /** The hot path for session tokens: one lookup on the unique digest index. */
      findLiveByDigest: (tokenDigest: string) =>
        sql<{ readonly id: string; readonly user_id: string }>`
          select id, user_id from sessions where token_digest = ${tokenDigest} and expires_at > now()`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({ sessionId: row.id, userId: row.user_id }))),
          Effect.orDie
        ),

      /** The user of a session that has not ended or expired. */
      liveUser: (sessionId: string) =>
        sql<{ readonly user_id: string }>`select user_id from sessions where id = ${sessionId} and expires_at > now()`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.user_id)),
          Effect.orDie
        ),

      /** For a live session: the user, and their role id in the org (null when not a member). */
      liveUserInOrg: (sessionId: string, orgId: string) =>
        sql<{ readonly user_id: string; readonly role_id: string | null }>`
          select s.user_id, g.role_id
          from sessions s
          left join role_grants g on g.user_id = s.user_id and g.org_id = ${orgId}
          where s.id = ${sessionId} and s.expires_at > now()`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({ userId: row.user_id, roleId: row.role_id }))),
          Effect.orDie
        ),

      delete: (sessionId: string) => sql`delete from sessions where id = ${sessionId}`.pipe(Effect.asVoid, Effect.orDie)
    } as const
  })
}) {}
