import { ExpirySweeperLive } from "./ExpirySweeper.js"
import type { Transport } from "@connectrpc/connect"
import type { SqlClient } from "@effect/sql"
import { type Bus, IdentityClient, JobWorker, OperationClient, OutboxRelay, type PrincipalVerifier, recordCounts, refreshWhileServingMetrics, ServiceIdentity, unitDatabase, VerifierFromIdentity, PostgresPools } from "@scion/kit"
import { Config, Duration, Effect, Layer } from "effect"
import { OrgAccess } from "./Access.js"
import { BranchOperations } from "./BranchOperations.js"
import { Branches } from "./Branches.js"
import { BranchesRepo } from "./BranchesRepo.js"
import { AcceptedEngines } from "./engine/AcceptedEngines.js"
import { Copier } from "./engine/Copier.js"
import { EngineReadyConsumer } from "./engine/EngineReadyConsumer.js"

import { FreshnessConfig } from "./engine/FreshnessConfig.js"
import { Engines } from "./engine/Engines.js"
import { createJob, deleteJob, resetJob } from "./jobs/jobs.js"
import { snapshotCreateJob, snapshotDeleteJob } from "./jobs/snapshotJobs.js"
import { Passwords } from "./Passwords.js"
import { PlanLimits } from "./PlanLimits.js"
import { Snapshots } from "./Snapshots.js"
import { SnapshotsRepo } from "./SnapshotsRepo.js"

/** The database of the unit: schema `branch`, migrations from ../migrations. */
export const BranchDatabase = unitDatabase({ schema: "branch", migrations: new URL("../migrations/", import.meta.url) })

/** scion_branches{status}, refreshed while the process serves metrics. */
const BranchCounts = refreshWhileServingMetrics(
  "branch counts",
  Effect.flatMap(BranchesRepo, (repo) => Effect.flatMap(repo.countsByStatus, (rows) => recordCounts("scion_branches", "Branches by status (deleted ones left out)", rows)))
)

/** The branch services given access, engines, operations, passwords and the Copier (domain tests provide fakes of the first three). */
export const BranchServices: Layer.Layer<
  Branches | Snapshots | BranchesRepo | SnapshotsRepo | AcceptedEngines | SqlClient.SqlClient,
  never,
  OrgAccess | Engines | BranchOperations | Passwords | PlanLimits | PostgresPools | Copier
> = Branches.Default.pipe(
  Layer.provideMerge(Snapshots.Default),
  Layer.provideMerge(Layer.mergeAll(BranchesRepo.Default, SnapshotsRepo.Default, AcceptedEngines.layer)),
  Layer.provideMerge(BranchDatabase)
)

/**
 * The unit's background work: the relay publishing its outbox and the workers of
 * `jobs.branch.create` and `jobs.branch.delete`. A create is short (about a second), so its
 * deliveries are redelivered after BRANCH_JOB_ACK_WAIT (default 10 s) without a heartbeat, which
 * the worker sends every third of that.
 */
export const BranchWorkers = (options: { readonly relayPollInterval?: Duration.DurationInput } = {}) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const ackWait = yield* Config.duration("BRANCH_JOB_ACK_WAIT").pipe(Config.withDefault(Duration.seconds(10)), Effect.orDie)
      const concurrency = yield* Config.integer("BRANCH_JOB_CONCURRENCY").pipe(Config.withDefault(16), Effect.orDie)
      const heartbeatInterval = Duration.millis(Math.max(200, Duration.toMillis(ackWait) / 3))
      const common = { ackWait, heartbeatInterval, maxAttempts: 4, backoff: [Duration.millis(500), Duration.seconds(2), Duration.seconds(5)] }
      return Layer.mergeAll(
        JobWorker.layer({ ...createJob, ...common, concurrency }),
        JobWorker.layer({ ...deleteJob, ...common, concurrency: 4 }),
        JobWorker.layer({ ...resetJob, ...common, concurrency: 4 }),
        JobWorker.layer({ ...snapshotCreateJob, ...common, concurrency: 4 }),
        JobWorker.layer({ ...snapshotDeleteJob, ...common, concurrency: 4 }),
        // A committed job wakes the relay at once (migrations 0008 and 0010: NOTIFY on branch_outbox);
        // the kit's poll (OUTBOX_POLL_INTERVAL_MS, 200 ms) is the backstop while LISTEN is down.
        // (It was 25 ms while the NOTIFY went unheard: 40 empty transactions a second.)
        OutboxRelay.layer({ ...(options.relayPollInterval !== undefined ? { pollInterval: options.relayPollInterval } : {}), wakeChannel: "branch_outbox" })
      )
    })
  )

/**
 * The branch unit, given a bus and the transports to identity (authorization, verification keys,
 * this unit's service principal), the operation unit, the connector unit (EngineAccessService)
 * and billing (the plan's branch limit):
 * production uses HTTP/2 gRPC and NATS; the embedded mode in-memory transports and bus.
 */
export const branchLive = (transports: {
  readonly identity: Transport
  readonly operation: Transport
  readonly connector: Transport
  readonly billing: Transport
}): Layer.Layer<Branches | Snapshots | PrincipalVerifier, never, Bus> => {
  const identityClient = IdentityClient.fromTransport(transports.identity)
  const service = ServiceIdentity.layer("branch", transports.identity)
  const operations = Layer.merge(service, OperationClient.fromTransport(transports.operation))
  const engines = Engines.fromTransport(transports.connector).pipe(Layer.provide(service))
  const services = BranchServices.pipe(
    // One Copier for the process: the accept warms its mirror sessions, the jobs copy through it.
    Layer.provideMerge(Copier.layerConfig),
    Layer.provideMerge(
      Layer.mergeAll(
        OrgAccess.live.pipe(Layer.provide(identityClient)),
        engines,
        BranchOperations.live.pipe(Layer.provide(operations)),
        Passwords.layerConfig.pipe(Layer.orDie),
        PlanLimits.billing(transports.billing).pipe(Layer.provide(service)),
        // One set of engine session pools for the process, closed with it.
        PostgresPools.layer
      )
    )
  )
  return Layer.mergeAll(
    // The workers and the engine-ready consumer share the services' one Copier: its queue per engine serialises both.
    Layer.merge(BranchWorkers(), EngineReadyConsumer).pipe(Layer.provide(Layer.mergeAll(operations, FreshnessConfig.layerConfig))),
    VerifierFromIdentity.pipe(Layer.provide(identityClient)),
    ExpirySweeperLive,
    BranchCounts
  ).pipe(
    Layer.provideMerge(services)
  )
}

export { OrgAccess, type BranchPermission } from "./Access.js"
export { ExpirySweeperLive } from "./ExpirySweeper.js"
export { BranchOperations, type OperationState } from "./BranchOperations.js"
export { Branches, type BranchView, CREATE_JOB, DELETE_JOB, type Handle } from "./Branches.js"
export { BranchesRepo } from "./BranchesRepo.js"
export { branchResult, branchRoutes, branchToProto } from "./rpc/routes.js"
export { BranchPayload, createJob, deleteJob, resetJob } from "./jobs/jobs.js"
export { snapshotCreateJob, snapshotDeleteJob, SnapshotPayload } from "./jobs/snapshotJobs.js"
export { Snapshots } from "./Snapshots.js"
export { SnapshotsRepo } from "./SnapshotsRepo.js"
export { Copier } from "./engine/Copier.js"
export { EngineReadyConsumer, engineEventsConfig, handleEngineReady } from "./engine/EngineReadyConsumer.js"
export { FreshnessConfig } from "./engine/FreshnessConfig.js"
export { type CopyMark, readHeartbeat, waitForSourcePosition } from "./engine/Freshness.js"
export { AcceptedEngines } from "./engine/AcceptedEngines.js"
export { type BranchingEngine, Engines, isBranchable } from "./engine/Engines.js"
export * from "./engine/EngineSql.js"
export { PlanLimits } from "./PlanLimits.js"
export { generatePassword, parseKeys, PasswordEnvelope, Passwords } from "./Passwords.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
