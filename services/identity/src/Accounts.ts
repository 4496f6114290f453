import { AccessChange, type Principal, tracedFn } from "@scion/kit"
import { Clock, Effect, Option } from "effect"
import { Access } from "./Access.js"
import { Database } from "./Database.js"
import { SoleOwner, Unauthenticated } from "./domain/errors.js"
import { boundedText } from "./domain/validation.js"
import { Orgs } from "./Orgs.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { UsersRepo } from "./UsersRepo.js"

/** The signed-in user's own account: profile, org list, bootstrap, deletion. Sessions only. */
export class Accounts extends Effect.Service<Accounts>()("@scion/identity/Accounts", {
  effect: Effect.gen(function* () {
    const access = yield* Access
    const db = yield* Database
    const users = yield* UsersRepo
    const orgsRepo = yield* OrgsRepo
    const orgs = yield* Orgs
    const outbox = yield* OutboxRepo

    const userOf = (userId: string) => users.findById(userId).pipe(Effect.flatMap(Option.match({ onNone: () => new Unauthenticated(), onSome: Effect.succeed })))

    const getMe = tracedFn("Accounts.getMe")(function* (principal: Principal) {
      const { userId } = yield* access.session(principal)
      const [user, memberships] = yield* Effect.all([userOf(userId), orgsRepo.membershipsOf(userId)])
      return { user, hasOrgs: memberships.length > 0, defaultOrgId: memberships[0]?.orgId ?? null }
    })

    const updateMe = tracedFn("Accounts.updateMe")(function* (principal: Principal, input: { fullName: string }) {
      const { userId } = yield* access.session(principal)
      const fullName = yield* boundedText("full_name", input.fullName)
      return yield* users.updateFullName(userId, fullName).pipe(Effect.flatMap(Option.match({ onNone: () => new Unauthenticated(), onSome: Effect.succeed })))
    })

    /**
     * Deletes the account unless the user is the sole owner of an org. Memberships, the user's role
     * grants and sessions go with it; invites, grants and API keys the user created stay, with the
     * reference set to null.
     */
    const deleteMe = tracedFn("Accounts.deleteMe")(function* (principal: Principal) {
      const { userId } = yield* access.session(principal)
      const change = new AccessChange({ user_id: userId })
      yield* db.transaction(
        Effect.gen(function* () {
          const soleOwned = yield* orgsRepo.lockSoleOwned(userId)
          if (soleOwned.length > 0) return yield* new SoleOwner({ orgs: soleOwned })
          yield* users.delete(userId)
          const now = new Date(yield* Clock.currentTimeMillis)
          yield* outbox.write(`user.deleted.${userId}`, { subject: "events.user.deleted", payload: { user_id: userId, deleted_at: now.toISOString() } })
          yield* access.announce(change)
        })
      )
      yield* access.forget(change)
      yield* Effect.logInfo("user deleted").pipe(Effect.annotateLogs({ user_id: userId }))
    })

    const listMyOrgs = tracedFn("Accounts.listMyOrgs")(function* (principal: Principal) {
      const { userId } = yield* access.session(principal)
      return yield* orgsRepo.membershipsOf(userId)
    })

    const bootstrap = tracedFn("Accounts.bootstrap")(function* (principal: Principal, orgId: string) {
      const { userId } = yield* access.session(principal)
      const activeOrg = yield* orgs.getOrg(principal, orgId)
      const [user, memberships] = yield* Effect.all([userOf(userId), orgsRepo.membershipsOf(userId)])
      return { user, orgs: memberships, activeOrg }
    })

    return { getMe, updateMe, deleteMe, listMyOrgs, bootstrap } as const
  })
}) {}
