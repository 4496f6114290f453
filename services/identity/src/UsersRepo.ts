import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { User } from "./domain/models.js"

interface UserRow {
  readonly id: string
  readonly email: string
  readonly full_name: string
  readonly email_verified_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toUser = (row: UserRow): User => ({
  id: row.id,
  email: row.email,
  fullName: row.full_name,
  emailVerified: row.email_verified_at !== null,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

const userColumns = "id, email, full_name, email_verified_at, created_at, updated_at"

/** Users, their sessions and their email verifications. */
export class UsersRepo extends Effect.Service<UsersRepo>()("@scion/identity/UsersRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const cols = sql.literal(userColumns)
    const one = <A, B>(rows: ReadonlyArray<A>, f: (a: A) => B) => Option.map(Option.fromNullable(rows[0]), f)

    return {
      /** None when the email is taken. */
      insert: (input: { id: string; email: string; fullName: string; passwordHash: string; verified: boolean }) =>
        sql<UserRow>`
          insert into users (id, email, full_name, password_hash, email_verified_at)
          values (${input.id}, ${input.email}, ${input.fullName}, ${input.passwordHash}, ${input.verified ? sql.literal("now()") : null})
          on conflict (email) do nothing
          returning ${cols}`.pipe(Effect.map((rows) => one(rows, toUser)), Effect.orDie),

      findById: (id: string) => sql<UserRow>`select ${cols} from users where id = ${id}`.pipe(Effect.map((rows) => one(rows, toUser)), Effect.orDie),

      /** Locks the user row for the rest of the transaction. */
      lock: (id: string) => sql`select id from users where id = ${id} for update`.pipe(Effect.asVoid, Effect.orDie),

      findCredentials: (email: string) =>
        sql<UserRow & { readonly password_hash: string }>`select ${cols}, password_hash from users where email = ${email}`.pipe(
          Effect.map((rows) => one(rows, (row) => ({ user: toUser(row), passwordHash: row.password_hash }))),
          Effect.orDie
        ),

      updateFullName: (id: string, fullName: string) =>
        sql<UserRow>`update users set full_name = ${fullName}, updated_at = now() where id = ${id} returning ${cols}`.pipe(
          Effect.map((rows) => one(rows, toUser)),
          Effect.orDie
        ),

      /** Deletes the user; memberships, grants, sessions cascade; references elsewhere become null. */
      delete: (id: string) => sql`delete from users where id = ${id}`.pipe(Effect.asVoid, Effect.orDie),

      createVerification: (input: { id: string; userId: string; email: string; tokenDigest: string; ttlHours: number }) =>
        sql`
          insert into email_verifications (id, user_id, email, token_digest, expires_at)
          values (${input.id}, ${input.userId}, ${input.email}, ${input.tokenDigest}, now() + make_interval(hours => ${input.ttlHours}))`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),

      /** Uses a pending verification and marks its email verified; None when unknown, used or expired. */
      consumeVerification: (tokenDigest: string) =>
        sql<UserRow>`
          with used as (
            update email_verifications set used_at = now()
            where token_digest = ${tokenDigest} and used_at is null and expires_at > now()
            returning user_id, email
          )
          update users u set email_verified_at = coalesce(u.email_verified_at, now()), updated_at = now()
          from used where u.id = used.user_id and u.email = used.email
          returning u.id, u.email, u.full_name, u.email_verified_at, u.created_at, u.updated_at`.pipe(
          Effect.map((rows) => one(rows, toUser)),
          Effect.orDie
        )
    } as const
  })
}) {}
