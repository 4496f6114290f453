import { ApiKeys, Auth, IdentityServices, identityRoutes, Orgs, RecordingMailer, ROLES } from "@scion/identity"
import { grpcTransport, InMemoryBus, type Principal, serveHttp2, withPrincipalToken } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { IdentityClient, OperationChanges, OperationServices, OrgAccess } from "../src/index.js"

/** What the deployment gives identity and its units' workers (IssueServiceToken). */
const SERVICE_CREDENTIAL = "operation-test-service-credential"

/** The identity unit itself, on a fresh database of its own (no plan limits, mail recorded). */
const Identity = Layer.unwrapScoped(
  Effect.map(freshDatabase("operation_identity"), (url) =>
    IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url, SERVICE_CREDENTIAL })))
  )
)

/** Identity served over HTTP/2 gRPC on a free port, and the client the operation unit asks it with. */
const IdentityOverTheWire = Layer.unwrapScoped(
  Effect.gen(function* () {
    const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
    return IdentityClient.fromTransport(yield* grpcTransport(served.url))
  })
).pipe(Layer.provide(InMemoryBus.layer))

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
  ).pipe(Layer.provideMerge(Identity), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

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

/** What identity answered for a credential: the principal and its signed token. */
const callerOf = (authenticated: { readonly principal: Principal; readonly token: string }): Caller => ({
  principal: authenticated.principal,
  as: withPrincipalToken(authenticated.token)
})

/** A new user with a live session. */
export const newUser = (name = "user") =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const grant = yield* auth.signUp({ email: `${name}-${unique()}@example.com`, password: "correct-horse-battery", fullName: `Test ${name}` })
    return callerOf(yield* auth.authenticate(grant.sessionToken))
  })

/** A new org made by a new user, its owner. */
export const newOrg = (name = "Acme") =>
  Effect.gen(function* () {
    const owner = yield* newUser("owner")
    const org = yield* (yield* Orgs).createOrg(owner.principal, { name })
    return { orgId: org.orgId, owner }
  })

/** A new API key of the org (role member: it holds operations.read), made by its owner. */
export const newApiKey = (org: { readonly orgId: string; readonly owner: Caller }) =>
  Effect.gen(function* () {
    const created = yield* (yield* ApiKeys).createApiKey(org.owner.principal, { orgId: org.orgId, name: "ci", roleId: ROLES.member.id, scopes: [], expiresAt: null, mode: "live" })
    return callerOf(yield* (yield* Auth).authenticate(created.secret))
  })

/** A unit's worker, with the service principal identity issues for the deployment's credential. */
export const newWorker = (serviceName = "branch") => Effect.map(Effect.flatMap(Auth, (auth) => auth.issueServiceToken(serviceName, SERVICE_CREDENTIAL)), callerOf)
