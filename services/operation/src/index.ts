import { Draining, type PrincipalVerifier, recordCounts, refreshWhileServingMetrics, unitDatabase } from "@scion/kit"
import { Effect, Layer } from "effect"
import { OperationConfig } from "./config.js"
import { IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
import { OperationChanges } from "./OperationChanges.js"
import { Operations } from "./Operations.js"
import { OperationsRepo } from "./OperationsRepo.js"
import { SweeperLive } from "./Sweeper.js"

/** The database of the unit: schema `operation`, migrations from ../migrations. */
export const OperationDatabase = unitDatabase({ schema: "operation", migrations: new URL("../migrations/", import.meta.url) })

const Config = OperationConfig.Default.pipe(Layer.orDie)

/** scion_operations{type,status}, refreshed while the process serves metrics. */
const OperationCounts = refreshWhileServingMetrics(
  "operation counts",
  Effect.flatMap(OperationsRepo, (repo) => Effect.flatMap(repo.countsByTypeAndStatus, (rows) => recordCounts("scion_operations", "Operations by type and status", rows)))
)

/**
 * The operation services and the sweeper, given an OrgAccess policy and an OperationChanges
 * adapter (OrgAccess.live over identity in production, embedded and tests).
 */
export const OperationServices: Layer.Layer<Operations | OperationsRepo | OperationConfig | Draining, never, OrgAccess | OperationChanges> = Layer.mergeAll(
  Operations.Default,
  SweeperLive,
  OperationCounts
).pipe(
  Layer.provideMerge(OperationsRepo.Default),
  Layer.provideMerge(Config),
  Layer.provideMerge(OperationDatabase),
  // Waits answer what they have when the server begins to drain (kit serveUnitLayer announces it).
  Layer.provideMerge(Draining.layer(500))
)

/**
 * The operation unit, given a client of identity and a change-announcement adapter: production
 * uses `IdentityClient.layerConfig` + `OperationChanges.nats`; the embedded mode an in-memory
 * transport + `OperationChanges.inMemory`. Provides what operationRoutes needs.
 */
export const OperationLive: Layer.Layer<Operations | PrincipalVerifier | Draining, never, IdentityClient | OperationChanges> = Layer.merge(
  OperationServices.pipe(Layer.provide(OrgAccess.live)),
  VerifierFromIdentity
)

export { operationRoutes } from "./rpc/routes.js"
export { OperationConfig } from "./config.js"
export { IdentityClient, OPERATIONS_READ, OrgAccess, VerifierFromIdentity } from "./Identity.js"
export { changedSubject, OperationChanges, type ChangeSubscription } from "./OperationChanges.js"
export { MAX_WAIT_SECONDS, OPERATION_ID, Operations } from "./Operations.js"
export { OperationsRepo } from "./OperationsRepo.js"
export { staleMessage, sweepOnce, SweeperLive } from "./Sweeper.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
export { canonicalJson, decide, validateReport, type Changes, type Decision } from "./domain/stateMachine.js"
