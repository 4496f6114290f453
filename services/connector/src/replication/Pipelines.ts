import type { JsonObject } from "@bufbuild/protobuf"
import { enqueueJob, JobFailed, type JobHandler, newOperationId, type OperationEnded, quoteIdent, type RpcError } from "@scion/kit"
import { Config, Duration, Effect, Option, Schema } from "effect"
import { ConnectorOperations } from "../connectors/Discovery.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import type { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import type { SecretStore } from "../secrets/SecretStore.js"
import { EngineProvisioner } from "../engine/EngineProvisioner.js"
import { engineSession, PgStepFailed, sourceSession } from "../engine/PgSession.js"
import { dropSubscriptionKeepingSlot } from "../engine/EngineReplication.js"
import { type PipelineNames, pipelineNames } from "./PipelineNames.js"
import { type PipelineRow, PipelinesRepo } from "./PipelinesRepo.js"

/**
 * Pipelines beside the active one (ARCHITECTURE.md, "Pipelines, schema changes and freshness"):
 * a deep reset builds a shadow pipeline while branches keep being cut from the active mirror;
 * `connector_cdc_cutover` switches branch creation to it in one transaction; the replaced pipeline
 * keeps replicating for `PIPELINE_ROLLBACK_GRACE`, during which `connector_replication_rollback`
 * switches back; then `connector_cdc_shadow_cleanup` drops its subscription, mirror, slot and
 * publication. The active pipeline's names are the engines row's (what EngineAccessService
 * answers the branch unit), so switching is an update of that row.
 */

/** Subject `jobs.connector.pipeline`, durable `connector-pipeline`: cutovers, rollbacks and cleanups. */
export const PIPELINE_JOB = { unit: "connector", type: "pipeline" } as const

export const PipelinePayload = Schema.Struct({
  connector_id: Schema.String,
  action: Schema.Literal("cutover", "rollback", "cleanup"),
  pipeline_id: Schema.String
})
export type PipelinePayload = typeof PipelinePayload.Type

const operationTypeOf = {
  cutover: "connector_cdc_cutover",
  rollback: "connector_replication_rollback",
  cleanup: "connector_cdc_shadow_cleanup"
} as const satisfies Record<PipelinePayload["action"], string>

const operationPrefixOf = { cutover: "cut", rollback: "rbk", cleanup: "cln" } as const satisfies Record<PipelinePayload["action"], string>



export const namesOf = (row: PipelineRow): PipelineNames => ({
  publication: row.publication_name,
  slot: row.slot_name,
  subscription: row.subscription_name,
  mirrorDatabase: row.mirror_database
})

/** PIPELINE_ROLLBACK_GRACE (default 1 hour): how long a replaced pipeline is kept for a rollback. */
export const PipelineConfig = Config.all({ rollbackGrace: Config.duration("PIPELINE_ROLLBACK_GRACE").pipe(Config.withDefault(Duration.hours(1))) })

/** The deep reset's pipeline: found again by its operation on a redelivery, else the next generation. */
export const shadowPipeline = (connectorId: string, operationId: string) =>
  Effect.gen(function* () {
    const pipelines = yield* PipelinesRepo
    const existing = yield* pipelines.byOperation(operationId)
    if (Option.isSome(existing)) return namesOf(existing.value)
    const generation = yield* pipelines.nextGeneration(connectorId)
    const names = pipelineNames(connectorId, generation)
    yield* pipelines.insertBuilding(connectorId, generation, names, operationId)
    return names
  })

/** Starts a pipeline operation (its row pointer, the operation and the job commit together). */
export const startPipelineOperation = (input: { readonly connectorId: string; readonly orgId: string; readonly action: PipelinePayload["action"]; readonly pipelineId: string; readonly guard: boolean }) =>
  Effect.gen(function* () {
    const pipelines = yield* PipelinesRepo
    const operations = yield* ConnectorOperations
    const operationId = newOperationId(operationPrefixOf[input.action])
    yield* pipelines.withTransaction(
      Effect.gen(function* () {
        // Cutover and rollback hold the connector's pipeline pointer: another setup, reset or
        // rollback answers 409 meanwhile. A cleanup touches only a retired pipeline.
        if (input.guard) yield* pipelines.holdPointer(input.connectorId, operationId)
        if (input.action === "cleanup") yield* pipelines.recordCleanupOperation(input.pipelineId, operationId)
        // Created in the transaction that records it: a rollback fails it (nothing would run it).
        yield* operations.create({ id: operationId, orgId: input.orgId, resourceId: input.connectorId, type: operationTypeOf[input.action] })
        yield* enqueueJob({
          ...PIPELINE_JOB,
          operationId,
          orgId: input.orgId,
          payload: { connector_id: input.connectorId, action: input.action, pipeline_id: input.pipelineId } satisfies PipelinePayload
        })
      })
    )
    return operationId
  })

/**
 * Drops a pipeline that no longer serves: its subscription (keeping the slot out of it) and its
 * mirror database on the engine, its slot, publication and capture scope on the source. Absent
 * objects are fine, so a redelivery repeats it harmlessly. Never the active pipeline.
 */
export const dropPipeline = (connectorId: string, names: PipelineNames) =>
  Effect.gen(function* () {
    const provisioner = yield* EngineProvisioner
    const failed = (e: PgStepFailed | string) => new JobFailed({ message: `cleanup: ${typeof e === "string" ? e : e.message}` })
    const engine = yield* provisioner.start(connectorId).pipe(Effect.mapError((e) => failed(e.message)))
    yield* Effect.scoped(
      Effect.gen(function* () {
        const admin = yield* engineSession(engine, "postgres", { applicationName: "scion-connector", connectMillis: 10_000 })
        const [database] = yield* admin.query("select 1 from pg_database where datname = $1", [names.mirrorDatabase])
        if (database !== undefined) {
          yield* dropSubscriptionKeepingSlot(engine, names.mirrorDatabase, names.subscription, "scion-connector")
          yield* admin.query(`drop database if exists ${quoteIdent(names.mirrorDatabase)} with (force)`)
        }
      })
    ).pipe(Effect.mapError((e) => (e instanceof PgStepFailed ? failed(e) : e)))
    const details = yield* storedPostgresDetails(connectorId).pipe(Effect.mapError((e) => failed(e.reason)))
    yield* Effect.scoped(
      Effect.gen(function* () {
        const source = yield* sourceSession(details, details.password, { applicationName: "scion-connector", connectMillis: 5_000, queryMillis: 30_000 })
        const [slot] = yield* source.query<{ active_pid: number | null }>("select active_pid from pg_replication_slots where slot_name = $1", [names.slot])
        if (slot !== undefined) {
          if (slot.active_pid !== null) yield* source.query("select pg_terminate_backend($1, 5000)", [slot.active_pid])
          yield* source.query("select pg_drop_replication_slot($1)", [names.slot])
        }
        yield* source.query(`drop publication if exists ${quoteIdent(names.publication)}`)
        const [scope] = yield* source.query<{ present: boolean }>("select to_regclass('scion.publication_scope') is not null as present")
        if (scope?.present === true) yield* source.query("delete from scion.publication_scope where publication = $1", [names.publication])
      })
    ).pipe(Effect.mapError(failed))
  }).pipe(Effect.withSpan("Pipelines.dropPipeline", { attributes: { connectorId, publication: names.publication } }))

export type PipelineJobError = JobFailed | OperationEnded | RpcError

/** The cutover, rollback and cleanup job (one operation each). */
export const pipelineJob: JobHandler<
  PipelinePayload,
  typeof PipelinePayload.Encoded,
  PipelineJobError,
  PipelinesRepo | EngineProvisioner | ConnectorsRepo | SecretStore
> = {
  ...PIPELINE_JOB,
  payload: PipelinePayload,
  run: (job) =>
    Effect.gen(function* () {
      const pipelines = yield* PipelinesRepo
      const { connector_id: connectorId, action, pipeline_id: pipelineId } = job.payload
      const config = yield* PipelineConfig.pipe(Effect.orDie)
      const found = yield* pipelines.byId(connectorId, pipelineId)
      if (Option.isNone(found)) return yield* new JobFailed({ message: `Pipeline ${pipelineId} of connector ${connectorId} does not exist` })
      const row = found.value
      switch (action) {
        case "cutover":
        case "rollback": {
          if (action === "cutover" && row.status !== "shadow" && row.status !== "active") return yield* new JobFailed({ message: `Pipeline ${pipelineId} is ${row.status}, not a validated shadow` })
          if (action === "rollback" && row.status !== "retired" && row.status !== "active") return yield* new JobFailed({ message: `Pipeline ${pipelineId} is ${row.status}: nothing to roll back to` })
          yield* job.report({
            stage: "switch",
            stageLabel: action === "cutover" ? "Switching branch creation to the new mirror" : "Switching branch creation back to the previous mirror",
            progress: 50
          })
          const switched = yield* pipelines.switchActive(connectorId, row, config.rollbackGrace)
          if (switched._tag === "NoEngine") return yield* new JobFailed({ message: `Connector ${connectorId} has no engine` })
          const replaced = switched.replaced
          yield* Effect.logInfo(action === "cutover" ? "pipeline cut over" : "pipeline rolled back").pipe(
            Effect.annotateLogs({ connector_id: connectorId, active: row.publication_name, retired: replaced })
          )
          return {
            connector_id: connectorId,
            active_pipeline_id: row.publication_name,
            retired_pipeline_id: replaced,
            mirror_database: row.mirror_database,
            rollback_until: new Date(Date.now() + Duration.toMillis(config.rollbackGrace)).toISOString()
          } satisfies JsonObject
        }
        case "cleanup": {
          if (row.status === "cleaned") return { connector_id: connectorId, pipeline_id: pipelineId, cleaned: true } satisfies JsonObject
          if (row.status === "active") return yield* new JobFailed({ message: `Pipeline ${pipelineId} is active again (rolled back to): it is kept` })
          yield* job.report({ stage: "drop", stageLabel: "Dropping the replaced pipeline's subscription, mirror, slot and publication", progress: 30 })
          yield* dropPipeline(connectorId, namesOf(row))
          yield* pipelines.markCleaned(pipelineId)
          yield* Effect.logInfo("pipeline cleaned up").pipe(Effect.annotateLogs({ connector_id: connectorId, pipeline: pipelineId }))
          return { connector_id: connectorId, pipeline_id: pipelineId, cleaned: true } satisfies JsonObject
        }
      }
    }).pipe(Effect.withSpan("pipelineJob.run", { attributes: { operationId: job.operationId, action: job.payload.action } }))
}
