import { type Principal, tracedFn } from "@scion/kit"
import { Effect, Option } from "effect"
import { Access, noEscalation } from "./Access.js"
import { IdentityConfig } from "./config.js"
import { Database } from "./Database.js"
import { AlreadyMember, EmailNotVerified, InviteEmailMismatch, InviteNotFound, Unauthenticated, UnknownRole } from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { Invite } from "./domain/models.js"
import { ROLES, roleByKey } from "./domain/roles.js"
import { newInviteToken } from "./domain/secrets.js"
import { normalizeEmail } from "./domain/validation.js"
import { InvitesRepo } from "./InvitesRepo.js"
import { Mailer } from "./Mailer.js"
import { Orgs } from "./Orgs.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { UsersRepo } from "./UsersRepo.js"

const MANAGE = "orgs.invite_users"

/**
 * Org invites. A new invite for an email that already has an open invite in the org replaces it
 * (the old token stops working). Accepting needs the invite token and a verified email equal to
 * the invite's.
 */
export class Invites extends Effect.Service<Invites>()("@scion/identity/Invites", {
  effect: Effect.gen(function* () {
    const config = yield* IdentityConfig
    const access = yield* Access
    const db = yield* Database
    const repo = yield* InvitesRepo
    const orgsRepo = yield* OrgsRepo
    const users = yield* UsersRepo
    const orgs = yield* Orgs
    const mailer = yield* Mailer

    const createInvite = tracedFn("Invites.createInvite")(function* (principal: Principal, input: { orgId: string; email: string; roleKey: string }) {
      const granted = yield* access.require(principal, input.orgId, MANAGE)
      const email = yield* normalizeEmail(input.email)
      const role = roleByKey(input.roleKey)
      if (!role) return yield* new UnknownRole({ role: input.roleKey })
      yield* noEscalation(granted, role)
      const invite = yield* db.transaction(
        Effect.gen(function* () {
          yield* orgsRepo.lock(input.orgId)
          if (yield* orgsRepo.isMemberByEmail(input.orgId, email)) return yield* new AlreadyMember({ orgId: input.orgId, email })
          return yield* repo.replace({
            id: yield* Ids.invite,
            orgId: input.orgId,
            email,
            roleId: role.id,
            token: yield* newInviteToken,
            invitedBy: granted.userId,
            ttlDays: config.inviteTtlDays
          })
        })
      )
      yield* mailer.send({
        to: email,
        subject: `You are invited to ${invite.orgName} on Scion`,
        text: `You are invited to join ${invite.orgName} as ${role.key}. Sign in with ${email} and accept with this invite token (valid ${config.inviteTtlDays} days):\n\n${invite.token}\n`,
        secrets: [invite.token]
      })
      yield* Effect.logInfo("invite created").pipe(Effect.annotateLogs({ org_id: input.orgId, invite_id: invite.id }))
      return invite satisfies Invite
    })

    /** Pending invites; tokens only for callers who may manage invites. */
    const listInvites = tracedFn("Invites.listInvites")(function* (principal: Principal, orgId: string) {
      const granted = yield* access.require(principal, orgId, "org.read")
      const invites = yield* repo.pendingInOrg(orgId)
      const showTokens = granted.permissions.includes(MANAGE)
      return invites.map((invite): Invite => ({ ...invite, token: showTokens ? invite.token : null }))
    })

    const revokeInvite = tracedFn("Invites.revokeInvite")(function* (principal: Principal, input: { orgId: string; inviteId: string }) {
      yield* access.require(principal, input.orgId, MANAGE)
      if (!(yield* repo.revoke(input.orgId, input.inviteId))) return yield* new InviteNotFound()
    })

    const verifiedUser = (principal: Principal) =>
      Effect.gen(function* () {
        const { userId } = yield* access.session(principal)
        const user = yield* users.findById(userId)
        if (Option.isNone(user)) return yield* new Unauthenticated()
        return user.value
      })

    /** Pending invites addressed to the caller's email, once that email is verified. */
    const listPendingInvites = tracedFn("Invites.listPendingInvites")(function* (principal: Principal) {
      const user = yield* verifiedUser(principal)
      if (!user.emailVerified) return [] as ReadonlyArray<Invite>
      return (yield* repo.pendingForEmail(user.email)) as ReadonlyArray<Invite>
    })

    const acceptInvite = tracedFn("Invites.acceptInvite")(function* (principal: Principal, token: string) {
      const user = yield* verifiedUser(principal)
      const invite = yield* db.transaction(
        Effect.gen(function* () {
          const found = yield* repo.lockPendingByToken(token)
          if (Option.isNone(found)) return yield* new InviteNotFound()
          const invite = found.value
          if (invite.email !== user.email) return yield* new InviteEmailMismatch()
          if (!user.emailVerified) return yield* new EmailNotVerified({ email: user.email })
          if (Option.isSome(yield* orgsRepo.member(invite.orgId, user.id))) return yield* new AlreadyMember({ orgId: invite.orgId, email: user.email })
          yield* orgsRepo.addMember({ orgId: invite.orgId, userId: user.id, roleId: invite.roleId, grantId: yield* Ids.roleGrant, grantedBy: invite.invitedByUserId })
          yield* repo.markAccepted(invite.id, user.id)
          return invite
        })
      )
      yield* Effect.logInfo("invite accepted").pipe(Effect.annotateLogs({ org_id: invite.orgId, invite_id: invite.id, user_id: user.id }))
      const org = yield* orgs.getOrg(principal, invite.orgId)
      return { message: `You joined ${org.name} as ${ROLES[invite.roleKey].key}`, org }
    })

    return { createInvite, listInvites, revokeInvite, listPendingInvites, acceptInvite } as const
  })
}) {}
