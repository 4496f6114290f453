import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { PipelineNames } from "../replication/PipelineNames.js"
import type { SuggestedMasking } from "../connectors/SchemaIntrospection.js"
import { announceEngineReady } from "./EngineReadyEvent.js"
import type { BranchingEngineStatus, EngineSetupPayload } from "./SetupPlan.js"

/** What the engine step records about the engine it provisioned. */
export interface ProvisionedEngine {
  readonly connectorId: string
  readonly host: string
  readonly port: number
  readonly instanceName: string
  readonly pipeline: PipelineNames
  readonly schemaFollow: "capture" | "reconcile"
  readonly heartbeat: boolean
}

/** What a setup, rollout or reset that passed validation records. */
export interface ReadyEngine {
  readonly connectorId: string
  readonly mirroredTables: ReadonlyArray<string>
  readonly steps: ReadonlyArray<string>
  /** A reset replaced the pipeline a quarantine paused: the entry is over. */
  readonly endQuarantine: boolean
  readonly activePipeline: string
  readonly schemaFollow: "capture" | "reconcile"
  /** The readiness attempt that passed: the engine-ready event's id, so a retried verdict announces it once. */
  readonly attemptId: string
  readonly mode: EngineSetupPayload["mode"]
}

/** EngineSetupRepo.accessRow: a connector as EngineAccessService describes it. */
export interface EngineAccessRow {
  readonly id: string
  readonly org_id: string
  readonly branching_engine_status: BranchingEngineStatus
  /** What discovery suggests masking in the selected tables (derived on write; migration 0011 filled older rows). */
  readonly selected_masking_suggestions: ReadonlyArray<SuggestedMasking> | null
  /** Only when selected_masking_suggestions is null (the structure is megabytes for large selections). */
  readonly selected_schema_structure: unknown
  readonly has_engine: boolean
  readonly mirror_database: string | null
  readonly subscription_name: string | null
  readonly host: string | null
  readonly quarantine_id: string | null
  readonly quarantine_reason: string | null
  readonly quarantine_detail: string | null
}

/** The engine record of a connector: where its subscription lives. */
export const engineRecord = (connectorId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly mirror_database: string; readonly subscription_name: string }>`
      select mirror_database, subscription_name from engines where connector_id = ${connectorId}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))
  )

/**
 * Engine setup's metadata: the connector's pointer to its setup (EngineSetup.ts starts one), the
 * `engines` row the job fills and the connector's `branching_engine_status`, `indexing_status` and
 * replication block it moves (SetupJob.ts). Statements run on the caller's transaction when there is one.
 */
export class EngineSetupRepo extends Effect.Service<EngineSetupRepo>()("@scion/connector/EngineSetupRepo", {
  accessors: true,
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const engineStatus = (connectorId: string) =>
      sql<{ readonly branching_engine_status: BranchingEngineStatus }>`select branching_engine_status from connectors where id = ${connectorId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.branching_engine_status)),
        Effect.orDie
      )

    const setEngineStatus = (connectorId: string, status: BranchingEngineStatus) =>
      sql`update connectors set branching_engine_status = ${status}, updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const markIndexingFailed = (connectorId: string) =>
      sql`update connectors set indexing_status = 'failed', updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    /** The engine's row: made on the first setup, its address and schema-following mode kept current. */
    const recordEngine = (engine: ProvisionedEngine) =>
      sql`
        insert into engines (connector_id, host, port, instance_name, mirror_database, publication_name, slot_name, subscription_name, schema_follow, heartbeat)
        values (${engine.connectorId}, ${engine.host}, ${engine.port}, ${engine.instanceName}, ${engine.pipeline.mirrorDatabase}, ${engine.pipeline.publication},
                ${engine.pipeline.slot}, ${engine.pipeline.subscription}, ${engine.schemaFollow}, ${engine.heartbeat})
        on conflict (connector_id) do update set host = excluded.host, port = excluded.port, instance_name = excluded.instance_name,
          schema_follow = excluded.schema_follow, heartbeat = excluded.heartbeat, updated_at = now()`.pipe(Effect.asVoid, Effect.orDie)

    /** The tables the active mirror holds (empty before the first setup finished). */
    const mirroredTables = (connectorId: string) =>
      sql<{ readonly mirrored_tables: ReadonlyArray<string> }>`select mirrored_tables from engines where connector_id = ${connectorId}`.pipe(
        Effect.map((rows) => rows[0]?.mirrored_tables ?? []),
        Effect.orDie
      )

    /**
     * The verdict of a setup that passed validation, in one transaction: the engine row's tables and
     * steps, the connector ready (degraded while a quarantine stands: a rollout does not end it),
     * indexed, replicating through `activePipeline`; announced (EngineReadyEvent).
     */
    const markReady = (ready: ReadyEngine) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* sql`update engines set mirrored_tables = ${ready.mirroredTables}, steps = ${JSON.stringify(ready.steps)}::jsonb,
                         last_apply_error_count = null, apply_errors_rose = false, subscription_disabled_since = null, updated_at = now()
                       where connector_id = ${ready.connectorId}`
            if (ready.endQuarantine) yield* sql`delete from quarantine_entries where connector_id = ${ready.connectorId}`
            const replication = {
              status: "streaming",
              lag_bytes: 0,
              last_applied_at: null,
              active_pipeline_id: ready.activePipeline,
              schema_follow: ready.schemaFollow,
              measured_at: new Date().toISOString()
            }
            yield* sql`update connectors set
                         branching_engine_status = case when exists (select 1 from quarantine_entries q where q.connector_id = ${ready.connectorId} and q.status = 'quarantined')
                                                   then 'degraded' else 'ready' end,
                         indexing_status = 'indexed',
                         replication = ${JSON.stringify(replication)}::jsonb,
                         last_indexed_version = greatest(last_indexed_version, selected_schema_version), updated_at = now()
                       where id = ${ready.connectorId}`
            yield* announceEngineReady(sql, ready.connectorId, ready.attemptId, ready.mode)
          })
        )
        .pipe(Effect.orDie)

    /** The connector's row locked for the caller's transaction: the setup and delete it points at. */
    const lockPointers = (connectorId: string) =>
      sql<{ readonly setup_operation_id: string | null; readonly delete_operation_id: string | null }>`
        select setup_operation_id, delete_operation_id from connectors where id = ${connectorId} for update`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    const setupOperationOf = (connectorId: string) =>
      sql<{ readonly setup_operation_id: string | null }>`select setup_operation_id from connectors where id = ${connectorId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.setup_operation_id)),
        Effect.orDie
      )

    /** A setup, rollout or reset started: the connector points at it, setting up (setup, reset) and indexing (all but a deep reset). */
    const pointSetup = (connectorId: string, operationId: string, mode: "setup" | "rollout" | "reset" | "deep_reset") =>
      sql`update connectors set setup_operation_id = ${operationId}, updated_at = now(),
            branching_engine_status = case when ${mode} in ('setup', 'reset') then 'setting_up' else branching_engine_status end,
            indexing_status = case when ${mode} = 'deep_reset' then indexing_status else 'indexing' end
          where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    /** An index with no engine to roll out to: the selection is recorded as indexed. */
    const recordIndexed = (connectorId: string) =>
      sql`update connectors set last_indexed_version = selected_schema_version, indexing_status = 'indexed', updated_at = now()
          where id = ${connectorId} and last_indexed_version < selected_schema_version`.pipe(Effect.asVoid, Effect.orDie)

    /**
     * What EngineAccessService answers about a connector, in one statement: the connector's org,
     * status and selection (for the masking suggestions), its engine row's address and active
     * pipeline once a setup recorded them, and its standing quarantine. Only these columns: a
     * connector row also holds the source's whole discovered structure, which every branch create
     * (asking twice) would otherwise carry and parse.
     */
    const accessRow = (connectorId: string) =>
      sql<EngineAccessRow>`
        select c.id, c.org_id, c.branching_engine_status, c.selected_masking_suggestions,
               case when c.selected_masking_suggestions is null then c.selected_schema_structure end as selected_schema_structure,
               e.connector_id is not null as has_engine, e.mirror_database, e.subscription_name, e.host,
               q.id as quarantine_id, q.reason as quarantine_reason, q.detail as quarantine_detail
        from connectors c
        left join engines e on e.connector_id = c.id
        left join lateral (
          select id, reason, detail from quarantine_entries where connector_id = c.id and status in ('quarantined', 'released') limit 1
        ) q on true
        where c.id = ${connectorId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    return { accessRow, engineStatus, setEngineStatus, markIndexingFailed, recordEngine, mirroredTables, markReady, lockPointers, setupOperationOf, pointSetup, recordIndexed } as const
  })
}) {}
