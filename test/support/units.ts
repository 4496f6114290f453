/**
 * The other units themselves, for one unit's own tests: identity, the operation unit and billing,
 * each on a fresh database of its own and served over HTTP/2 gRPC on a free port, reached the way
 * production reaches them. A unit's tests build its services in-process and meet these instead of
 * fakes: users, orgs, members and keys are identity's, operations the operation unit's, plan limits
 * billing's.
 */
import type { Transport } from "@connectrpc/connect"
import { BillingServices, billingRoutes, OrgAccess as BillingAccess, PaymentProvider, Subscriptions, VerifierFromIdentity as BillingVerifier } from "@scion/billing"
import { ApiKeys, Auth, Entitlements, IdentityServices, identityRoutes, identityServices, Invites, Orgs, RecordingMailer, ROLES, type RoleKey } from "@scion/identity"
import { grpcTransport, IdentityClient, InMemoryBus, listenHttp2, OperationClient, type Principal, serveHttp2, ServiceIdentity, withPrincipalToken } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { OperationChanges, OperationLive, operationRoutes } from "@scion/operation"
import { Context, Effect, Layer, Option, Redacted } from "effect"

/** What the deployment gives identity and its units' workers (IssueServiceToken). */
export const SERVICE_CREDENTIAL = "unit-test-service-credential"

/** Identity's services on a fresh database of their own (no plan limits, mail recorded), in the context. */
export const IdentityUnit = Layer.unwrapScoped(
  Effect.map(freshDatabase("identity_for_tests"), (url) =>
    IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url, SERVICE_CREDENTIAL })))
  )
)

/** Identity served over HTTP/2 gRPC: the transport every unit here asks it over. */
export class IdentityWire extends Context.Tag("@scion/e2e/IdentityWire")<IdentityWire, Transport>() {}

export const IdentityWireLive = Layer.scoped(
  IdentityWire,
  Effect.gen(function* () {
    const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
    return yield* grpcTransport(served.url)
  })
)

/** The client a unit asks identity with, over the wire (grants cached; no bus events reach it here). */
export const IdentityOverTheWire = Layer.unwrapEffect(Effect.map(IdentityWire, (transport) => IdentityClient.fromTransport(transport))).pipe(
  Layer.provide(InMemoryBus.layer)
)

/**
 * The operation unit on a database of its own, asking identity over the wire, served over HTTP/2
 * gRPC; the client and the service principal (`serviceName`'s, issued by identity) a unit reaches
 * it with, as in production.
 */
export const OperationUnitOverTheWire = (serviceName: string) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* freshDatabase("operation_for_tests")
      const unit = yield* Layer.build(
        OperationLive.pipe(Layer.provide(Layer.merge(IdentityOverTheWire, OperationChanges.inMemory)), Layer.provide(withConfig({ DATABASE_URL: url })))
      )
      const served = yield* Effect.provide(
        Effect.flatMap(operationRoutes, (routes) => serveHttp2({ port: 0, host: "127.0.0.1", routes })),
        unit
      )
      const service = yield* ServiceIdentity.make(serviceName, yield* IdentityWire, Redacted.make(SERVICE_CREDENTIAL))
      return Layer.merge(OperationClient.fromTransport(yield* grpcTransport(served.url)), Layer.succeed(ServiceIdentity, service))
    })
  )

/** Billing as tests use it beside its RPCs: an org set up (as its org.created consumer does), a plan chosen. */
export class BillingDesk extends Context.Tag("@scion/e2e/BillingDesk")<
  BillingDesk,
  {
    /** The transport billing's RPCs are served on. */
    readonly transport: Transport
    readonly setUp: (orgId: string) => Effect.Effect<void>
    readonly selectPlan: (owner: Principal, orgId: string, planId: string) => Effect.Effect<void>
  }
>() {}

/** The billing unit on a database of its own (the local payment provider: checkout completes at once), asking identity over the wire. */
export const BillingUnitOverTheWire = Layer.scoped(
  BillingDesk,
  Effect.gen(function* () {
    const url = yield* freshDatabase("billing_for_tests")
    const unit = yield* Layer.build(
      Layer.merge(BillingServices, BillingVerifier).pipe(
        Layer.provide(Layer.merge(BillingAccess.live, PaymentProvider.local)),
        Layer.provide(IdentityOverTheWire),
        Layer.provide(withConfig({ DATABASE_URL: url }))
      )
    )
    const served = yield* Effect.provide(
      Effect.flatMap(billingRoutes, (routes) => serveHttp2({ port: 0, host: "127.0.0.1", routes })),
      unit
    )
    const subscriptions = Context.get(unit, Subscriptions)
    return BillingDesk.of({
      transport: yield* grpcTransport(served.url),
      setUp: (orgId) => Effect.asVoid(subscriptions.setUpOrg({ org_id: orgId, created_at: new Date().toISOString() }, `org.created.${orgId}`)),
      selectPlan: (owner, orgId, planId) => Effect.orDie(Effect.asVoid(asCaller(owner)(subscriptions.selectPlan(owner, orgId, planId))))
    })
  })
)

/**
 * Identity with its plan limits from the billing unit, and billing asking identity for access, as in
 * production. Billing's server listens first (UNAVAILABLE until its routes are installed, as a
 * starting unit answers), so identity is built with its address; then billing is built against the
 * served identity and installed. Provides identity's services.
 */
export const IdentityWithBilling = Layer.unwrapScoped(
  Effect.gen(function* () {
    const billingServer = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
    const identity = yield* Layer.build(
      identityServices(Entitlements.billing(yield* grpcTransport(billingServer.url))).pipe(
        Layer.provideMerge(RecordingMailer),
        Layer.provide(withConfig({ DATABASE_URL: yield* freshDatabase("identity_for_tests"), SERVICE_CREDENTIAL }))
      )
    )
    const served = yield* Effect.provide(
      Effect.flatMap(identityRoutes, (routes) => serveHttp2({ port: 0, host: "127.0.0.1", routes })),
      identity
    )
    const billing = yield* Layer.build(
      Layer.merge(BillingServices, BillingVerifier).pipe(
        Layer.provide(Layer.merge(BillingAccess.live, PaymentProvider.local)),
        Layer.provide(IdentityClient.fromTransport(yield* grpcTransport(served.url)).pipe(Layer.provide(InMemoryBus.layer))),
        Layer.provide(withConfig({ DATABASE_URL: yield* freshDatabase("billing_for_tests") }))
      )
    )
    yield* Effect.provide(
      Effect.flatMap(billingRoutes, (routes) => billingServer.install(routes, Option.none())),
      billing
    )
    return Layer.succeedContext(identity)
  })
)

/** The signed token identity gave each caller the helpers below made. */
const tokens = new WeakMap<Principal, string>()

/** Runs `self` with the caller's principal token in the fiber, as a unit's RPC handler does for a request. */
export const asCaller = (principal: Principal) => withPrincipalToken(tokens.get(principal) ?? "")

/**
 * An access check as a unit's RPC handlers run it: with the caller's token in the fiber, so identity
 * answers for that caller. Domain tests call the services directly, so this plays the handler's part
 * for the callers made here; a principal from elsewhere (a request a handler verified) keeps the
 * token its fiber already carries.
 */
export const answeredForCaller =
  <A extends ReadonlyArray<unknown>, R, E>(check: (principal: Principal, ...rest: A) => Effect.Effect<R, E>) =>
  (principal: Principal, ...rest: A) => {
    const token = tokens.get(principal)
    return token === undefined ? check(principal, ...rest) : withPrincipalToken(token)(check(principal, ...rest))
  }

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

const remember = (authenticated: { readonly principal: Principal; readonly token: string }) => {
  tokens.set(authenticated.principal, authenticated.token)
  return authenticated.principal
}

/** A new user with a live session. */
export const newUser = (name = "user") =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const email = `${name}-${unique()}@example.com`
    const grant = yield* auth.signUp({ email, password: "correct-horse-battery", fullName: `Test ${name}` })
    return { principal: remember(yield* auth.authenticate(grant.sessionToken)), email }
  })

/** A new org made by a new user, its owner. */
export const newOrg = (name = "Acme") =>
  Effect.gen(function* () {
    const owner = (yield* newUser("owner")).principal
    const { orgId } = yield* (yield* Orgs).createOrg(owner, { name })
    return { orgId, owner }
  })

/** `user` invited into the org by its owner with the role, and accepted. */
export const join = (org: { readonly orgId: string; readonly owner: Principal }, user: { readonly principal: Principal; readonly email: string }, role: RoleKey) =>
  Effect.gen(function* () {
    const invites = yield* Invites
    const invite = yield* invites.createInvite(org.owner, { orgId: org.orgId, email: user.email, roleKey: role })
    yield* invites.acceptInvite(user.principal, invite.token ?? "")
  })

/** A new API key of the org made by its owner: the role's permissions, narrowed to `scopes` when any. */
export const newApiKey = (org: { readonly orgId: string; readonly owner: Principal }, role: RoleKey, scopes: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const created = yield* (yield* ApiKeys).createApiKey(org.owner, { orgId: org.orgId, name: "ci", roleId: ROLES[role].id, scopes, expiresAt: null, mode: "live" })
    return remember(yield* (yield* Auth).authenticate(created.secret))
  })

/** A unit's worker, with the service principal identity issues for the deployment's credential. */
export const newWorker = (serviceName: string) => Effect.map(Effect.flatMap(Auth, (auth) => auth.issueServiceToken(serviceName, SERVICE_CREDENTIAL)), remember)
