import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Accounts, Auth, type IdentityError, Invites, Orgs, ROLES } from "../src/index.js"
import { scansDuring } from "@scion/kit/testing"
import { addMember, createKey, createOrg, identityTestLayer, outboxRows, signUp } from "./support.js"

describe("orgs", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("creates an org with the caller as owner and an events.org.created outbox row", () =>
      Effect.gen(function* () {
        const { principal, userId } = yield* signUp("founder")
        const org = yield* createOrg(principal, "  Acme Corp  ")
        expect(org).toMatchObject({ name: "Acme Corp", myRole: "owner", memberCount: 1 })
        expect(org.orgId).toMatch(/^org_/)
        expect(org.myPermissions).toEqual(ROLES.owner.permissions)
        const rows = (yield* outboxRows("events.org.created")).filter((r) => r.payload.org_id === org.orgId)
        expect(rows).toHaveLength(1)
        expect(rows[0]?.msg_id).toBe(`org.created.${org.orgId}`)
        expect(rows[0]?.payload).toEqual({ org_id: org.orgId, name: "Acme Corp", owner_user_id: userId, created_at: expect.stringMatching(/Z$/) })
      })
    )

    it.effect("validates org names", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const { principal } = yield* signUp("names")
        for (const name of ["", "   ", "x".repeat(101)]) {
          expect(yield* Effect.flip(orgs.createOrg(principal, { name }))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
        }
        const org = yield* orgs.createOrg(principal, { name: "x".repeat(100) })
        expect(yield* Effect.flip(orgs.updateOrg(principal, { orgId: org.orgId, name: " " }))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
      })
    )

    it.effect("many org reads at once each answer their own org, and a deleted org is gone for its reader only", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const { principal } = yield* signUp("many-reads")
        const created = yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => `Org ${i}`), (name) => createOrg(principal, name))
        yield* addMember(principal, created[3]!.orgId, "member")
        yield* orgs.deleteOrg(principal, created[7]!.orgId)
        const reads = yield* Effect.forEach([...created, ...created], (org) => Effect.either(orgs.getOrg(principal, org.orgId)), { concurrency: "unbounded" })
        reads.forEach((read, i) => {
          const org = created[i % created.length]!
          if (org.orgId === created[7]!.orgId) return expect(read._tag).toBe("Left")
          expect(read._tag === "Right" && read.right).toMatchObject({ orgId: org.orgId, name: org.name, memberCount: org.orgId === created[3]!.orgId ? 2 : 1 })
        })
      })
    )

    it.effect("an org read finds the org by its key, not by reading every org", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const sql = yield* SqlClient.SqlClient
        const { principal } = yield* signUp("keyed-read")
        const org = yield* createOrg(principal, "Keyed")
        // Enough orgs that a read of the whole table is the planner's choice only by mistake.
        yield* sql`insert into orgs (id, name) select 'org_many_' || g, 'Many ' || g from generate_series(1, 20000) g`
        const { value: read, scans } = yield* scansDuring("orgs", orgs.getOrg(principal, org.orgId))
        expect(read).toMatchObject({ orgId: org.orgId, name: "Keyed" })
        expect(scans).toEqual({ seqScans: 0, indexScans: 1 })
      })
    )

    it.effect("a retried create with the same request id returns the first org", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const accounts = yield* Accounts
        const { principal } = yield* signUp("retry")
        const first = yield* orgs.createOrg(principal, { name: "Once", requestId: "req-1" })
        const again = yield* orgs.createOrg(principal, { name: "Once", requestId: "req-1" })
        expect(again.orgId).toBe(first.orgId)
        expect(yield* accounts.listMyOrgs(principal)).toHaveLength(1)
      })
    )

    it.effect("session-only actions refuse API keys with SESSION_REQUIRED", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const accounts = yield* Accounts
        const auth = yield* Auth
        const { principal } = yield* signUp("keys-only")
        const org = yield* createOrg(principal)
        const key = yield* createKey(principal, org.orgId, ROLES.owner.id)
        const attempts: ReadonlyArray<Effect.Effect<unknown, IdentityError>> = [
          orgs.createOrg(key.principal, { name: "Nope" }),
          accounts.getMe(key.principal),
          accounts.updateMe(key.principal, { fullName: "X" }),
          accounts.deleteMe(key.principal),
          accounts.listMyOrgs(key.principal),
          accounts.bootstrap(key.principal, org.orgId),
          auth.logOut(key.principal)
        ]
        for (const attempt of attempts) {
          expect((yield* Effect.flip(attempt))._tag).toBe("SessionRequired")
        }
        // Org endpoints accept the key, for its own org.
        expect((yield* orgs.getOrg(key.principal, org.orgId)).myRole).toBe("owner")
      })
    )

    it.effect("answers NOT_A_MEMBER for strangers, unknown orgs and keys of another org", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const owner = yield* signUp("owner")
        const stranger = yield* signUp("stranger")
        const org = yield* createOrg(owner.principal, "Mine")
        const other = yield* createOrg(owner.principal, "Other")
        const key = yield* createKey(owner.principal, other.orgId, ROLES.owner.id)
        const attempts: ReadonlyArray<Effect.Effect<unknown, IdentityError>> = [
          orgs.getOrg(stranger.principal, org.orgId),
          orgs.getOrg(owner.principal, "org_does_not_exist"),
          orgs.getOrg(key.principal, org.orgId),
          orgs.listMembers(stranger.principal, org.orgId),
          orgs.listRoles(stranger.principal, org.orgId)
        ]
        for (const attempt of attempts) {
          expect((yield* Effect.flip(attempt))._tag).toBe("NotAMember")
        }
      })
    )

    it.effect("enforces the permission table per role", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const viewer = yield* addMember(owner.principal, org.orgId, "viewer")
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const admin = yield* addMember(owner.principal, org.orgId, "admin")
        // Everyone reads.
        for (const p of [viewer, member, admin]) {
          expect((yield* orgs.getOrg(p.principal, org.orgId)).memberCount).toBe(4)
          expect(yield* orgs.listMembers(p.principal, org.orgId)).toHaveLength(4)
          expect((yield* orgs.listRoles(p.principal, org.orgId)).map((r) => r.key)).toEqual(["viewer", "member", "admin", "owner"])
        }
        expect((yield* orgs.getOrg(viewer.principal, org.orgId)).myPermissions).toEqual(ROLES.viewer.permissions)
        expect(yield* Effect.flip(orgs.updateOrg(member.principal, { orgId: org.orgId, name: "X" }))).toMatchObject({
          _tag: "PermissionDenied",
          permission: "org.update"
        })
        expect(yield* Effect.flip(orgs.updateMemberRole(member.principal, { orgId: org.orgId, userId: viewer.userId, roleKey: "member" }))).toMatchObject({
          _tag: "PermissionDenied",
          permission: "orgs.share"
        })
        expect(yield* Effect.flip(orgs.removeMember(viewer.principal, { orgId: org.orgId, userId: viewer.userId }))).toMatchObject({
          _tag: "PermissionDenied",
          permission: "org.remove_members"
        })
        expect(yield* Effect.flip(orgs.deleteOrg(admin.principal, org.orgId))).toMatchObject({ _tag: "PermissionDenied", permission: "org.delete" })
        const renamed = yield* orgs.updateOrg(admin.principal, { orgId: org.orgId, name: "Renamed" })
        expect(renamed).toMatchObject({ name: "Renamed", myRole: "admin" })
      })
    )

    it.effect("member roles: unknown role, not a member, escalation, owners only by owners, last owner", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const owner = yield* signUp("owner")
        const stranger = yield* signUp("stranger")
        const org = yield* createOrg(owner.principal)
        const admin = yield* addMember(owner.principal, org.orgId, "admin")
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const change = (by: typeof owner, userId: string, roleKey: string) => orgs.updateMemberRole(by.principal, { orgId: org.orgId, userId, roleKey })

        expect(yield* Effect.flip(change(owner, member.userId, "superuser"))).toMatchObject({ _tag: "UnknownRole", role: "superuser" })
        expect(yield* Effect.flip(change(owner, stranger.userId, "admin"))).toMatchObject({ _tag: "MemberNotFound" })
        expect(yield* Effect.flip(change(admin, member.userId, "owner"))).toMatchObject({ _tag: "RoleEscalation", role: "owner", callerRole: "admin" })
        expect(yield* Effect.flip(change(admin, owner.userId, "member"))).toMatchObject({ _tag: "RoleEscalation" })
        expect(yield* Effect.flip(change(owner, owner.userId, "admin"))).toMatchObject({ _tag: "LastOwner", orgId: org.orgId })

        const promoted = yield* change(admin, member.userId, "admin")
        expect(promoted.member).toMatchObject({ userId: member.userId, roleKey: "admin", email: member.email })
        expect(promoted.message).toContain("admin")
        // The new role applies on the next request.
        expect((yield* orgs.getOrg(member.principal, org.orgId)).myRole).toBe("admin")

        yield* change(owner, admin.userId, "owner")
        const demoted = yield* change(owner, owner.userId, "member")
        expect(demoted.member.roleKey).toBe("member")
        const members = yield* orgs.listMembers(admin.principal, org.orgId)
        expect(members.filter((m) => m.roleKey === "owner").map((m) => m.userId)).toEqual([admin.userId])
      })
    )

    it.effect("removing members: last owner stays, unknown is 404, access ends at once", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const owner = yield* signUp("owner")
        const stranger = yield* signUp("stranger")
        const org = yield* createOrg(owner.principal)
        const admin = yield* addMember(owner.principal, org.orgId, "admin")
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const remove = (by: typeof owner, userId: string) => orgs.removeMember(by.principal, { orgId: org.orgId, userId })

        expect(yield* Effect.flip(remove(owner, owner.userId))).toMatchObject({ _tag: "LastOwner" })
        expect(yield* Effect.flip(remove(admin, owner.userId))).toMatchObject({ _tag: "RoleEscalation" })
        expect(yield* Effect.flip(remove(owner, stranger.userId))).toMatchObject({ _tag: "MemberNotFound" })

        yield* remove(admin, member.userId)
        expect(yield* Effect.flip(orgs.getOrg(member.principal, org.orgId))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(remove(admin, member.userId))).toMatchObject({ _tag: "MemberNotFound" })
        expect((yield* orgs.getOrg(owner.principal, org.orgId)).memberCount).toBe(2)
      })
    )

    it.effect("refuses to delete the caller's last org; otherwise deletes everything it owns", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const auth = yield* Auth
        const sql = yield* SqlClient.SqlClient
        const owner = yield* signUp("owner")
        const first = yield* createOrg(owner.principal, "First")
        expect(yield* Effect.flip(orgs.deleteOrg(owner.principal, first.orgId))).toMatchObject({ _tag: "LastOrg", orgId: first.orgId })

        const doomed = yield* createOrg(owner.principal, "Doomed")
        const member = yield* addMember(owner.principal, doomed.orgId, "member")
        const key = yield* createKey(owner.principal, doomed.orgId, ROLES.member.id)
        yield* (yield* Invites).createInvite(owner.principal, { orgId: doomed.orgId, email: "pending@example.com", roleKey: "viewer" })
        const tables = ["memberships", "role_grants", "api_keys", "invites"]
        const count = (table: string) =>
          Effect.map(sql<{ n: number }>`select count(*)::int as n from ${sql(table)} where org_id = ${doomed.orgId}`, (rows) => rows[0]?.n)
        // The org owns rows in every table before the delete.
        for (const table of tables) expect(yield* count(table), table).toBeGreaterThan(0)
        yield* orgs.deleteOrg(owner.principal, doomed.orgId)

        expect(yield* Effect.flip(auth.authenticate(key.secret))).toMatchObject({ _tag: "Unauthenticated" })
        expect(yield* Effect.flip(orgs.getOrg(member.principal, doomed.orgId))).toMatchObject({ _tag: "NotAMember" })
        for (const table of tables) expect(yield* count(table), table).toBe(0)
        const events = (yield* outboxRows("events.org.deleted")).filter((r) => r.payload.org_id === doomed.orgId)
        expect(events).toHaveLength(1)
        expect(events[0]?.payload).toMatchObject({ org_id: doomed.orgId, name: "Doomed", deleted_by_user_id: owner.userId })
      })
    )
  })
})
