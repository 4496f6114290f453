import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Accounts, Auth, Invites, Orgs, ROLES } from "../src/index.js"
import { addMember, createKey, createOrg, identityTestLayer, outboxRows, signUp } from "./support.js"

describe("me", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("reads and updates the profile; lists orgs by join date; bootstraps an org", () =>
      Effect.gen(function* () {
        const accounts = yield* Accounts
        const me = yield* signUp("me")
        const fresh = yield* accounts.getMe(me.principal)
        expect(fresh).toMatchObject({ user: { id: me.userId, email: me.email }, hasOrgs: false, defaultOrgId: null })

        const updated = yield* accounts.updateMe(me.principal, { fullName: "  New Name " })
        expect(updated.fullName).toBe("New Name")
        expect(updated.updatedAt.getTime()).toBeGreaterThanOrEqual(updated.createdAt.getTime())
        expect(yield* Effect.flip(accounts.updateMe(me.principal, { fullName: "" }))).toMatchObject({ _tag: "InvalidArgument", field: "full_name" })
        expect(yield* Effect.flip(accounts.updateMe(me.principal, { fullName: "x".repeat(101) }))).toMatchObject({ _tag: "InvalidArgument" })

        const a = yield* createOrg(me.principal, "A")
        const other = yield* signUp("other")
        const b = yield* createOrg(other.principal, "B")
        const invite = yield* (yield* Invites).createInvite(other.principal, { orgId: b.orgId, email: me.email, roleKey: "viewer" })
        yield* (yield* Invites).acceptInvite(me.principal, invite.token ?? "")

        const after = yield* accounts.getMe(me.principal)
        expect(after).toMatchObject({ hasOrgs: true, defaultOrgId: a.orgId })
        const mine = yield* accounts.listMyOrgs(me.principal)
        expect(mine.map((o) => [o.orgId, o.name, o.roleKey])).toEqual([
          [a.orgId, "A", "owner"],
          [b.orgId, "B", "viewer"]
        ])

        const boot = yield* accounts.bootstrap(me.principal, b.orgId)
        expect(boot.user.id).toBe(me.userId)
        expect(boot.orgs).toHaveLength(2)
        expect(boot.activeOrg).toMatchObject({ orgId: b.orgId, myRole: "viewer", memberCount: 2 })
        const stranger = yield* signUp("stranger")
        expect(yield* Effect.flip(accounts.bootstrap(stranger.principal, b.orgId))).toMatchObject({ _tag: "NotAMember" })
      })
    )

    it.effect("refuses to delete a sole owner, naming the orgs", () =>
      Effect.gen(function* () {
        const accounts = yield* Accounts
        const me = yield* signUp("sole")
        const acme = yield* createOrg(me.principal, "Acme")
        const beta = yield* createOrg(me.principal, "Beta")
        const error = yield* Effect.flip(accounts.deleteMe(me.principal))
        expect(error._tag).toBe("SoleOwner")
        expect(error.message).toBe(
          `You are the sole owner of: Acme (${acme.orgId}), Beta (${beta.orgId}); transfer ownership or delete those orgs first`
        )
        // A second owner lifts the block for that org only.
        yield* addMember(me.principal, acme.orgId, "owner", "co")
        const again = yield* Effect.flip(accounts.deleteMe(me.principal))
        expect(again).toMatchObject({ _tag: "SoleOwner", orgs: [{ orgId: beta.orgId, name: "Beta" }] })
      })
    )

    it.effect("deletes the account: own rows go, references the user made become null", () =>
      Effect.gen(function* () {
        const accounts = yield* Accounts
        const auth = yield* Auth
        const orgs = yield* Orgs
        const invites = yield* Invites
        const sql = yield* SqlClient.SqlClient
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const leaver = yield* addMember(owner.principal, org.orgId, "admin", "leaver")
        const target = yield* addMember(owner.principal, org.orgId, "viewer", "target")
        // Things the leaver creates: an invite, an API key, and a role grant for someone else.
        const invite = yield* invites.createInvite(leaver.principal, { orgId: org.orgId, email: "later@example.com", roleKey: "member" })
        const key = yield* createKey(leaver.principal, org.orgId, ROLES.member.id)
        yield* orgs.updateMemberRole(leaver.principal, { orgId: org.orgId, userId: target.userId, roleKey: "member" })

        yield* accounts.deleteMe(leaver.principal)

        expect(yield* Effect.flip(auth.authenticate(leaver.sessionToken))).toMatchObject({ _tag: "Unauthenticated" })
        expect(yield* Effect.flip(auth.logIn({ email: leaver.email, password: "correct-horse-battery" }))).toMatchObject({ _tag: "InvalidCredentials" })
        const count = (q: Effect.Effect<ReadonlyArray<{ n: number }>, unknown>) => Effect.map(Effect.orDie(q), (rows) => rows[0]?.n)
        expect(yield* count(sql`select count(*)::int as n from users where id = ${leaver.userId}`)).toBe(0)
        expect(yield* count(sql`select count(*)::int as n from memberships where user_id = ${leaver.userId}`)).toBe(0)
        expect(yield* count(sql`select count(*)::int as n from role_grants where user_id = ${leaver.userId}`)).toBe(0)
        expect(yield* count(sql`select count(*)::int as n from sessions where user_id = ${leaver.userId}`)).toBe(0)

        const [inviteRow] = yield* sql<{ invited_by_user_id: string | null }>`select invited_by_user_id from invites where id = ${invite.id}`
        expect(inviteRow).toEqual({ invited_by_user_id: null })
        const [keyRow] = yield* sql<{ created_by: string | null }>`select created_by from api_keys where id = ${key.apiKey.id}`
        expect(keyRow).toEqual({ created_by: null })
        const [grantRow] = yield* sql<{ granted_by_user_id: string | null; role_id: string }>`
          select granted_by_user_id, role_id from role_grants where org_id = ${org.orgId} and user_id = ${target.userId}`
        expect(grantRow).toEqual({ granted_by_user_id: null, role_id: ROLES.member.id })
        const [keyGrant] = yield* sql<{ granted_by_user_id: string | null }>`select granted_by_user_id from role_grants where api_key_id = ${key.apiKey.id}`
        expect(keyGrant).toEqual({ granted_by_user_id: null })

        // The org's key keeps working, now with no creating user.
        const still = yield* auth.authenticate(key.secret)
        expect(still.principal).toMatchObject({ kind: "api_key", userId: null, orgId: org.orgId })
        const listed = yield* invites.listInvites(owner.principal, org.orgId)
        expect(listed.find((i) => i.id === invite.id)?.invitedByUserId).toBeNull()

        const events = (yield* outboxRows("events.user.deleted")).filter((r) => r.payload.user_id === leaver.userId)
        expect(events).toHaveLength(1)
        expect(events[0]?.msg_id).toBe(`user.deleted.${leaver.userId}`)
        expect((yield* orgs.getOrg(owner.principal, org.orgId)).memberCount).toBe(2)
      })
    )
  })
})
