import { Projects, type RoleKey } from "@scion/identity"
import { asService, OperationClient, type Principal as PrincipalType } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Either, Layer, Logger, LogLevel } from "effect"
import {
  answeredForCaller,
  asCaller,
  BillingDesk,
  BillingUnitOverTheWire,
  IdentityOverTheWire,
  IdentityUnit,
  IdentityWire,
  IdentityWireLive,
  join,
  newApiKey,
  newOrg,
  newUser,
  OperationUnitOverTheWire
} from "../../../test/support/units.js"
import {
  CloudAccounts,
  ConnectorEngines,
  ConnectorServices,
  EngineProvisionerLive,
  EngineSetupConfig,
  ConnectorOperations,
  Entitlements,
  generateSecretKey,
  OrgAccess,
  parseSecretKeys,
  ProjectDirectory,
  SecretStore,
  SourceProbe
} from "../src/index.js"

/**
 * OrgAccess.live as this unit's RPC handlers run it: with the caller's principal token (the
 * request's) in the fiber, so the identity unit answers for that caller.
 */
const AccessAsHandled = Layer.effect(
  OrgAccess,
  Effect.map(OrgAccess, (live) => OrgAccess.of({ require: answeredForCaller(live.require) }))
).pipe(Layer.provide(OrgAccess.live), Layer.provide(IdentityOverTheWire))

/** Identity's projects, asked for the caller as the unit's handlers do. */
const ProjectsAsHandled = Layer.unwrapEffect(
  Effect.map(IdentityWire, (transport) =>
    Layer.effect(
      ProjectDirectory,
      Effect.map(ProjectDirectory, (live) => ProjectDirectory.of({ inOrg: answeredForCaller(live.inOrg) }))
    ).pipe(Layer.provide(ProjectDirectory.fromTransport(transport)))
  )
)

/** Plan limits from the billing unit itself, asked as production asks (Entitlements.billing, this unit's service principal). */
const EntitlementsFromBilling = Layer.unwrapEffect(Effect.map(BillingDesk, (billing) => Entitlements.billing(billing.transport)))

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
            ProjectsAsHandled,
            EntitlementsFromBilling,
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
    Layer.provideMerge(BillingUnitOverTheWire),
    Layer.provideMerge(OperationUnitOverTheWire("connector")),
    Layer.provideMerge(IdentityWireLive),
    Layer.provideMerge(IdentityUnit),
    Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning))
  )

/** The owner of each org newOrgId made: who invites members and makes keys. */
const owners = new Map<string, PrincipalType>()

/**
 * A new org at identity, made by a new user, its owner, and set up at billing on `plan` (team by
 * default: room for what the tests make; the limit tests ask for free).
 */
export const newOrgId = (plan: "free" | "team" = "team") =>
  Effect.gen(function* () {
    const org = yield* newOrg()
    owners.set(org.orgId, org.owner)
    const billing = yield* BillingDesk
    yield* billing.setUp(org.orgId)
    if (plan !== "free") yield* billing.selectPlan(org.owner, org.orgId, plan)
    return org.orgId
  })

const orgOf = (orgId: string) =>
  Effect.map(Effect.fromNullable(owners.get(orgId)).pipe(Effect.orDieWith(() => new Error(`${orgId} was not made by newOrgId()`))), (owner) => ({ orgId, owner }))

/** A new user with a session, invited into each org (made by newOrgId) with the role given, and accepted. */
export const session = (roles: Record<string, RoleKey>) =>
  Effect.gen(function* () {
    const user = yield* newUser("user")
    for (const [orgId, role] of Object.entries(roles)) yield* join(yield* orgOf(orgId), user, role)
    return user.principal
  })

/** A new API key of the org (made by newOrgId) holding exactly these permissions (the owner's role, scoped). */
export const apiKey = (orgId: string, permissions: ReadonlyArray<string>) => Effect.flatMap(orgOf(orgId), (org) => newApiKey(org, "owner", permissions))

/** A new project of the org (made by newOrgId), made at identity by its owner. */
export const newProjectId = (orgId: string) =>
  Effect.gen(function* () {
    const { owner } = yield* orgOf(orgId)
    const projects = yield* Projects
    return (yield* projects.create(owner, { orgId, name: `project ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}` })).id
  })

/** Runs `self` with the caller's principal token, as a client calling this unit over the wire would. */
export const as = asCaller

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
