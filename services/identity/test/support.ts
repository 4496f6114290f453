import { SqlClient } from "@effect/sql"
import type { Principal } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { ApiKeys, Auth, IdentityServices, Invites, Orgs, RecordingMailer, type RoleKey } from "../src/index.js"

/** The identity services on a fresh database with a recording mailer; extra config on top. */
export const identityTestLayer = (config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("identity_test"), (url) =>
      IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url, ...config })))
    )
  ).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))

export const PASSWORD = "correct-horse-battery"
let counter = 0

/** A new user with a live session, and the principal their session token authenticates to. */
export const signUp = (name = "user") =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const email = `${name}-${Date.now()}-${counter++}@example.com`
    const grant = yield* auth.signUp({ email, password: PASSWORD, fullName: `Test ${name}` })
    const { principal } = yield* auth.authenticate(grant.sessionToken)
    return { ...grant, email, userId: grant.user.id, principal }
  })

export const createOrg = (principal: Principal, name = "Acme") => Effect.flatMap(Orgs, (orgs) => orgs.createOrg(principal, { name }))

/** A new user who joined the org with the role, through an invite from `inviter`. */
export const addMember = (inviter: Principal, orgId: string, roleKey: RoleKey, name: string = roleKey) =>
  Effect.gen(function* () {
    const invites = yield* Invites
    const user = yield* signUp(name)
    const invite = yield* invites.createInvite(inviter, { orgId, email: user.email, roleKey })
    yield* invites.acceptInvite(user.principal, invite.token ?? "")
    return user
  })

/** A new API key of the org and the principal it authenticates to. */
export const createKey = (creator: Principal, orgId: string, roleId: string, scopes: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const created = yield* (yield* ApiKeys).createApiKey(creator, { orgId, name: "ci", roleId, scopes, expiresAt: null, mode: "live" })
    const { principal } = yield* (yield* Auth).authenticate(created.secret)
    return { ...created, principal }
  })

export const outboxRows = (subject: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ subject: string; msg_id: string; payload: Record<string, unknown> }>`select subject, msg_id, payload from outbox where subject = ${subject} order by id`
  ).pipe(Effect.orDie)
