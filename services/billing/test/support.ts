import { Auth, IdentityServices, identityRoutes, Invites, Orgs, RecordingMailer } from "@scion/identity"
import { grpcTransport, InMemoryBus, type Principal, serveHttp2, withPrincipalToken } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { BillingServices, IdentityClient, OrgAccess, PaymentProvider } from "../src/index.js"

/** The identity unit itself, on a fresh database of its own (no plan limits, mail recorded). */
const Identity = Layer.unwrapScoped(
  Effect.map(freshDatabase("billing_identity"), (url) => IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url }))))
)

/** Identity served over HTTP/2 gRPC on a free port, and the client billing asks it with. */
const IdentityOverTheWire = Layer.unwrapScoped(
  Effect.gen(function* () {
    const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
    return IdentityClient.fromTransport(yield* grpcTransport(served.url))
  })
).pipe(Layer.provide(InMemoryBus.layer))

/** The signed token identity gave each caller the helpers below made. */
const tokens = new WeakMap<Principal, string>()

/**
 * OrgAccess.live as billing's RPC handlers run it: with the caller's principal token (the request's)
 * in the fiber, so identity answers for that caller. Domain tests call the services directly, so
 * this plays the handler's part; identity's answers are its own.
 */
const AccessAsHandled = Layer.effect(
  OrgAccess,
  Effect.map(OrgAccess, (live) =>
    OrgAccess.of({
      require: (principal, orgId, permission) => {
        const token = tokens.get(principal)
        return token === undefined ? live.require(principal, orgId, permission) : withPrincipalToken(token)(live.require(principal, orgId, permission))
      }
    })
  )
).pipe(Layer.provide(OrgAccess.live), Layer.provide(IdentityOverTheWire))

/**
 * The billing services on a fresh database with the given payment provider, and the real identity
 * unit answering who may read and manage billing. Identity's services stay in the context, so
 * tests make users and orgs the way the product does.
 */
export const billingTestLayer = (provider: Layer.Layer<PaymentProvider> = PaymentProvider.local, config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("billing_test"), (url) =>
      BillingServices.pipe(Layer.provideMerge(Layer.merge(AccessAsHandled, provider)), Layer.provide(withConfig({ DATABASE_URL: url, ...config })))
    )
  ).pipe(Layer.provideMerge(Identity), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

/** An org id identity never made: billing's events and set-up need no member. */
export const newOrgId = () => `org_${unique()}`

/** A new user with a live session, as identity authenticates it. */
export const newUser = (name = "user") =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const email = `${name}-${unique()}@example.com`
    const grant = yield* auth.signUp({ email, password: "correct-horse-battery", fullName: `Test ${name}` })
    const authenticated = yield* auth.authenticate(grant.sessionToken)
    tokens.set(authenticated.principal, authenticated.token)
    return { principal: authenticated.principal, email }
  })

/** A new org at identity: its owner (who made it) and a plain member (invited, accepted). */
export const newOrg = (name = "Acme") =>
  Effect.gen(function* () {
    const owner = yield* newUser("owner")
    const { orgId } = yield* (yield* Orgs).createOrg(owner.principal, { name })
    const member = yield* newUser("member")
    const invites = yield* Invites
    const invite = yield* invites.createInvite(owner.principal, { orgId, email: member.email, roleKey: "member" })
    yield* invites.acceptInvite(member.principal, invite.token ?? "")
    return { orgId, owner: owner.principal, member: member.principal }
  })

/** Runs `self` with the caller's principal token, as a unit calling billing over the wire would. */
export const as = (principal: Principal) => withPrincipalToken(tokens.get(principal) ?? "")

export const orgCreated = (orgId: string) => ({ org_id: orgId, name: "Acme", owner_user_id: "usr_x", created_at: new Date().toISOString() })
