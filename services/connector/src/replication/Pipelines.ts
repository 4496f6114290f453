import type { JsonObject } from "@bufbuild/protobuf"
import { SqlClient, type SqlError } from "@effect/sql"
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



export interface PipelineRow {
  readonly id: string
  readonly connector_id: string
  readonly generation: number
  readonly publication_name: string
  readonly slot_name: string
  readonly subscription_name: string
  readonly mirror_database: string
  readonly mirrored_tables: ReadonlyArray<string>
  readonly status: "building" | "shadow" | "active" | "retired" | "failed" | "cleaned"
  readonly retain_until: Date | null
}

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
    const sql = yield* SqlClient.SqlClient
    const [existing] = yield* sql<PipelineRow>`select * from pipelines where operation_id = ${operationId}`
    if (existing !== undefined) return namesOf(existing)
    const [row] = yield* sql<{ readonly generation: number }>`
      select greatest(coalesce(max(generation), 1), 1)::int + 1 as generation from pipelines where connector_id = ${connectorId}`
    const generation = row?.generation ?? 2
    const names = pipelineNames(connectorId, generation)
    yield* sql`
      insert into pipelines (id, connector_id, generation, publication_name, slot_name, subscription_name, mirror_database, status, operation_id)
      values (${names.publication}, ${connectorId}, ${generation}, ${names.publication}, ${names.slot}, ${names.subscription}, ${names.mirrorDatabase}, 'building', ${operationId})`
    return names
  })

/** Starts a pipeline operation (its row pointer, the operation and the job commit together). */
export const startPipelineOperation = (input: { readonly connectorId: string; readonly orgId: string; readonly action: PipelinePayload["action"]; readonly pipelineId: string; readonly guard: boolean }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const operations = yield* ConnectorOperations
    const operationId = newOperationId(operationPrefixOf[input.action])
    yield* operations.create({ id: operationId, orgId: input.orgId, resourceId: input.connectorId, type: operationTypeOf[input.action] })
    yield* sql.withTransaction(
      Effect.gen(function* () {
        // Cutover and rollback hold the connector's pipeline pointer: another setup, reset or
        // rollback answers 409 meanwhile. A cleanup touches only a retired pipeline.
        if (input.guard) yield* sql`update connectors set setup_operation_id = ${operationId}, updated_at = now() where id = ${input.connectorId}`
        if (input.action === "cleanup") yield* sql`update pipelines set cleanup_operation_id = ${operationId}, updated_at = now() where id = ${input.pipelineId}`
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
 * Makes `target` the active pipeline in one transaction: the engines row takes its names (branch
 * creation follows at once), the one it replaces is retired and kept replicating until
 * `retainUntil`, the replication block names the new pipeline.
 */
const switchActive = (connectorId: string, target: PipelineRow, grace: Duration.Duration) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`select 1 from connectors where id = ${connectorId} for update`
        const [engine] = yield* sql<{
          readonly publication_name: string
          readonly slot_name: string
          readonly subscription_name: string
          readonly mirror_database: string
          readonly mirrored_tables: ReadonlyArray<string>
        }>`select publication_name, slot_name, subscription_name, mirror_database, mirrored_tables from engines where connector_id = ${connectorId}`
        if (engine === undefined) return yield* new JobFailed({ message: `Connector ${connectorId} has no engine` })
        if (engine.publication_name === target.publication_name) return engine.publication_name
        const retainUntil = new Date(Date.now() + Duration.toMillis(grace))
        // The first pipeline has no row until it is replaced.
        yield* sql`
          insert into pipelines (id, connector_id, generation, publication_name, slot_name, subscription_name, mirror_database, mirrored_tables, status, retired_at, retain_until)
          values (${engine.publication_name}, ${connectorId}, 1, ${engine.publication_name}, ${engine.slot_name}, ${engine.subscription_name}, ${engine.mirror_database},
                  ${engine.mirrored_tables}, 'retired', now(), ${retainUntil})
          on conflict (id) do update set status = 'retired', retired_at = now(), retain_until = ${retainUntil}, mirrored_tables = excluded.mirrored_tables,
            cleanup_operation_id = null, updated_at = now()`
        yield* sql`update pipelines set status = 'active', retired_at = null, retain_until = null, updated_at = now() where id = ${target.id}`
        yield* sql`
          update engines set publication_name = ${target.publication_name}, slot_name = ${target.slot_name}, subscription_name = ${target.subscription_name},
            mirror_database = ${target.mirror_database}, mirrored_tables = ${target.mirrored_tables}, last_apply_error_count = null, subscription_disabled_since = null,
            updated_at = now()
          where connector_id = ${connectorId}`
        yield* sql`
          update connectors set replication = jsonb_set(coalesce(replication, '{}'::jsonb), '{active_pipeline_id}', to_jsonb(${target.publication_name}::text)), updated_at = now()
          where id = ${connectorId}`
        return engine.publication_name
      })
    )
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
          yield* Effect.scoped(
            Effect.gen(function* () {
              const mirror = yield* engineSession(engine, names.mirrorDatabase, { applicationName: "scion-connector", connectMillis: 10_000 })
              yield* dropSubscriptionKeepingSlot(engine, names.mirrorDatabase, mirror, names.subscription)
            })
          )
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

export type PipelineJobError = JobFailed | OperationEnded | RpcError | SqlError.SqlError

/** The cutover, rollback and cleanup job (one operation each). */
export const pipelineJob: JobHandler<
  PipelinePayload,
  typeof PipelinePayload.Encoded,
  PipelineJobError,
  SqlClient.SqlClient | EngineProvisioner | ConnectorsRepo | SecretStore
> = {
  ...PIPELINE_JOB,
  payload: PipelinePayload,
  run: (job) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { connector_id: connectorId, action, pipeline_id: pipelineId } = job.payload
      const config = yield* PipelineConfig.pipe(Effect.orDie)
      const [row] = yield* sql<PipelineRow>`select * from pipelines where id = ${pipelineId} and connector_id = ${connectorId}`
      if (row === undefined) return yield* new JobFailed({ message: `Pipeline ${pipelineId} of connector ${connectorId} does not exist` })
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
          const replaced = yield* switchActive(connectorId, row, config.rollbackGrace)
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
          yield* sql`update pipelines set status = 'cleaned', updated_at = now() where id = ${pipelineId}`
          yield* Effect.logInfo("pipeline cleaned up").pipe(Effect.annotateLogs({ connector_id: connectorId, pipeline: pipelineId }))
          return { connector_id: connectorId, pipeline_id: pipelineId, cleaned: true } satisfies JsonObject
        }
      }
    }).pipe(Effect.withSpan("pipelineJob.run", { attributes: { operationId: job.operationId, action: job.payload.action } }))
}

/** Retired pipelines past their grace with no cleanup started yet (the monitor starts one each). */
export const dueCleanups = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly id: string; readonly connector_id: string; readonly org_id: string }>`
    select p.id, p.connector_id, c.org_id from pipelines p join connectors c on c.id = p.connector_id
    where p.status = 'retired' and p.retain_until < now() and p.cleanup_operation_id is null`
)

/** The newest retired pipeline a rollback may return to. */
export const rollbackTarget = (connectorId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<PipelineRow>`
      select * from pipelines where connector_id = ${connectorId} and status = 'retired' and retain_until > now()
      order by retired_at desc limit 1`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))
  )
