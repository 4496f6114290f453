import type { Principal as PrincipalType } from "@scion/kit"
import { Principal } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Either, Layer, Logger, LogLevel, Option } from "effect"
import {
  CloudAccounts,
  type ConnectorPermission,
  ConnectorEngines,
  ConnectorServices,
  EngineProvisionerLive,
  EngineSetupConfig,
  ConnectorOperations,
  Entitlements,
  type EnvironmentPermission,
  generateSecretKey,
  NotAMember,
  OrgAccess,
  parseSecretKeys,
  PermissionDenied,
  PlanLimitReached,
  SecretStore,
  SourceProbe,
  type StartedStatus
} from "../src/index.js"

/** Roles as identity's table has them, for environments and connectors. */
const connectorsBuild: ReadonlyArray<ConnectorPermission> = ["connectors.read", "connectors.create", "connectors.update"]
const connectorsManage: ReadonlyArray<ConnectorPermission> = [...connectorsBuild, "connectors.delete", "connectors.admin"]
const ROLE_PERMISSIONS: Record<string, ReadonlyArray<EnvironmentPermission | ConnectorPermission>> = {
  viewer: ["environments.read", "connectors.read"],
  member: ["environments.read", ...connectorsBuild],
  admin: ["environments.read", "environments.manage", ...connectorsManage],
  owner: ["environments.read", "environments.manage", ...connectorsManage]
}

/** userId → orgId → role, as the fake identity knows it. */
export const memberships = new Map<string, Map<string, string>>()

/** OrgAccess without identity: sessions by the table above, API keys in their own org with their permissions. */
const FakeOrgAccess = Layer.succeed(
  OrgAccess,
  OrgAccess.of({
    require: (principal: PrincipalType, orgId, permission) => {
      if (principal.kind === "api_key") {
        if (principal.orgId !== orgId) return Effect.fail(new NotAMember({ orgId }))
        return principal.permissions.includes(permission) ? Effect.void : Effect.fail(new PermissionDenied({ orgId, permission }))
      }
      const role = memberships.get(principal.userId ?? "")?.get(orgId)
      if (role === undefined) return Effect.fail(new NotAMember({ orgId }))
      return ROLE_PERMISSIONS[role]!.includes(permission) ? Effect.void : Effect.fail(new PermissionDenied({ orgId, permission }))
    }
  })
)

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

/** The connector services on a fresh database, with a fake identity and billing, real secrets and the offline cloud adapter. */
export const connectorTestLayer = () =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("connector_test"), (url) =>
      ConnectorEngines.pipe(
        Layer.provideMerge(ConnectorServices),
        // The local adapter under the temporary directory; these tests never set an engine up.
        Layer.provideMerge(Layer.merge(EngineProvisionerLive, EngineSetupConfig.layerConfig)),
        Layer.provideMerge(
          Layer.mergeAll(
            FakeOrgAccess,
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
  ).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`
export const newOrgId = () => `org_${unique()}`

export const session = (roles: Record<string, string>): PrincipalType => {
  const userId = `usr_${unique()}`
  memberships.set(userId, new Map(Object.entries(roles)))
  return new Principal({ kind: "user_session", userId, sessionId: `ses_${unique()}`, apiKeyId: null, orgId: null, roleKey: null, permissions: [], exp: 4_000_000_000 })
}

export const apiKey = (orgId: string, permissions: ReadonlyArray<string>): PrincipalType =>
  new Principal({ kind: "api_key", userId: `usr_${unique()}`, sessionId: null, apiKeyId: `key_${unique()}`, orgId, roleKey: "admin", permissions, exp: 4_000_000_000 })
