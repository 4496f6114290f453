import { ApiKeys, Auth, IdentityServices, identityRoutes, Invites, Orgs, RecordingMailer, ROLES, type RoleKey } from "@scion/identity"
import { grpcTransport, InMemoryBus, type Principal as PrincipalType, serveHttp2, withPrincipalToken } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Either, Layer, Logger, LogLevel, Option } from "effect"
import {
  CloudAccounts,
  ConnectorEngines,
  ConnectorServices,
  EngineProvisionerLive,
  EngineSetupConfig,
  ConnectorOperations,
  Entitlements,
  generateSecretKey,
  IdentityClient,
  OrgAccess,
  parseSecretKeys,
  PlanLimitReached,
  SecretStore,
  SourceProbe,
  type StartedStatus
} from "../src/index.js"

/** The identity unit itself, on a fresh database of its own (no plan limits, mail recorded). */
const Identity = Layer.unwrapScoped(
  Effect.map(freshDatabase("connector_identity"), (url) => IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url }))))
)

/** Identity served over HTTP/2 gRPC on a free port, and the client this unit asks it with. */
const IdentityOverTheWire = Layer.unwrapScoped(
  Effect.gen(function* () {
    const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
    return IdentityClient.fromTransport(yield* grpcTransport(served.url))
  })
).pipe(Layer.provide(InMemoryBus.layer))

/** The signed token identity gave each caller the helpers below made. */
const tokens = new WeakMap<PrincipalType, string>()

/**
 * OrgAccess.live as this unit's RPC handlers run it: with the caller's principal token (the
 * request's) in the fiber, so identity answers for that caller. Domain tests call the services
 * directly, so this plays the handler's part; identity's answers are its own.
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

/** Orgs whose plan allows this many environments (others: unlimited). */
export const environmentLimits = new Map<string, number>()
/** Orgs whose plan allows this many connectors (others: unlimited). */
export const connectorLimits = new Map<string, number>()
const FakeEntitlements = Layer.succeed(
  Entitlements,
  Entitlements.of({
    requireRoom: (orgId, resource, inUse) => {
      const limit = (resource === "connectors" ? connectorLimits : environmentLimits).get(orgId)
      return limit !== undefined && inUse >= limit ? Effect.fail(new PlanLimitReached({ orgId, resource, limit, planId: "free" })) : Effect.void
    }
  })
)

/** Operations discovery created, by id, with a status tests move on (the operation unit's stand-in). */
export const operations = new Map<string, { orgId: string; connectorId: string; status: StartedStatus }>()
const FakeOperations = Layer.succeed(
  ConnectorOperations,
  ConnectorOperations.of({
    create: ({ id, orgId, resourceId }) => Effect.sync(() => void operations.set(id, { orgId, connectorId: resourceId, status: "pending" })),
    status: (id) => Effect.sync(() => Option.map(Option.fromNullable(operations.get(id)), (o) => o.status))
  })
)

export const testKeys = `t1:${generateSecretKey("t1").split(":")[1]}`
const Secrets = Layer.effect(SecretStore, SecretStore.make(Either.getOrThrow(parseSecretKeys(testKeys)), "t1")).pipe(Layer.orDie)

/**
 * The connector services on a fresh database, with the real identity unit (its services stay in
 * the context), a fake billing and operation unit, real secrets and the offline cloud adapter.
 */
export const connectorTestLayer = () =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("connector_test"), (url) =>
      ConnectorEngines.pipe(
        Layer.provideMerge(ConnectorServices),
        // The local adapter under the temporary directory; these tests never set an engine up.
        Layer.provideMerge(Layer.merge(EngineProvisionerLive, EngineSetupConfig.layerConfig)),
        Layer.provideMerge(
          Layer.mergeAll(
            AccessAsHandled,
            FakeEntitlements,
            FakeOperations,
            Secrets,
            CloudAccounts.offline({ templateUrl: "https://example.com/role.yaml", scionAwsAccountId: "111122223333" }),
            // Short timeouts: unreachable sources in tests should fail fast.
            Layer.succeed(SourceProbe, SourceProbe.make({ connectTimeout: "2 seconds", queryTimeout: "5 seconds" }))
          )
        ),
        Layer.provide(withConfig({ DATABASE_URL: url }))
      )
    )
  ).pipe(Layer.provideMerge(Identity), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

/** The owner of each org the helpers made: who invites members and makes keys. */
const owners = new Map<string, PrincipalType>()

const newUser = (name: string) =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const email = `${name}-${unique()}@example.com`
    const grant = yield* auth.signUp({ email, password: "correct-horse-battery", fullName: `Test ${name}` })
    const authenticated = yield* auth.authenticate(grant.sessionToken)
    tokens.set(authenticated.principal, authenticated.token)
    return { principal: authenticated.principal, email }
  })

/** A new org at identity, made by a new user, its owner. */
export const newOrgId = () =>
  Effect.gen(function* () {
    const owner = yield* newUser("owner")
    const { orgId } = yield* (yield* Orgs).createOrg(owner.principal, { name: "Acme" })
    owners.set(orgId, owner.principal)
    return orgId
  })

const ownerOf = (orgId: string) => Effect.fromNullable(owners.get(orgId)).pipe(Effect.orDieWith(() => new Error(`${orgId} was not made by newOrgId()`)))

/** A new user with a session, invited into each org (made by newOrgId) with the role given, and accepted. */
export const session = (roles: Record<string, string>) =>
  Effect.gen(function* () {
    const user = yield* newUser("user")
    const invites = yield* Invites
    for (const [orgId, role] of Object.entries(roles)) {
      const invite = yield* invites.createInvite(yield* ownerOf(orgId), { orgId, email: user.email, roleKey: role as RoleKey })
      yield* invites.acceptInvite(user.principal, invite.token ?? "")
    }
    return user.principal
  })

/** A new API key of the org (made by newOrgId) holding exactly these permissions (the owner's role, scoped). */
export const apiKey = (orgId: string, permissions: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const created = yield* (yield* ApiKeys).createApiKey(yield* ownerOf(orgId), { orgId, name: "ci", roleId: ROLES.owner.id, scopes: permissions, expiresAt: null, mode: "live" })
    const authenticated = yield* (yield* Auth).authenticate(created.secret)
    tokens.set(authenticated.principal, authenticated.token)
    return authenticated.principal
  })

/** Runs `self` with the caller's principal token, as a client calling this unit over the wire would. */
export const as = (principal: PrincipalType) => withPrincipalToken(tokens.get(principal) ?? "")
