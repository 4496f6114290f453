import { ApiKeys, Auth, IdentityServices, identityRoutes, Invites, Orgs, RecordingMailer, ROLES, type RoleKey } from "@scion/identity"
import type { Transport } from "@connectrpc/connect"
import {
  asService,
  grpcTransport,
  InMemoryBus,
  OperationClient,
  type Principal as PrincipalType,
  serveHttp2,
  ServiceIdentity,
  withPrincipalToken
} from "@scion/kit"
import { OperationChanges, OperationLive, operationRoutes } from "@scion/operation"
import {
  BillingServices,
  billingRoutes,
  OrgAccess as BillingAccess,
  PaymentProvider,
  Subscriptions,
  VerifierFromIdentity as BillingVerifier
} from "@scion/billing"
import { OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Context, Effect, Either, Layer, Logger, LogLevel, Redacted } from "effect"
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
  SecretStore,
  SourceProbe,
} from "../src/index.js"

/** What the deployment gives identity and its units' workers (IssueServiceToken). */
const SERVICE_CREDENTIAL = "connector-test-service-credential"

/** The identity unit itself, on a fresh database of its own (no plan limits, mail recorded). */
const Identity = Layer.unwrapScoped(
  Effect.map(freshDatabase("connector_identity"), (url) =>
    IdentityServices.pipe(Layer.provideMerge(RecordingMailer), Layer.provide(withConfig({ DATABASE_URL: url, SERVICE_CREDENTIAL })))
  )
)

/** Identity served over HTTP/2 gRPC on a free port: the transport every unit here asks it over. */
class IdentityWire extends Context.Tag("test/IdentityWire")<IdentityWire, Transport>() {}
const IdentityWireLive = Layer.scoped(
  IdentityWire,
  Effect.gen(function* () {
    const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
    return yield* grpcTransport(served.url)
  })
)
const IdentityOverTheWire = Layer.unwrapEffect(Effect.map(IdentityWire, (transport) => IdentityClient.fromTransport(transport))).pipe(Layer.provide(InMemoryBus.layer))

/**
 * The operation unit itself, on a database of its own, asking identity over the wire and served
 * over HTTP/2 gRPC; this unit reaches it as production does, with the service principal identity
 * issues it (ConnectorOperations.live), and so do the helpers below that stand for the workers.
 */
const OperationUnit = Layer.unwrapScoped(
  Effect.gen(function* () {
    const url = yield* freshDatabase("connector_operation")
    const unit = yield* Layer.build(
      OperationLive.pipe(Layer.provide(Layer.merge(IdentityOverTheWire, OperationChanges.inMemory)), Layer.provide(withConfig({ DATABASE_URL: url })))
    )
    const served = yield* Effect.provide(
      Effect.flatMap(operationRoutes, (routes) => serveHttp2({ port: 0, host: "127.0.0.1", routes })),
      unit
    )
    const service = yield* ServiceIdentity.make("connector", yield* IdentityWire, Redacted.make(SERVICE_CREDENTIAL))
    return Layer.merge(OperationClient.fromTransport(yield* grpcTransport(served.url)), Layer.succeed(ServiceIdentity, service))
  })
)

/** Billing as the helpers below use it: an org set up (as its org.created consumer does) and a plan chosen. */
class BillingDesk extends Context.Tag("test/BillingDesk")<
  BillingDesk,
  {
    readonly setUp: (orgId: string) => Effect.Effect<void>
    readonly selectPlan: (owner: PrincipalType, orgId: string, planId: string) => Effect.Effect<void>
  }
>() {}

/**
 * The billing unit itself, on a database of its own (the local payment provider: checkout completes
 * at once), asking identity over the wire and served over HTTP/2 gRPC; this unit checks plan limits
 * with it as production does (Entitlements.billing, with the service principal identity issues).
 */
const BillingUnit = Layer.unwrapScoped(
  Effect.gen(function* () {
    const url = yield* freshDatabase("connector_billing")
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
    const desk = BillingDesk.of({
      setUp: (orgId) => Effect.asVoid(subscriptions.setUpOrg({ org_id: orgId, created_at: new Date().toISOString() }, `org.created.${orgId}`)),
      selectPlan: (owner, orgId, planId) => Effect.orDie(Effect.asVoid(withPrincipalToken(tokens.get(owner) ?? "")(subscriptions.selectPlan(owner, orgId, planId))))
    })
    return Layer.merge(Entitlements.billing(yield* grpcTransport(served.url)), Layer.succeed(BillingDesk, desk))
  })
)

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

export const testKeys = `t1:${generateSecretKey("t1").split(":")[1]}`
const Secrets = Layer.effect(SecretStore, SecretStore.make(Either.getOrThrow(parseSecretKeys(testKeys)), "t1")).pipe(Layer.orDie)

/**
 * The connector services on a fresh database, with the real identity unit (its services stay in
 * the context), operation unit and billing unit, real secrets and the offline cloud adapter.
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
            ConnectorOperations.live,
            Secrets,
            CloudAccounts.offline({ templateUrl: "https://example.com/role.yaml", scionAwsAccountId: "111122223333" }),
            // Short timeouts: unreachable sources in tests should fail fast.
            Layer.succeed(SourceProbe, SourceProbe.make({ connectTimeout: "2 seconds", queryTimeout: "5 seconds" }))
          )
        ),
        Layer.provide(withConfig({ DATABASE_URL: url }))
      )
    )
  ).pipe(
    Layer.provideMerge(BillingUnit),
    Layer.provideMerge(OperationUnit),
    Layer.provideMerge(IdentityWireLive),
    Layer.provideMerge(Identity),
    Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning))
  )

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

/**
 * A new org at identity, made by a new user, its owner, and set up at billing on `plan` (team by
 * default: room for what the tests make; the limit tests ask for free).
 */
export const newOrgId = (plan: "free" | "team" = "team") =>
  Effect.gen(function* () {
    const owner = yield* newUser("owner")
    const { orgId } = yield* (yield* Orgs).createOrg(owner.principal, { name: "Acme" })
    owners.set(orgId, owner.principal)
    const billing = yield* BillingDesk
    yield* billing.setUp(orgId)
    if (plan !== "free") yield* billing.selectPlan(owner.principal, orgId, plan)
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

type OperationState = "pending" | "running" | "completed" | "failed"
const states: Partial<Record<OperationStatus, OperationState>> = {
  [OperationStatus.PENDING]: "pending",
  [OperationStatus.RUNNING]: "running",
  [OperationStatus.COMPLETED]: "completed",
  [OperationStatus.FAILED]: "failed"
}

/** An operation as the operation unit holds it, asked as this unit's service principal. */
export const operationOf = (id: string) =>
  Effect.gen(function* () {
    const client = yield* OperationClient
    const { operation } = yield* asService(client.getOperation({ id, waitSeconds: 0 }))
    return { orgId: operation!.orgId, connectorId: operation!.resourceId, status: states[operation!.status] }
  }).pipe(Effect.orDie)

/** The operations of a resource (a connector), oldest first. */
export const operationsOf = (orgId: string, resourceId: string) =>
  Effect.gen(function* () {
    const client = yield* OperationClient
    const { operations } = yield* asService(client.listOperations({ orgId, resourceId }))
    return operations.map((o) => ({ id: o.id, status: states[o.status] }))
  }).pipe(Effect.orDie)

/** What the worker runtime reports: the operation moves to `status` (running first when it was pending). */
export const moveOperation = (id: string, status: Exclude<OperationState, "pending">) =>
  Effect.gen(function* () {
    const client = yield* OperationClient
    const current = yield* operationOf(id)
    // Already over (a redelivered job ran again): nothing to report.
    if (current.status === "completed" || current.status === "failed") return
    if (current.status === "pending" && status !== "running") yield* asService(client.reportOperation({ id, status: OperationStatus.RUNNING }))
    if (status === "running") {
      if (current.status === "pending") yield* asService(client.reportOperation({ id, status: OperationStatus.RUNNING }))
      return
    }
    yield* asService(
      client.reportOperation(status === "failed" ? { id, status: OperationStatus.FAILED, error: "failed in the test" } : { id, status: OperationStatus.COMPLETED, result: {} })
    )
  }).pipe(Effect.asVoid, Effect.orDie)
