import { SqlClient } from "@effect/sql"
import { answersByKey, keysArray, makeGroupedStatement } from "@scion/kit"
import { Effect, Option } from "effect"
import type { Member, OrgMembership } from "./domain/models.js"
import { knownRole, OWNER_ROLE_ID } from "./domain/roles.js"

export interface OrgRow {
  readonly id: string
  readonly name: string
  readonly created_at: Date
  readonly member_count: number
}

interface MemberRow {
  readonly user_id: string
  readonly email: string
  readonly full_name: string
  readonly role_id: string
  readonly joined_at: Date
}

const toMember = (row: MemberRow): Member => ({
  userId: row.user_id,
  email: row.email,
  fullName: row.full_name,
  roleKey: knownRole(row.role_id).key,
  joinedAt: row.joined_at
})

/** Orgs, memberships and members' role grants. */
export class OrgsRepo extends Effect.Service<OrgsRepo>()("@scion/identity/OrgsRepo", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const first = <A>(rows: ReadonlyArray<A>) => Option.fromNullable(rows[0])
    const memberSelect = sql.literal(`
      select m.user_id, u.email, u.full_name, g.role_id, m.joined_at
      from memberships m
      join users u on u.id = m.user_id
      join role_grants g on g.org_id = m.org_id and g.user_id = m.user_id`)

    // Every authenticated org read lands here: reads arriving together share one statement
    // (the gateway bench's profile had this statement's socket write at 28% of identity's CPU).
    const findGrouped = yield* makeGroupedStatement({
      name: "orgs.find",
      run: (orgIds: ReadonlyArray<string>) =>
        sql<OrgRow>`
          select o.id, o.name, o.created_at, (select count(*)::int from memberships m where m.org_id = o.id) as member_count
          from orgs o where o.id = any(${keysArray(sql, orgIds)})`.pipe(
          Effect.map((rows) => answersByKey(orgIds, rows, (row) => row.id)),
          Effect.orDie
        )
    })

    return {
      /** None when this user already created an org with the same request id. */
      insert: (input: { id: string; name: string; createdBy: string; requestId: string | null }) =>
        sql<{ readonly id: string }>`
          insert into orgs (id, name, created_by_user_id, request_id)
          values (${input.id}, ${input.name}, ${input.createdBy}, ${input.requestId})
          on conflict (created_by_user_id, request_id) where request_id is not null do nothing
          returning id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),

      findByRequest: (userId: string, requestId: string) =>
        sql<{ readonly id: string }>`select id from orgs where created_by_user_id = ${userId} and request_id = ${requestId}`.pipe(
          Effect.map((rows) => Option.map(first(rows), (row) => row.id)),
          Effect.orDie
        ),

      /** Grouped with the reads arriving at the same moment (inside a transaction: alone, on its connection). */
      find: findGrouped,

      /** Locks the org row: every change to who owns an org takes this lock first. */
      lock: (orgId: string) => sql`select id from orgs where id = ${orgId} for update`.pipe(Effect.asVoid, Effect.orDie),

      rename: (orgId: string, name: string) => sql`update orgs set name = ${name}, updated_at = now() where id = ${orgId}`.pipe(Effect.asVoid, Effect.orDie),

      /** Memberships, grants, API keys and invites go with it (foreign keys cascade). */
      delete: (orgId: string) =>
        sql<{ readonly name: string }>`delete from orgs where id = ${orgId} returning name`.pipe(
          Effect.map((rows) => Option.map(first(rows), (row) => row.name)),
          Effect.orDie
        ),

      addMember: (input: { orgId: string; userId: string; roleId: string; grantId: string; grantedBy: string | null }) =>
        sql`
          with m as (insert into memberships (org_id, user_id) values (${input.orgId}, ${input.userId}) returning org_id, user_id)
          insert into role_grants (id, org_id, user_id, role_id, granted_by_user_id)
          select ${input.grantId}, org_id, user_id, ${input.roleId}, ${input.grantedBy} from m`.pipe(Effect.asVoid, Effect.orDie),

      member: (orgId: string, userId: string) =>
        sql<MemberRow>`${memberSelect} where m.org_id = ${orgId} and m.user_id = ${userId}`.pipe(
          Effect.map((rows) => Option.map(first(rows), toMember)),
          Effect.orDie
        ),

      members: (orgId: string) =>
        sql<MemberRow>`${memberSelect} where m.org_id = ${orgId} order by m.joined_at, u.email`.pipe(
          Effect.map((rows) => rows.map(toMember)),
          Effect.orDie
        ),

      isMemberByEmail: (orgId: string, email: string) =>
        sql`select 1 from memberships m join users u on u.id = m.user_id where m.org_id = ${orgId} and u.email = ${email}`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),

      setRole: (input: { orgId: string; userId: string; roleId: string; grantedBy: string | null }) =>
        sql`
          update role_grants set role_id = ${input.roleId}, granted_by_user_id = ${input.grantedBy}
          where org_id = ${input.orgId} and user_id = ${input.userId}`.pipe(Effect.asVoid, Effect.orDie),

      /** Removes the membership; its role grant cascades. */
      removeMember: (orgId: string, userId: string) =>
        sql`delete from memberships where org_id = ${orgId} and user_id = ${userId}`.pipe(Effect.asVoid, Effect.orDie),

      ownerCount: (orgId: string) =>
        sql<{ readonly n: number }>`select count(*)::int as n from role_grants where org_id = ${orgId} and user_id is not null and role_id = ${OWNER_ROLE_ID}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Effect.orDie
        ),

      /** The user's orgs, first joined first. */
      membershipsOf: (userId: string) =>
        sql<{ readonly org_id: string; readonly name: string; readonly role_id: string; readonly joined_at: Date }>`
          select m.org_id, o.name, g.role_id, m.joined_at
          from memberships m
          join orgs o on o.id = m.org_id
          join role_grants g on g.org_id = m.org_id and g.user_id = m.user_id
          where m.user_id = ${userId}
          order by m.joined_at, m.org_id`.pipe(
          Effect.map((rows) =>
            rows.map((row): OrgMembership => ({ orgId: row.org_id, name: row.name, roleKey: knownRole(row.role_id).key, joinedAt: row.joined_at }))
          ),
          Effect.orDie
        ),

      membershipCount: (userId: string) =>
        sql<{ readonly n: number }>`select count(*)::int as n from memberships where user_id = ${userId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Effect.orDie
        ),

      /** Locks every org the user owns, then returns those where they are the only owner. */
      lockSoleOwned: (userId: string) =>
        Effect.zipRight(
          sql`
            select o.id from orgs o join role_grants g on g.org_id = o.id
            where g.user_id = ${userId} and g.role_id = ${OWNER_ROLE_ID}
            order by o.id for update of o`,
          sql<{ readonly id: string; readonly name: string }>`
            select o.id, o.name from orgs o join role_grants g on g.org_id = o.id
            where g.user_id = ${userId} and g.role_id = ${OWNER_ROLE_ID}
              and not exists (
                select 1 from role_grants other
                where other.org_id = o.id and other.role_id = ${OWNER_ROLE_ID} and other.user_id is not null and other.user_id <> ${userId}
              )
            order by o.created_at, o.id`
        ).pipe(
          Effect.map((rows) => rows.map((row) => ({ orgId: row.id, name: row.name }))),
          Effect.orDie
        )
    } as const
  })
}) {}
