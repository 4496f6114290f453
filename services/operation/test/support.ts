import { Principal } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { OperationChanges, OperationServices, OrgAccess } from "../src/index.js"

/** Users' org memberships as the fake identity knows them: userId → orgIds. */
export const memberships = new Map<string, Set<string>>()

/** OrgAccess without identity: API keys act in their own org, sessions in the orgs listed above. */
const FakeOrgAccess = Layer.succeed(
  OrgAccess,
  OrgAccess.of({
    isMember: (principal, orgId) =>
      Effect.succeed(principal.kind === "api_key" ? principal.orgId === orgId : (memberships.get(principal.userId ?? "")?.has(orgId) ?? false))
  })
)

/** The operation services on a fresh database, in-memory change announcements, a fake identity. */
export const operationTestLayer = (config: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(freshDatabase("operation_test"), (url) =>
      OperationServices.pipe(
        Layer.provideMerge(Layer.merge(FakeOrgAccess, OperationChanges.inMemory)),
        Layer.provide(withConfig({ DATABASE_URL: url, ...config }))
      )
    )
  ).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error)))

let counter = 0
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`

export const newOrgId = () => `org_${unique()}`
export const newOperationId = () => `op_${unique()}`

export const apiKeyPrincipal = (orgId: string) =>
  new Principal({ kind: "api_key", userId: null, sessionId: null, apiKeyId: `key_${unique()}`, orgId, roleKey: "member", permissions: ["operations.read"], exp: 4_000_000_000 })

export const sessionPrincipal = (orgIds: ReadonlyArray<string>) => {
  const userId = `usr_${unique()}`
  memberships.set(userId, new Set(orgIds))
  return new Principal({ kind: "user_session", userId, sessionId: `ses_${unique()}`, apiKeyId: null, orgId: null, roleKey: null, permissions: [], exp: 4_000_000_000 })
}
