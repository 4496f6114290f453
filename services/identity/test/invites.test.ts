import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Invites, MailRecorder, Orgs, ROLES } from "../src/index.js"
import { addMember, createKey, createOrg, identityTestLayer, signUp } from "./support.js"

describe("invites", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("invites by email and role; the invitee sees it pending and accepts it", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const mail = yield* MailRecorder
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal, "Acme")
        const invitee = yield* signUp("invitee")
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: ` ${invitee.email.toUpperCase()} `, roleKey: "member" })
        expect(invite).toMatchObject({ email: invitee.email, roleKey: "member", invitedByUserId: owner.userId, orgId: org.orgId, orgName: "Acme" })
        expect(invite.id).toMatch(/^inv_/)
        expect(invite.token).toMatch(/^inv_tok_/)
        expect((invite.expiresAt.getTime() - Date.now()) / 86_400_000).toBeCloseTo(7, 1)
        expect((yield* mail.sent).some((m) => m.to === invitee.email && m.text.includes(invite.token ?? "-"))).toBe(true)

        const pending = yield* invites.listPendingInvites(invitee.principal)
        expect(pending.map((i) => [i.id, i.token, i.orgName])).toEqual([[invite.id, invite.token, "Acme"]])

        const accepted = yield* invites.acceptInvite(invitee.principal, invite.token ?? "")
        expect(accepted.org).toMatchObject({ orgId: org.orgId, myRole: "member", memberCount: 2, myPermissions: ROLES.member.permissions })
        expect(accepted.message).toContain("Acme")
        expect(yield* invites.listPendingInvites(invitee.principal)).toEqual([])
        expect(yield* Effect.flip(invites.acceptInvite(invitee.principal, invite.token ?? ""))).toMatchObject({ _tag: "InviteNotFound" })
        expect(yield* Effect.flip(invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "admin" }))).toMatchObject({
          _tag: "AlreadyMember"
        })
        const members = yield* (yield* Orgs).listMembers(owner.principal, org.orgId)
        expect(members.find((m) => m.userId === invitee.userId)?.roleKey).toBe("member")
      })
    )

    it.effect("refuses unknown roles, escalation, and invites without orgs.invite_users", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const admin = yield* addMember(owner.principal, org.orgId, "admin")
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const create = (by: typeof owner, roleKey: string, email = "someone@example.com") =>
          invites.createInvite(by.principal, { orgId: org.orgId, email, roleKey })
        expect(yield* Effect.flip(create(owner, "boss"))).toMatchObject({ _tag: "UnknownRole", role: "boss" })
        expect(yield* Effect.flip(create(admin, "owner"))).toMatchObject({ _tag: "RoleEscalation", role: "owner" })
        expect(yield* Effect.flip(create(member, "viewer"))).toMatchObject({ _tag: "PermissionDenied", permission: "orgs.invite_users" })
        expect(yield* Effect.flip(create(owner, "viewer", "not-an-email"))).toMatchObject({ _tag: "InvalidArgument", field: "email" })
        expect((yield* create(admin, "admin")).roleKey).toBe("admin")
        // An admin API key may invite up to admin, no higher.
        const key = yield* createKey(owner.principal, org.orgId, ROLES.admin.id)
        expect(yield* Effect.flip(create({ ...owner, principal: key.principal }, "owner"))).toMatchObject({ _tag: "RoleEscalation" })
      })
    )

    it.effect("a second invite to the same email replaces the first", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const invitee = yield* signUp("invitee")
        const first = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "viewer" })
        const second = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "admin" })
        expect(second.id).not.toBe(first.id)
        expect((yield* invites.listInvites(owner.principal, org.orgId)).map((i) => i.id)).toEqual([second.id])
        expect(yield* Effect.flip(invites.acceptInvite(invitee.principal, first.token ?? ""))).toMatchObject({ _tag: "InviteNotFound" })
        expect((yield* invites.acceptInvite(invitee.principal, second.token ?? "")).org.myRole).toBe("admin")
      })
    )

    it.effect("lists pending invites to members, with tokens only for those who manage invites", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const viewer = yield* addMember(owner.principal, org.orgId, "viewer")
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: "pending@example.com", roleKey: "member" })
        const asViewer = yield* invites.listInvites(viewer.principal, org.orgId)
        expect(asViewer.map((i) => [i.id, i.token])).toEqual([[invite.id, null]])
        const asOwner = yield* invites.listInvites(owner.principal, org.orgId)
        expect(asOwner.map((i) => [i.id, i.token])).toEqual([[invite.id, invite.token]])
        const stranger = yield* signUp("stranger")
        expect(yield* Effect.flip(invites.listInvites(stranger.principal, org.orgId))).toMatchObject({ _tag: "NotAMember" })
      })
    )

    it.effect("revokes an invite once; a revoked invite cannot be accepted", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const other = yield* createOrg(owner.principal, "Other")
        const invitee = yield* signUp("invitee")
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "member" })
        expect(yield* Effect.flip(invites.revokeInvite(owner.principal, { orgId: other.orgId, inviteId: invite.id }))).toMatchObject({ _tag: "InviteNotFound" })
        yield* invites.revokeInvite(owner.principal, { orgId: org.orgId, inviteId: invite.id })
        expect(yield* Effect.flip(invites.revokeInvite(owner.principal, { orgId: org.orgId, inviteId: invite.id }))).toMatchObject({ _tag: "InviteNotFound" })
        expect(yield* Effect.flip(invites.revokeInvite(owner.principal, { orgId: org.orgId, inviteId: "inv_unknown" }))).toMatchObject({ _tag: "InviteNotFound" })
        expect(yield* Effect.flip(invites.acceptInvite(invitee.principal, invite.token ?? ""))).toMatchObject({ _tag: "InviteNotFound" })
        expect(yield* invites.listInvites(owner.principal, org.orgId)).toEqual([])
      })
    )

    it.effect("accepting needs the invited email and a session", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const invitee = yield* signUp("invitee")
        const intruder = yield* signUp("intruder")
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "member" })
        expect(yield* Effect.flip(invites.acceptInvite(intruder.principal, invite.token ?? ""))).toMatchObject({ _tag: "InviteEmailMismatch" })
        expect(yield* invites.listPendingInvites(intruder.principal)).toEqual([])
        expect(yield* Effect.flip(invites.acceptInvite(invitee.principal, "inv_tok_unknown"))).toMatchObject({ _tag: "InviteNotFound" })
        const key = yield* createKey(owner.principal, org.orgId, ROLES.owner.id)
        expect(yield* Effect.flip(invites.acceptInvite(key.principal, invite.token ?? ""))).toMatchObject({ _tag: "SessionRequired" })
        expect(yield* Effect.flip(invites.listPendingInvites(key.principal))).toMatchObject({ _tag: "SessionRequired" })
        // The failed attempts left the invite usable by its addressee.
        expect((yield* invites.acceptInvite(invitee.principal, invite.token ?? "")).org.myRole).toBe("member")
      })
    )
  })
})

describe("invites when emails need verification", () => {
  layer(identityTestLayer({ EMBEDDED_AUTO_VERIFY_EMAIL: "false" }), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("an unverified invitee sees no pending invites and cannot accept until verified", () =>
      Effect.gen(function* () {
        const invites = yield* Invites
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const invitee = yield* signUp("invitee")
        expect(invitee.user.emailVerified).toBe(false)
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: invitee.email, roleKey: "viewer" })
        expect(yield* invites.listPendingInvites(invitee.principal)).toEqual([])
        expect(yield* Effect.flip(invites.acceptInvite(invitee.principal, invite.token ?? ""))).toMatchObject({
          _tag: "EmailNotVerified",
          email: invitee.email
        })
      })
    )
  })
})
