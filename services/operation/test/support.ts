import type { Principal } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { IdentityOverTheWire, IdentityUnit, IdentityWireLive, asCaller, newApiKey as apiKeyOf, newOrg as orgOf, newUser as userOf, newWorker as workerOf } from "../../../test/support/units.js"
import { OperationChanges, OperationServices, OrgAccess } from "../src/index.js"

/**
 * The operation services on a fresh database, in-memory change announcements, and the real
 * identity unit answering its authorization questions over gRPC. Identity's services stay in the
 * context, so tests make users, orgs and keys the way the product does.
 */
export const operationTestLayer = (config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("operation_test"), (url) =>
      OperationServices.pipe(
        Layer.provideMerge(Layer.merge(OrgAccess.live, OperationChanges.inMemory)),
        Layer.provide(IdentityOverTheWire),
        Layer.provide(withConfig({ DATABASE_URL: url, ...config }))
      )
    )
  ).pipe(Layer.provideMerge(IdentityWireLive), Layer.provideMerge(IdentityUnit), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

/** An org id nobody belongs to: what a worker writes for needs no org at identity. */
export const newOrgId = () => `org_${unique()}`
export const newOperationId = () => `op_${unique()}`

/** A caller as identity knows it, and how to run an effect with its signed principal token. */
export interface Caller {
  readonly principal: Principal
  readonly as: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

const callerOf = (principal: Principal): Caller => ({ principal, as: asCaller(principal) })

/** A new user with a live session. */
export const newUser = (name = "user") => Effect.map(userOf(name), (user) => callerOf(user.principal))

/** A new org made by a new user, its owner. */
export const newOrg = (name = "Acme") => Effect.map(orgOf(name), (org) => ({ orgId: org.orgId, owner: callerOf(org.owner) }))

/** A new API key of the org (role member: it holds operations.read), made by its owner. */
export const newApiKey = (org: { readonly orgId: string; readonly owner: Caller }) =>
  Effect.map(apiKeyOf({ orgId: org.orgId, owner: org.owner.principal }, "member"), callerOf)

/** A unit's worker, with the service principal identity issues for the deployment's credential. */
export const newWorker = (serviceName = "branch") => Effect.map(workerOf(serviceName), callerOf)
