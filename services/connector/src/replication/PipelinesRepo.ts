import { SqlClient } from "@effect/sql"
import { compensatedTransaction } from "@scion/kit"
import { Duration, Effect, Option } from "effect"
import { announceEngineReady } from "../engine/EngineReadyEvent.js"
import type { PipelineNames } from "./PipelineNames.js"

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

/** What a switch of the active pipeline found: the replaced pipeline's name, or no engine at all. */
export type SwitchOutcome = { readonly _tag: "NoEngine" } | { readonly _tag: "Switched"; readonly replaced: string }

/** The engine record's pipeline names for a connector (none before its engine step ran). */
export const activePipelineRow = (connectorId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly publication_name: string; readonly slot_name: string; readonly subscription_name: string; readonly mirror_database: string }>`
      select publication_name, slot_name, subscription_name, mirror_database from engines where connector_id = ${connectorId}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))
  )

/**
 * The metadata of pipelines beside the active one (Pipelines.ts): the `pipelines` rows, and the
 * `engines` row's names, which say which pipeline is active. Statements run on the caller's
 * transaction when there is one.
 */
export class PipelinesRepo extends Effect.Service<PipelinesRepo>()("@scion/connector/PipelinesRepo", {
  accessors: true,
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const byId = (connectorId: string, pipelineId: string) =>
      sql<PipelineRow>`select * from pipelines where id = ${pipelineId} and connector_id = ${connectorId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    /** The pipeline a deep reset's operation builds, when it exists already (a redelivery). */
    const byOperation = (operationId: string) =>
      sql<PipelineRow>`select * from pipelines where operation_id = ${operationId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    /** The next generation's number: the first pipeline (generation 1) has no row until replaced. */
    const nextGeneration = (connectorId: string) =>
      sql<{ readonly generation: number }>`
        select greatest(coalesce(max(generation), 1), 1)::int + 1 as generation from pipelines where connector_id = ${connectorId}`.pipe(
        Effect.map((rows) => rows[0]?.generation ?? 2),
        Effect.orDie
      )

    const insertBuilding = (connectorId: string, generation: number, names: PipelineNames, operationId: string) =>
      sql`
        insert into pipelines (id, connector_id, generation, publication_name, slot_name, subscription_name, mirror_database, status, operation_id)
        values (${names.publication}, ${connectorId}, ${generation}, ${names.publication}, ${names.slot}, ${names.subscription}, ${names.mirrorDatabase}, 'building', ${operationId})`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    /** A pipeline operation holds the connector's pipeline pointer (another setup answers 409). */
    const holdPointer = (connectorId: string, operationId: string) =>
      sql`update connectors set setup_operation_id = ${operationId}, updated_at = now() where id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const recordCleanupOperation = (pipelineId: string, operationId: string) =>
      sql`update pipelines set cleanup_operation_id = ${operationId}, updated_at = now() where id = ${pipelineId}`.pipe(Effect.asVoid, Effect.orDie)

    const markFailed = (operationId: string) =>
      sql`update pipelines set status = 'failed', updated_at = now() where operation_id = ${operationId}`.pipe(Effect.asVoid, Effect.orDie)

    /** A validated shadow: its tables recorded, waiting for its cutover. */
    const markShadow = (connectorId: string, publication: string, tables: ReadonlyArray<string>) =>
      sql`update pipelines set status = 'shadow', mirrored_tables = ${tables}, updated_at = now()
          where publication_name = ${publication} and connector_id = ${connectorId}`.pipe(Effect.asVoid, Effect.orDie)

    const markCleaned = (pipelineId: string) => sql`update pipelines set status = 'cleaned', updated_at = now() where id = ${pipelineId}`.pipe(Effect.asVoid, Effect.orDie)

    /**
     * Makes `target` the active pipeline in one transaction: the engines row takes its names (branch
     * creation follows at once), the one it replaces is retired until `retainUntil`, the replication
     * block names the new pipeline, and the engine is announced ready
     * (EngineReadyEvent: its mirror is another database now). Switching to the pipeline already active changes nothing.
     */
    const switchActive = (connectorId: string, target: PipelineRow, grace: Duration.Duration) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* sql`select 1 from connectors where id = ${connectorId} for update`
            const [engine] = yield* sql<{
              readonly publication_name: string
              readonly slot_name: string
              readonly subscription_name: string
              readonly mirror_database: string
              readonly mirrored_tables: ReadonlyArray<string>
            }>`select publication_name, slot_name, subscription_name, mirror_database, mirrored_tables from engines where connector_id = ${connectorId}`
            if (engine === undefined) return { _tag: "NoEngine" } satisfies SwitchOutcome
            if (engine.publication_name === target.publication_name) return { _tag: "Switched", replaced: engine.publication_name } satisfies SwitchOutcome
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
                mirror_database = ${target.mirror_database}, mirrored_tables = ${target.mirrored_tables}, last_apply_error_count = null, apply_errors_rose = false, subscription_disabled_since = null,
                updated_at = now()
              where connector_id = ${connectorId}`
            yield* sql`
              update connectors set replication = jsonb_set(coalesce(replication, '{}'::jsonb), '{active_pipeline_id}', to_jsonb(${target.publication_name}::text)), updated_at = now()
              where id = ${connectorId}`
            yield* announceEngineReady(sql, connectorId, `switch.${target.id}.${Date.now()}`, "switch")
            return { _tag: "Switched", replaced: engine.publication_name } satisfies SwitchOutcome
          })
        )
        .pipe(Effect.orDie)

    /** Retired pipelines past their grace with no cleanup started yet (the monitor starts one each). */
    const dueCleanups = sql<{ readonly id: string; readonly connector_id: string; readonly org_id: string }>`
      select p.id, p.connector_id, c.org_id from pipelines p join connectors c on c.id = p.connector_id
      where p.status = 'retired' and p.retain_until < now() and p.cleanup_operation_id is null`.pipe(Effect.orDie)

    /** The newest retired pipeline a rollback may return to. */
    const rollbackTarget = (connectorId: string) =>
      sql<PipelineRow>`
        select * from pipelines where connector_id = ${connectorId} and status = 'retired' and retain_until > now()
        order by retired_at desc limit 1`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    return {
      byId,
      byOperation,
      nextGeneration,
      insertBuilding,
      holdPointer,
      recordCleanupOperation,
      markFailed,
      markShadow,
      markCleaned,
      switchActive,
      dueCleanups,
      rollbackTarget,
      /** A transaction whose rollback fails the operations created in it (kit `compensatedTransaction`). */
      withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => compensatedTransaction(effect, (work) => sql.withTransaction(work))
    } as const
  })
}) {}
