import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Invite } from "./domain/models.js"
import { knownRole } from "./domain/roles.js"

interface InviteRow {
  readonly id: string
  readonly org_id: string
  readonly org_name: string
  readonly email: string
  readonly role_id: string
  readonly token: string
  readonly invited_by_user_id: string | null
  readonly created_at: Date
  readonly expires_at: Date
}

export interface StoredInvite extends Invite {
  readonly token: string
  readonly roleId: string
}

const toInvite = (row: InviteRow): StoredInvite => ({
  id: row.id,
  token: row.token,
  email: row.email,
  roleId: row.role_id,
  roleKey: knownRole(row.role_id).key,
  invitedByUserId: row.invited_by_user_id,
  orgId: row.org_id,
  orgName: row.org_name,
  createdAt: row.created_at,
  expiresAt: row.expires_at
})

/** Org invites. Pending means not accepted, not revoked and not expired. */
export class InvitesRepo extends Effect.Service<InvitesRepo>()("@scion/identity/InvitesRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const select = sql.literal(`
      select i.id, i.org_id, o.name as org_name, i.email, i.role_id, i.token, i.invited_by_user_id, i.created_at, i.expires_at
      from invites i join orgs o on o.id = i.org_id`)
    const pending = sql.literal("i.accepted_at is null and i.revoked_at is null and i.expires_at > now()")

    return {
      /** Issues an invite, replacing (revoking) any open invite for the same email in the org. */
      replace: (input: { id: string; orgId: string; email: string; roleId: string; token: string; invitedBy: string | null; ttlDays: number }) =>
        Effect.zipRight(
          sql`
            update invites set revoked_at = now()
            where org_id = ${input.orgId} and email = ${input.email} and accepted_at is null and revoked_at is null`,
          sql`
            insert into invites (id, org_id, email, role_id, token, invited_by_user_id, expires_at)
            values (${input.id}, ${input.orgId}, ${input.email}, ${input.roleId}, ${input.token}, ${input.invitedBy},
                    now() + make_interval(days => ${input.ttlDays}))`
        ).pipe(
          Effect.zipRight(sql<InviteRow>`${select} where i.id = ${input.id}`),
          Effect.flatMap((rows) => Effect.fromNullable(rows[0])),
          Effect.map(toInvite),
          Effect.orDie
        ),

      pendingInOrg: (orgId: string) =>
        sql<InviteRow>`${select} where i.org_id = ${orgId} and ${pending} order by i.created_at desc, i.id desc`.pipe(
          Effect.map((rows) => rows.map(toInvite)),
          Effect.orDie
        ),

      pendingForEmail: (email: string) =>
        sql<InviteRow>`${select} where i.email = ${email} and ${pending} order by i.created_at desc, i.id desc`.pipe(
          Effect.map((rows) => rows.map(toInvite)),
          Effect.orDie
        ),

      /** False when the invite is unknown in this org, already revoked or accepted. */
      revoke: (orgId: string, inviteId: string) =>
        sql`
          update invites set revoked_at = now()
          where id = ${inviteId} and org_id = ${orgId} and accepted_at is null and revoked_at is null
          returning id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),

      /** A pending invite by token, locked for the rest of the transaction. */
      lockPendingByToken: (token: string) =>
        sql<InviteRow>`${select} where i.token = ${token} and ${pending} for update of i`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toInvite)),
          Effect.orDie
        ),

      markAccepted: (inviteId: string, userId: string) =>
        sql`update invites set accepted_at = now(), accepted_by_user_id = ${userId} where id = ${inviteId}`.pipe(Effect.asVoid, Effect.orDie)
    } as const
  })
}) {}
