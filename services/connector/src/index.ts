import type { Transport } from "@connectrpc/connect"
import { ProjectDirectory } from "./ProjectDirectory.js"
import type { SqlClient } from "@effect/sql"
import { type Bus, JobWorker, OperationClient, OutboxRelay, type PrincipalVerifier, recordCounts, refreshWhileServingMetrics, ServiceIdentity, unitDatabase } from "@scion/kit"
import { Config, Duration, Effect, Layer } from "effect"
import { CloudAccounts } from "./CloudAccounts.js"
import { Connectors } from "./connectors/Connectors.js"
import { ConnectorsRepo } from "./connectors/ConnectorsRepo.js"
import { deleteJob, Deletion, secretPurgeJob, SourceCleaner } from "./connectors/Deletion.js"
import { DeletionRepo } from "./connectors/DeletionRepo.js"
import { Discovery, ConnectorOperations, discoveryJob } from "./connectors/Discovery.js"
import { SourceProbe } from "./connectors/Preflight.js"
import { SourceIntrospector } from "./connectors/SchemaIntrospection.js"
import { Entitlements } from "./Entitlements.js"
import { Environments } from "./Environments.js"
import { EnvironmentsRepo } from "./EnvironmentsRepo.js"
import { IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
import { ProjectEventsConsumer } from "./ProjectEvents.js"
import { SecretStore } from "./secrets/SecretStore.js"
import { ConnectorBranches } from "./connectors/ConnectorBranches.js"
import { EngineAccess } from "./engine/EngineAccess.js"
import { EngineProvisioner } from "./engine/EngineProvisioner.js"
import { EngineSetup, EngineSetupConfig, engineSetupJob } from "./engine/EngineSetup.js"
import { KubernetesEngineProvisionerLive } from "./engine/KubernetesEngineProvisioner.js"
import { LocalEngineProvisionerLive } from "./engine/LocalEngineProvisioner.js"
import { QuarantineMonitorLive } from "./engine/QuarantineMonitor.js"
import { Quarantine } from "./engine/Quarantine.js"
import { Readiness } from "./engine/Readiness.js"
import { SchemaChanges, SchemaFollowerLive } from "./replication/SchemaFollower.js"
import { pipelineJob } from "./replication/Pipelines.js"
import { PipelinesRepo } from "./replication/PipelinesRepo.js"
import { EngineSetupRepo } from "./engine/EngineSetupRepo.js"
import { ReadinessRepo } from "./engine/ReadinessRepo.js"
import { QuarantineRepo } from "./engine/QuarantineRepo.js"

/** The database of the unit: schema `connector`, migrations from ../migrations. */
export const ConnectorDatabase = unitDatabase({ schema: "connector", migrations: new URL("../migrations/", import.meta.url) })

/**
 * The connector services given an access policy, plan limits, a cloud adapter, a secret store,
 * a source probe and the operations discovery starts. Domain tests provide fakes of the first two
 * and of the operations, and real ones of the rest here.
 */
export const ConnectorServices: Layer.Layer<
  Environments | EnvironmentsRepo | Connectors | ConnectorsRepo | DeletionRepo | Discovery | Deletion | SqlClient.SqlClient,
  never,
  OrgAccess | Entitlements | CloudAccounts | SecretStore | SourceProbe | ConnectorOperations | ProjectDirectory
> = Layer.merge(Discovery.Default, Deletion.Default).pipe(
  Layer.provideMerge(Layer.merge(Environments.Default, Connectors.Default)),
  Layer.provideMerge(Layer.mergeAll(EnvironmentsRepo.Default, ConnectorsRepo.Default, DeletionRepo.Default)),
  Layer.provideMerge(ConnectorDatabase)
)

/** Engine setup, readiness and quarantine reads, and engine access for other units. */
export const ConnectorEngines = Layer.mergeAll(EngineSetup.Default, Readiness.Default, Quarantine.Default, EngineAccess.Default, SchemaChanges.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(PipelinesRepo.Default, EngineSetupRepo.Default, ReadinessRepo.Default, QuarantineRepo.Default))
)

/**
 * The unit's background work: the relay publishing its outbox, the discovery worker consuming
 * `jobs.connector.discovery`, the delete worker consuming `jobs.connector.delete`, the engine
 * setup worker consuming `jobs.connector.engine_setup` (ARCHITECTURE.md, "Asynchronous work"),
 * the consumer of identity's `events.project.deleted` and the quarantine monitor.
 */
export const ConnectorWorkers = (options: { readonly relayPollInterval?: Duration.DurationInput } = {}) =>
  Layer.mergeAll(
    JobWorker.layer({ ...discoveryJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    JobWorker.layer({ ...deleteJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    JobWorker.layer({ ...secretPurgeJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    // Setup steps are idempotent, so a redelivery after a crash resumes; a step's own failure
    // fails the operation (JobFailed) instead of being retried. ENGINE_SETUP_ACK_WAIT (default
    // 60 s) is how long a crashed worker's setup waits for redelivery; heartbeats every third.
    Layer.unwrapEffect(
      Effect.map(Config.duration("ENGINE_SETUP_ACK_WAIT").pipe(Config.withDefault(Duration.seconds(60)), Effect.orDie), (ackWait) =>
        JobWorker.layer({
          ...engineSetupJob,
          concurrency: 2,
          maxAttempts: 3,
          backoff: [Duration.seconds(2), Duration.seconds(10)],
          ackWait,
          heartbeatInterval: Duration.millis(Math.max(200, Duration.toMillis(ackWait) / 3))
        })
      )
    ),
    // A committed job wakes the relay at once (migration 0010's NOTIFY); the poll is the backstop.
    OutboxRelay.layer({ ...(options.relayPollInterval !== undefined ? { pollInterval: options.relayPollInterval } : {}), wakeChannel: "connector_outbox" }),
    // Cutovers, rollbacks and cleanups of pipelines: short, each its own operation.
    JobWorker.layer({ ...pipelineJob, concurrency: 2, maxAttempts: 3, backoff: [Duration.seconds(1), Duration.seconds(5)] }),
    ProjectEventsConsumer,
    QuarantineMonitorLive,
    SchemaFollowerLive,
    // scion_connectors{branching_engine_status}, refreshed while the process serves metrics.
    refreshWhileServingMetrics(
      "connector counts",
      Effect.flatMap(ConnectorsRepo, (repo) => Effect.flatMap(repo.countsByEngineStatus, (rows) => recordCounts("scion_connectors", "Connectors by the state of their branching engine", rows)))
    )
  )

/**
 * The engine provisioner ENGINE_PROVISIONER names: `local` (default; initdb/pg_ctl under
 * ENGINE_DATA_DIR) or `kubernetes` (a StatefulSet per engine). A failed configuration stops the
 * unit at start.
 */
export const EngineProvisionerLive: Layer.Layer<EngineProvisioner> = Layer.unwrapEffect(
  Effect.map(Config.literal("local", "kubernetes")("ENGINE_PROVISIONER").pipe(Config.withDefault("local" as const)), (kind) =>
    kind === "kubernetes" ? KubernetesEngineProvisionerLive : LocalEngineProvisionerLive
  )
).pipe(Layer.orDie)

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
  /** The branch unit: a connector's branches are deleted before its engine. */
  readonly branch: Transport
}): Layer.Layer<
  Environments | Connectors | Discovery | Deletion | EngineSetup | Readiness | Quarantine | SchemaChanges | EngineAccess | OrgAccess | PrincipalVerifier | EngineProvisioner,
  never,
  IdentityClient | Bus
> => {
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
        ConnectorOperations.live.pipe(Layer.provide(operations)),
        ProjectDirectory.fromTransport(transports.identity)
      )
    )
  )
  const engines = ConnectorEngines.pipe(
    Layer.provideMerge(services),
    Layer.provideMerge(Layer.merge(EngineProvisionerLive, EngineSetupConfig.layerConfig))
  )
  return Layer.merge(
    ConnectorWorkers().pipe(
      Layer.provide(
        Layer.mergeAll(operations, SourceIntrospector.layerConfig, SourceCleaner.layerConfig, ConnectorBranches.fromTransport(transports.branch).pipe(Layer.provide(service)))
      )
    ),
    VerifierFromIdentity
  ).pipe(Layer.provideMerge(engines))
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
  SECRET_PURGE_JOB,
  secretPurgeJob,
  SecretPurgePayload,
  SourceCleaner
} from "./connectors/Deletion.js"
export { handleProjectEvent, PROJECT_DELETED, ProjectEventsConsumer, projectEventsConfig } from "./ProjectEvents.js"
export { Discovery, DISCOVERY_JOB, discoveryJob, ConnectorOperations, DiscoveryPayload, type DiscoveryStarted, type StartedStatus } from "./connectors/Discovery.js"
export * from "./connectors/SchemaIntrospection.js"
export { MAX_SELECTED_PATHS, resolveSelection } from "./connectors/Selection.js"
export { applyDecisions, DECISIONS, type Decision, preflightAfterDiscovery, type ReplicaIdentityPreflight } from "./connectors/ReplicaIdentity.js"
export { type GrantScript, grantScript, publicationName } from "./connectors/GrantScript.js"
export { CONNECTION_DETAILS, ConnectorsRepo } from "./connectors/ConnectorsRepo.js"
export { detectProvider, type PreflightCheck, type PreflightReport, type ProbeOutcome, type ProviderMarkers, reportOf, type SourceFacts, SourceProbe } from "./connectors/Preflight.js"
export { CloudAccounts, parseRoleArn, type RoleCheck, type SetupLinkInput } from "./CloudAccounts.js"
export { Entitlements, type LimitedResource } from "./Entitlements.js"
export { environmentName, Environments, fingerprintOf, secretAad } from "./Environments.js"
export { DB_PROVIDER_API_KEY, EnvironmentsRepo } from "./EnvironmentsRepo.js"
export { ProjectDirectory } from "./ProjectDirectory.js"
export { type AccessError, type ConnectorPermission, type EnvironmentPermission, IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
export { Envelope, generateSecretKey, type MasterKey, parseSecretKeys, SecretStore } from "./secrets/SecretStore.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
export { type Engine, EngineError, EngineNotFound, EngineProvisioner, type EngineState, type EngineStatus } from "./engine/EngineProvisioner.js"
export { embeddedPostgresBinDir, LocalEngineConfig, type LocalEngineOptions, LocalEngineProvisionerLive, makeLocalEngineProvisioner } from "./engine/LocalEngineProvisioner.js"
export { CodeHost, CodeHostUnavailable, CredentialsRefused, InstallationNotFound, InvalidPrivateKey, RepoNotFound, type RepoRef } from "./codehost/CodeHost.js"
export { CodeHostValidation, parseRepo, type AuthValidation, type RepoValidation } from "./codehost/CodeHostValidation.js"
export { githubConfig, GithubCodeHostLive, makeGithubCodeHost } from "./codehost/GithubCodeHost.js"
export { signAppJwt } from "./codehost/AppJwt.js"
export { codeHostRoutes } from "./codehost/rpc.js"
export { EngineAccess, type BranchingEngineView } from "./engine/EngineAccess.js"
export {
  type BranchingEngineStatus,
  ENGINE_SETUP_JOB,
  EngineSetup,
  EngineSetupConfig,
  engineSetupJob,
  EngineSetupPayload,
  MIRROR_DATABASE,
  replicationNames,
  setupPrerequisites,
  subscriptionConninfo
} from "./engine/EngineSetup.js"
export { readMirrorDdl, type MirrorDdl, type TableRef } from "./engine/MirrorSchema.js"
export { Quarantine } from "./engine/Quarantine.js"
export { Readiness } from "./engine/Readiness.js"
export { connectorIdLabel, engineHost, engineName, generateMaterial, KubernetesEngineConfig, type KubernetesEngineOptions, KubernetesEngineProvisionerLive, makeKubernetesEngineProvisioner, renderEngine, selfSignedCertificate } from "./engine/KubernetesEngineProvisioner.js"
export { makeQuarantineMonitor, QuarantineMonitorConfig, QuarantineMonitorLive, type QuarantineReason } from "./engine/QuarantineMonitor.js"
export { BranchesUnavailable, ConnectorBranches } from "./connectors/ConnectorBranches.js"
