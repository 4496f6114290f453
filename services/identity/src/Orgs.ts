import { AccessChange, type Principal, tracedFn } from "@scion/kit"
import { Clock, Effect, Option } from "effect"
import { Access, noEscalation, ownerOnlyOnOwners, type OrgAccess } from "./Access.js"
import { Database } from "./Database.js"
import { LastOrg, LastOwner, MemberNotFound, NotAMember, UnknownRole } from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { OrgDetails } from "./domain/models.js"
import { ALL_ROLES, roleByKey, ROLES } from "./domain/roles.js"
import { boundedText } from "./domain/validation.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { UsersRepo } from "./UsersRepo.js"

/** Orgs, their members and roles. */
export class Orgs extends Effect.Service<Orgs>()("@scion/identity/Orgs", {
  effect: Effect.gen(function* () {
    const access = yield* Access
    const db = yield* Database
    const repo = yield* OrgsRepo
    const users = yield* UsersRepo
    const outbox = yield* OutboxRepo

    /** The org as the caller sees it: its role, permissions and the member count. */
    const details = (granted: OrgAccess) =>
      repo.find(granted.orgId).pipe(
        Effect.flatMap(
          Option.match({
            onNone: () => new NotAMember({ orgId: granted.orgId }),
            onSome: (org) =>
              Effect.succeed<OrgDetails>({
                orgId: org.id,
                name: org.name,
                createdAt: org.created_at,
                myRole: granted.role.key,
                myPermissions: granted.permissions,
                memberCount: org.member_count
              })
          })
        )
      )

    const orgName = (name: string) => boundedText("name", name)

    /** The caller becomes owner; `events.org.created` is written in the same transaction. */
    const createOrg = tracedFn("Orgs.createOrg")(function* (principal: Principal, input: { name: string; requestId?: string | undefined }) {
      const { userId } = yield* access.session(principal)
      const name = yield* orgName(input.name)
      const requestId = input.requestId?.trim() || null
      const orgId = yield* db.transaction(
        Effect.gen(function* () {
          const id = yield* Ids.org
          const created = yield* repo.insert({ id, name, createdBy: userId, requestId })
          // A retry with the same request id: answer with the org the first call created.
          if (!created) return yield* Effect.orDie(Effect.flatten(repo.findByRequest(userId, requestId ?? "")))
          yield* repo.addMember({ orgId: id, userId, roleId: ROLES.owner.id, grantId: yield* Ids.roleGrant, grantedBy: userId })
          const now = new Date(yield* Clock.currentTimeMillis)
          yield* outbox.write(`org.created.${id}`, {
            subject: "events.org.created",
            payload: { org_id: id, name, owner_user_id: userId, created_at: now.toISOString() }
          })
          return id
        })
      )
      yield* Effect.logInfo("org created").pipe(Effect.annotateLogs({ org_id: orgId, user_id: userId }))
      return yield* getOrg(principal, orgId)
    })

    const getOrg = tracedFn("Orgs.getOrg")(function* (principal: Principal, orgId: string) {
      return yield* details(yield* access.require(principal, orgId, "org.read"))
    })

    const updateOrg = tracedFn("Orgs.updateOrg")(function* (principal: Principal, input: { orgId: string; name: string }) {
      const granted = yield* access.require(principal, input.orgId, "org.update")
      const name = yield* orgName(input.name)
      yield* repo.rename(input.orgId, name)
      return yield* details(granted)
    })

    /** Not the caller's last org (sessions); everything the org owns cascades; `events.org.deleted`. */
    const deleteOrg = tracedFn("Orgs.deleteOrg")(function* (principal: Principal, orgId: string) {
      const granted = yield* access.require(principal, orgId, "org.delete")
      const change = new AccessChange({ org_id: orgId })
      yield* db.transaction(
        Effect.gen(function* () {
          if (granted.sessionId !== null && granted.userId !== null) {
            yield* users.lock(granted.userId)
            if ((yield* repo.membershipCount(granted.userId)) <= 1) return yield* new LastOrg({ orgId })
          }
          const name = yield* repo.delete(orgId)
          if (Option.isNone(name)) return yield* new NotAMember({ orgId })
          const now = new Date(yield* Clock.currentTimeMillis)
          yield* outbox.write(`org.deleted.${orgId}`, {
            subject: "events.org.deleted",
            payload: { org_id: orgId, name: name.value, deleted_by_user_id: granted.userId, deleted_at: now.toISOString() }
          })
          yield* access.announce(change)
        })
      )
      yield* access.forget(change)
      yield* Effect.logInfo("org deleted").pipe(Effect.annotateLogs({ org_id: orgId }))
    })

    const listMembers = tracedFn("Orgs.listMembers")(function* (principal: Principal, orgId: string) {
      yield* access.require(principal, orgId, "org.read")
      return yield* repo.members(orgId)
    })

    const listRoles = tracedFn("Orgs.listRoles")(function* (principal: Principal, orgId: string) {
      yield* access.require(principal, orgId, "org.read")
      return ALL_ROLES
    })

    /** The member's current role, with the org row locked: owner counts cannot race. */
    const lockedMember = (orgId: string, userId: string) =>
      Effect.gen(function* () {
        yield* repo.lock(orgId)
        const member = yield* repo.member(orgId, userId)
        if (Option.isNone(member)) return yield* new MemberNotFound({ orgId, userId })
        return member.value
      })

    const keepsAnOwner = (orgId: string) =>
      Effect.flatMap(repo.ownerCount(orgId), (owners) => (owners <= 1 ? Effect.fail(new LastOwner({ orgId })) : Effect.void))

    const updateMemberRole = tracedFn("Orgs.updateMemberRole")(function* (
      principal: Principal,
      input: { orgId: string; userId: string; roleKey: string }
    ) {
      const granted = yield* access.require(principal, input.orgId, "orgs.share")
      const role = roleByKey(input.roleKey)
      if (!role) return yield* new UnknownRole({ role: input.roleKey })
      yield* noEscalation(granted, role)
      const change = new AccessChange({ user_id: input.userId, org_id: input.orgId })
      const member = yield* db.transaction(
        Effect.gen(function* () {
          const member = yield* lockedMember(input.orgId, input.userId)
          yield* ownerOnlyOnOwners(granted, ROLES[member.roleKey])
          if (member.roleKey === "owner" && role.key !== "owner") yield* keepsAnOwner(input.orgId)
          yield* repo.setRole({ orgId: input.orgId, userId: input.userId, roleId: role.id, grantedBy: granted.userId })
          yield* access.announce(change)
          return { ...member, roleKey: role.key }
        })
      )
      yield* access.forget(change)
      return { message: `${member.email} is now ${role.key} of the org`, member }
    })

    /** Needs org.remove_members, also to remove oneself; the last owner stays. */
    const removeMember = tracedFn("Orgs.removeMember")(function* (principal: Principal, input: { orgId: string; userId: string }) {
      const granted = yield* access.require(principal, input.orgId, "org.remove_members")
      const change = new AccessChange({ user_id: input.userId, org_id: input.orgId })
      yield* db.transaction(
        Effect.gen(function* () {
          const member = yield* lockedMember(input.orgId, input.userId)
          yield* ownerOnlyOnOwners(granted, ROLES[member.roleKey])
          if (member.roleKey === "owner") yield* keepsAnOwner(input.orgId)
          yield* repo.removeMember(input.orgId, input.userId)
          yield* access.announce(change)
        })
      )
      yield* access.forget(change)
      yield* Effect.logInfo("member removed").pipe(Effect.annotateLogs({ org_id: input.orgId, user_id: input.userId }))
    })

    return { createOrg, getOrg, updateOrg, deleteOrg, listMembers, listRoles, updateMemberRole, removeMember, details } as const
  })
}) {}
