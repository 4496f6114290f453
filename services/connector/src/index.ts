import type { Transport } from "@connectrpc/connect"
import type { SqlClient } from "@effect/sql"
import { type PrincipalVerifier, ServiceIdentity, unitDatabase } from "@scion/kit"
import { Layer } from "effect"
import { CloudAccounts } from "./CloudAccounts.js"
import { Connectors } from "./connectors/Connectors.js"
import { ConnectorsRepo } from "./connectors/ConnectorsRepo.js"
import { SourceProbe } from "./connectors/Preflight.js"
import { Entitlements } from "./Entitlements.js"
import { Environments } from "./Environments.js"
import { EnvironmentsRepo } from "./EnvironmentsRepo.js"
import { IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
import { SecretStore } from "./secrets/SecretStore.js"

/** The database of the unit: schema `connector`, migrations from ../migrations. */
export const ConnectorDatabase = unitDatabase({ schema: "connector", migrations: new URL("../migrations/", import.meta.url) })

/**
 * The connector services given an access policy, plan limits, a cloud adapter, a secret store
 * and a source probe. Domain tests provide fakes of the first two and real ones of the rest here.
 */
export const ConnectorServices: Layer.Layer<
  Environments | EnvironmentsRepo | Connectors | ConnectorsRepo | SqlClient.SqlClient,
  never,
  OrgAccess | Entitlements | CloudAccounts | SecretStore | SourceProbe
> = Layer.merge(Environments.Default, Connectors.Default).pipe(
  Layer.provideMerge(Layer.merge(EnvironmentsRepo.Default, ConnectorsRepo.Default)),
  Layer.provideMerge(ConnectorDatabase)
)

/** A failed SecretStore configuration stops the unit at start: it cannot store secrets without keys. */
const Secrets = SecretStore.layerConfig.pipe(Layer.orDie)

/**
 * The connector unit, given a client of identity and the transports to identity (for its service
 * principal) and billing: production uses `connectorLiveConfig`; the embedded mode in-memory
 * transports. Provides what connectorRoutes needs.
 */
export const connectorLive = (transports: {
  readonly identity: Transport
  readonly billing: Transport
}): Layer.Layer<Environments | Connectors | PrincipalVerifier, never, IdentityClient> =>
  Layer.merge(
    ConnectorServices.pipe(
      Layer.provide(
        Layer.mergeAll(
          OrgAccess.live,
          Entitlements.billing(transports.billing).pipe(Layer.provide(ServiceIdentity.layer("connector", transports.identity))),
          CloudAccounts.layerConfig,
          Secrets,
          SourceProbe.layerConfig
        )
      )
    ),
    VerifierFromIdentity
  )

export { connectorRoutes } from "./rpc/routes.js"
export { categoryOf, GithubDetails, isSupportedService, PostgresDetails, validateDetails, type ValidDetails } from "./connectors/ConnectionDetails.js"
export { Connectors, connectorSecretAad, type ConnectorView } from "./connectors/Connectors.js"
export { CONNECTION_DETAILS, ConnectorsRepo } from "./connectors/ConnectorsRepo.js"
export { detectProvider, type PreflightCheck, type PreflightReport, type ProbeOutcome, type ProviderMarkers, reportOf, type SourceFacts, SourceProbe } from "./connectors/Preflight.js"
export { CloudAccounts, parseRoleArn, type RoleCheck, type SetupLinkInput } from "./CloudAccounts.js"
export { Entitlements, type LimitedResource } from "./Entitlements.js"
export { environmentName, Environments, fingerprintOf, secretAad } from "./Environments.js"
export { DB_PROVIDER_API_KEY, EnvironmentsRepo } from "./EnvironmentsRepo.js"
export { type AccessError, type ConnectorPermission, type EnvironmentPermission, IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
export { Envelope, generateSecretKey, type MasterKey, parseSecretKeys, SecretStore } from "./secrets/SecretStore.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
