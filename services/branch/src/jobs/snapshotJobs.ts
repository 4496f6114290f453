import type { JsonObject } from "@bufbuild/protobuf"
import { JobFailed, type JobHandler, type OperationEnded, type RpcError, PostgresPools } from "@scion/kit"
import { Effect, Option, Schema } from "effect"
import { Copier } from "../engine/Copier.js"
import { Engines, isBranchable } from "../engine/Engines.js"
import { connectEngine, dropSnapshotDatabase, type EngineFailure, readySnapshotDatabase, reopenSnapshotDatabase, sealSnapshotDatabase } from "../engine/EngineSql.js"
import { readHeartbeat } from "../engine/Freshness.js"
import { snapshotResult } from "../rpc/routes.js"
import { SNAPSHOT_CREATE_JOB, SNAPSHOT_DELETE_JOB } from "../Snapshots.js"
import { SnapshotsRepo } from "../SnapshotsRepo.js"

export const SnapshotPayload = Schema.Struct({ snapshot_id: Schema.String })

type SnapshotJobError = JobFailed | OperationEnded | RpcError | EngineFailure | Error

/**
 * The snapshot_create job: a template copy of the mirror by the copier (the subscription paused
 * once for every copy waiting on the engine), the data stamp and the sequences moved past the rows,
 * Scion's own schema dropped, then the database sealed as a template nobody can connect to. Every
 * attempt repeats what is not recorded; one that cannot finish drops the copy and marks the
 * snapshot failed.
 */
export const snapshotCreateJob: JobHandler<typeof SnapshotPayload.Type, typeof SnapshotPayload.Encoded, SnapshotJobError, SnapshotsRepo | Engines | Copier | PostgresPools> = {
  ...SNAPSHOT_CREATE_JOB,
  payload: SnapshotPayload,
  run: (job) =>
    Effect.gen(function* () {
      const repo = yield* SnapshotsRepo
      const engines = yield* Engines
      const copier = yield* Copier
      const snapshotId = job.payload.snapshot_id
      const found = yield* repo.find(snapshotId)
      if (Option.isNone(found)) return yield* new JobFailed({ message: `Snapshot ${snapshotId} does not exist` })
      const snapshot = found.value
      if (snapshot.status === "ready") return snapshotResult(snapshot)
      if (snapshot.status !== "creating") return yield* new JobFailed({ message: `Snapshot ${snapshotId} was ${snapshot.status} before it was ready` })
      const engine = yield* engines.get(snapshot.connectorId).pipe(Effect.catchTag("ConnectorNotFound", () => new JobFailed({ message: `The connector ${snapshot.connectorId} no longer exists` })))
      if (!isBranchable(engine, { allowStale: false })) {
        return yield* new JobFailed({ message: `The connector's branching engine is not ready (branching_engine_status ${engine.status})` })
      }
      const steps = Effect.gen(function* () {
        yield* job.report({ stage: "copy", stageLabel: "Copying the mirror database (subscription paused)", progress: 20 })
        const copied = yield* copier.copy(engine, snapshot.databaseName)
        // What the pause read is recorded before the copy's `scion` schema goes: a redelivery
        // (which finds the copy made, and learns nothing from the copier) keeps the first stamp.
        const sourceLsn = snapshot.sourceLsn ?? copied.sourceLsn
        let dataAsOf = snapshot.dataAsOf ?? copied.dataAsOf
        if ((snapshot.sourceLsn === null && sourceLsn !== null) || (snapshot.dataAsOf === null && dataAsOf !== null)) {
          yield* repo.update(snapshotId, { source_lsn: sourceLsn, data_as_of: dataAsOf })
        }
        // A redelivery after the seal finds a database nobody may connect to: opened again, it is
        // readied and sealed again (its data did not change: nobody could write to it).
        yield* reopenSnapshotDatabase(engine, snapshot.databaseName)
        yield* Effect.scoped(
          Effect.gen(function* () {
            const session = yield* connectEngine(engine, snapshot.databaseName)
            if (dataAsOf === null) {
              // The pause could not read the mirror's heartbeat: the copy's own, if it still has it.
              dataAsOf = yield* readHeartbeat(session, snapshot.connectorId)
              if (dataAsOf !== null) yield* repo.update(snapshotId, { data_as_of: dataAsOf })
            }
            yield* readySnapshotDatabase(session, { alignSequences: !copied.sequencesAligned, spareOwner: copied.spareOwner })
          })
        )
        yield* sealSnapshotDatabase(engine, snapshot.databaseName)
        yield* repo.update(snapshotId, { status: "ready", source_lsn: sourceLsn, data_as_of: dataAsOf })
        const ready = yield* repo.find(snapshotId)
        if (Option.isNone(ready) || ready.value.status !== "ready") {
          yield* dropSnapshotDatabase(engine, snapshot.databaseName)
          return yield* new JobFailed({ message: `Snapshot ${snapshotId} was deleted before it was ready` })
        }
        yield* Effect.logInfo("snapshot ready").pipe(Effect.annotateLogs({ snapshot_id: snapshotId, connector_id: snapshot.connectorId }))
        return snapshotResult(ready.value)
      })
      return yield* steps.pipe(
        Effect.catchAll((error): Effect.Effect<never, SnapshotJobError, PostgresPools> => {
          if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "OperationEnded") return Effect.fail(error)
          if (!(error instanceof JobFailed) && job.attempt < job.maxAttempts) return Effect.fail(error)
          const message = error instanceof JobFailed ? error.message : `The snapshot could not be made: ${(error as { message?: string }).message ?? String(error)}`
          return dropSnapshotDatabase(engine, snapshot.databaseName).pipe(
            Effect.catchAll((e) => Effect.logError("could not drop a failed snapshot's database; the connector delete drops it", e)),
            Effect.zipRight(repo.update(snapshotId, { status: "failed", error: message })),
            Effect.zipRight(Effect.fail(new JobFailed({ message })))
          )
        })
      )
    }).pipe(Effect.withSpan("snapshotCreateJob.run", { attributes: { operationId: job.operationId } }))
}

/** The snapshot_delete job: the template database dropped, the snapshot marked deleted. */
export const snapshotDeleteJob: JobHandler<typeof SnapshotPayload.Type, typeof SnapshotPayload.Encoded, SnapshotJobError, SnapshotsRepo | Engines | PostgresPools> = {
  ...SNAPSHOT_DELETE_JOB,
  payload: SnapshotPayload,
  run: (job) =>
    Effect.gen(function* () {
      const repo = yield* SnapshotsRepo
      const engines = yield* Engines
      const snapshotId = job.payload.snapshot_id
      const found = yield* repo.find(snapshotId)
      if (Option.isNone(found)) return yield* new JobFailed({ message: `Snapshot ${snapshotId} does not exist` })
      const snapshot = found.value
      if (snapshot.status === "deleted") return { snapshot_id: snapshotId, deleted: true, already_deleted: true } satisfies JsonObject
      if (snapshot.deleteOperationId !== job.operationId) return yield* new JobFailed({ message: `Superseded by delete operation ${snapshot.deleteOperationId ?? "none"}` })
      yield* job.report({ stage: "drop", stageLabel: "Dropping the snapshot's database", progress: 30 })
      const engine = yield* engines.get(snapshot.connectorId).pipe(
        Effect.map(Option.some),
        Effect.catchTag("ConnectorNotFound", () => Effect.succeed(Option.none()))
      )
      if (Option.isSome(engine) && engine.value.host !== "") yield* dropSnapshotDatabase(engine.value, snapshot.databaseName)
      yield* repo.update(snapshotId, { status: "deleted", deleted_at: new Date() })
      yield* Effect.logInfo("snapshot deleted").pipe(Effect.annotateLogs({ snapshot_id: snapshotId }))
      return { snapshot_id: snapshotId, deleted: true } satisfies JsonObject
    }).pipe(Effect.withSpan("snapshotDeleteJob.run", { attributes: { operationId: job.operationId } }))
}
