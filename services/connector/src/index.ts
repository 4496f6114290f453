import type { Transport } from "@connectrpc/connect"
import type { SqlClient } from "@effect/sql"
import { type Bus, JobWorker, OperationClient, OutboxRelay, type PrincipalVerifier, ServiceIdentity, unitDatabase } from "@scion/kit"
import { Duration, Layer } from "effect"
import { CloudAccounts } from "./CloudAccounts.js"
import { Connectors } from "./connectors/Connectors.js"
import { ConnectorsRepo } from "./connectors/ConnectorsRepo.js"
import { deleteJob, Deletion, SourceCleaner } from "./connectors/Deletion.js"
import { Discovery, DiscoveryOperations, discoveryJob } from "./connectors/Discovery.js"
import { SourceProbe } from "./connectors/Preflight.js"
import { SourceIntrospector } from "./connectors/SchemaIntrospection.js"
import { Entitlements } from "./Entitlements.js"
import { Environments } from "./Environments.js"
import { EnvironmentsRepo } from "./EnvironmentsRepo.js"
import { IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
import { EventsBus, ProjectEventsConsumer } from "./ProjectEvents.js"
import { SecretStore } from "./secrets/SecretStore.js"

/** The database of the unit: schema `connector`, migrations from ../migrations. */
export const ConnectorDatabase = unitDatabase({ schema: "connector", migrations: new URL("../migrations/", import.meta.url) })

/**
 * The connector services given an access policy, plan limits, a cloud adapter, a secret store,
 * a source probe and the operations discovery starts. Domain tests provide fakes of the first two
 * and of the operations, and real ones of the rest here.
 */
export const ConnectorServices: Layer.Layer<
  Environments | EnvironmentsRepo | Connectors | ConnectorsRepo | Discovery | Deletion | SqlClient.SqlClient,
  never,
  OrgAccess | Entitlements | CloudAccounts | SecretStore | SourceProbe | DiscoveryOperations
> = Layer.merge(Discovery.Default, Deletion.Default).pipe(
  Layer.provideMerge(Layer.merge(Environments.Default, Connectors.Default)),
  Layer.provideMerge(Layer.merge(EnvironmentsRepo.Default, ConnectorsRepo.Default)),
  Layer.provideMerge(ConnectorDatabase)
)

/**
 * The unit's background work: the relay publishing its outbox, the discovery worker consuming
 * `jobs.connector.discovery`, the delete worker consuming `jobs.connector.delete`
 * (ARCHITECTURE.md, "Asynchronous work") and the consumer of identity's `events.project.deleted`.
 */
export const ConnectorWorkers = (options: { readonly relayPollInterval?: Duration.DurationInput } = {}) =>
  Layer.mergeAll(
    JobWorker.layer({ ...discoveryJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    JobWorker.layer({ ...deleteJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    OutboxRelay.layer(options.relayPollInterval !== undefined ? { pollInterval: options.relayPollInterval } : {}),
    ProjectEventsConsumer
  )

/** A failed SecretStore configuration stops the unit at start: it cannot store secrets without keys. */
const Secrets = SecretStore.layerConfig.pipe(Layer.orDie)

/**
 * The connector unit, given a client of identity, a bus and the transports to identity (for its
 * service principal), billing and the operation unit: production uses HTTP/2 gRPC and NATS; the
 * embedded mode in-memory transports and bus. Provides what connectorRoutes needs and runs the
 * unit's workers for the life of the layer.
 */
export const connectorLive = (transports: {
  readonly identity: Transport
  readonly billing: Transport
  readonly operation: Transport
}): Layer.Layer<Environments | Connectors | Discovery | Deletion | PrincipalVerifier, never, IdentityClient | Bus | EventsBus> => {
  const service = ServiceIdentity.layer("connector", transports.identity)
  const operations = Layer.merge(service, OperationClient.fromTransport(transports.operation))
  const services = ConnectorServices.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        OrgAccess.live,
        Entitlements.billing(transports.billing).pipe(Layer.provide(service)),
        CloudAccounts.layerConfig,
        Secrets,
        SourceProbe.layerConfig,
        DiscoveryOperations.live.pipe(Layer.provide(operations))
      )
    )
  )
  return Layer.merge(ConnectorWorkers().pipe(Layer.provide(Layer.mergeAll(operations, SourceIntrospector.layerConfig, SourceCleaner.layerConfig))), VerifierFromIdentity).pipe(
    Layer.provideMerge(services)
  )
}

export { connectorRoutes } from "./rpc/routes.js"
export { categoryOf, GithubDetails, isSupportedService, PostgresDetails, validateDetails, type ValidDetails } from "./connectors/ConnectionDetails.js"
export { Connectors, connectorSecretAad, type ConnectorView } from "./connectors/Connectors.js"
export {
  type DatabaseCleanup,
  DELETE_JOB,
  deleteJob,
  DeletePayload,
  type DeleteStarted,
  Deletion,
  SourceCleaner
} from "./connectors/Deletion.js"
export { EventsBus, handleProjectEvent, PROJECT_DELETED, ProjectEventsConsumer, projectEventsConfig } from "./ProjectEvents.js"
export { Discovery, DISCOVERY_JOB, discoveryJob, DiscoveryOperations, DiscoveryPayload, type DiscoveryStarted, type StartedStatus } from "./connectors/Discovery.js"
export * from "./connectors/SchemaIntrospection.js"
export { MAX_SELECTED_PATHS, resolveSelection } from "./connectors/Selection.js"
export { applyDecisions, DECISIONS, type Decision, preflightAfterDiscovery, type ReplicaIdentityPreflight } from "./connectors/ReplicaIdentity.js"
export { type GrantScript, grantScript, publicationName, quoteIdent } from "./connectors/GrantScript.js"
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
export { type Engine, EngineError, EngineNotFound, EngineProvisioner, type EngineState, type EngineStatus } from "./engine/EngineProvisioner.js"
export { embeddedPostgresBinDir, LocalEngineConfig, type LocalEngineOptions, LocalEngineProvisionerLive, makeLocalEngineProvisioner } from "./engine/LocalEngineProvisioner.js"
export { connectorIdLabel, engineHost, engineName, generateMaterial, KubernetesEngineConfig, type KubernetesEngineOptions, KubernetesEngineProvisionerLive, makeKubernetesEngineProvisioner, renderEngine, selfSignedCertificate } from "./engine/KubernetesEngineProvisioner.js"
