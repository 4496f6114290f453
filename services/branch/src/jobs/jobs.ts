import type { JsonObject } from "@bufbuild/protobuf"
import { JobFailed, type JobHandler, type OperationEnded, type RpcError, PostgresPools } from "@scion/kit"
import { Effect, Fiber, Option, Redacted, Schema } from "effect"
import { type BranchUpdate, BranchesRepo } from "../BranchesRepo.js"
import { CREATE_JOB, DELETE_JOB, RESET_JOB } from "../Branches.js"
import type { SecretStoreFailure } from "../domain/errors.js"
import type { Branch } from "../domain/models.js"
import { noUrls, urlsOf } from "../domain/models.js"
import { AcceptedEngines } from "../engine/AcceptedEngines.js"
import { Copier } from "../engine/Copier.js"
import { type BranchingEngine, Engines, isBranchable } from "../engine/Engines.js"
import { adminSession, adoptSpareOwner, applyMasking, connectEngine, copyFromSnapshot, dropBranch, dropDatabase, type EngineFailure, ensureRole, readyBranchDatabase } from "../engine/EngineSql.js"
import { SnapshotsRepo } from "../SnapshotsRepo.js"
import { generatePassword, type PasswordEnvelope, Passwords } from "../Passwords.js"
import { branchResult } from "../rpc/routes.js"
import { type CopyMark, readHeartbeat, waitForSourcePosition } from "../engine/Freshness.js"
import { FreshnessConfig } from "../engine/FreshnessConfig.js"

export const BranchPayload = Schema.Struct({ branch_id: Schema.String })
export type BranchPayload = typeof BranchPayload.Type



type CreateError = JobFailed | OperationEnded | RpcError | EngineFailure | SecretStoreFailure | Error

/**
 * The branch_create job. Each step is recorded on the branch row when it finishes, so a
 * redelivery (a crashed or killed worker) resumes where the last one stopped: the template copy
 * (with the subscriptions paused, shared with every create waiting on the engine), the sequences
 * moved past the copied rows (sequences_aligned_at), the role's password sealed before the role
 * exists and the role (both made while the copy runs), the grants (read_ready_at,
 * write_ready_at), masking (masked_ready_at), then active with the URLs. A create that cannot
 * finish (JobFailed, or the last attempt) drops what it made on the engine and marks the branch
 * failed: nothing is left behind. An active branch always has a branch_url.
 */
export const createJob: JobHandler<
  BranchPayload,
  typeof BranchPayload.Encoded,
  CreateError,
  BranchesRepo | SnapshotsRepo | Engines | AcceptedEngines | Copier | Passwords | FreshnessConfig | PostgresPools
> = {
  ...CREATE_JOB,
  payload: BranchPayload,
  // The branch and its engine are read, and the copy made, while the operation is marked running (awaitStarted).
  startEarly: true,
  run: (job) =>
    Effect.gen(function* () {
      const repo = yield* BranchesRepo
      const engines = yield* Engines
      const accepted = yield* AcceptedEngines
      const copier = yield* Copier
      const passwords = yield* Passwords
      const freshness = yield* FreshnessConfig
      const snapshots = yield* SnapshotsRepo
      const branchId = job.payload.branch_id

      const load = Effect.flatMap(repo.findWithEnvelope(branchId), Option.match({
        onNone: () => Effect.fail(new JobFailed({ message: `Branch ${branchId} does not exist` })),
        onSome: Effect.succeed
      }))

      /**
       * The operation marked running. The copy and the role are made meanwhile (that round trip,
       * ~10–20 ms under load, was the job's first wait), so it is awaited once the copy is made,
       * before anything of it is recorded, and before a refusal. An operation that had ended (a
       * sweeper failed it while the job waited) gets what this attempt made on the engine dropped
       * again, once `made` is done: it finds nothing there.
       */
      const awaitStarted = (engine: BranchingEngine, branch: Branch, made: Effect.Effect<unknown> = Effect.void) =>
        job.started.pipe(
          Effect.tapErrorTag("OperationEnded", () =>
            Effect.zipRight(
              made,
              dropBranch(engine, branch.databaseName, branch.roleName).pipe(
                Effect.retry({ times: 3 }),
                Effect.catchAll((e) => Effect.logError("could not drop the copy and role of a create whose operation had ended; the connector delete drops them", e))
              )
            )
          )
        )

      /**
       * Drops the half-made branch and marks it failed; the drop is retried within this attempt.
       * Once the operation is marked running: one that had ended finds nothing changed.
       */
      const abandon = (engine: Option.Option<BranchingEngine>, branch: Branch, message: string) =>
        Effect.gen(function* () {
          yield* Option.match(engine, { onNone: () => job.started, onSome: (made) => awaitStarted(made, branch) })
          if (Option.isSome(engine) && engine.value.host !== "") {
            yield* dropBranch(engine.value, branch.databaseName, branch.roleName).pipe(
              Effect.retry({ times: 3 }),
              Effect.catchAll((e) => Effect.logError("could not drop a failed branch's database and role; the connector delete or the next attempt drops them", e))
            )
          }
          yield* repo.markFailed(branch.id, message)
          return yield* new JobFailed({ message })
        })

      const first = yield* load
      if (first.branch.status === "active" && Option.isSome(first.envelope)) return branchResult({ branch: first.branch, urls: noUrls })
      // The answer the accept acted on when it was made in this process moments ago, else the
      // connector's; a later attempt asks anew (the first may have failed on that answer).
      const engineNow = Effect.flatMap(accepted.take(job.operationId), (kept) =>
        Option.isSome(kept) && job.attempt === 1 ? Effect.succeed(kept.value) : engines.get(first.branch.connectorId)
      )
      const lookedUp = first.branch.status === "creating" ? yield* Effect.either(engineNow) : undefined
      if (first.branch.status !== "creating" || lookedUp === undefined) {
        return yield* abandon(Option.none(), first.branch, `Branch ${branchId} was ${first.branch.status} before it was ready`)
      }
      const engine = yield* Effect.catchTag(lookedUp, "ConnectorNotFound", () => abandon(Option.none(), first.branch, `The connector ${first.branch.connectorId} no longer exists`))
      if (!isBranchable(engine, { allowStale: first.branch.allowStale || first.branch.snapshotId !== null })) {
        return yield* abandon(Option.some(engine), first.branch, `The connector's branching engine is not ready to branch (branching_engine_status ${engine.status})`)
      }

      /** The branch's password (sealed on the row before the role exists, so a redelivery uses the same) and its role. */
      const makeRole = (branch: Branch, envelope: Option.Option<PasswordEnvelope>) =>
        Effect.scoped(
          Effect.gen(function* () {
            let sealed = Option.getOrNull(envelope)
            if (sealed === null) {
              const claimed = yield* repo.claimEnvelope(branchId, yield* passwords.seal(generatePassword(), branchId))
              if (Option.isNone(claimed)) return yield* new JobFailed({ message: `Branch ${branchId} no longer exists` })
              sealed = claimed.value
            }
            const password = yield* passwords.open(sealed, branchId)
            if (branch.roleCreatedAt === null) {
              yield* ensureRole(yield* adminSession(engine), branch.roleName, password)
              yield* repo.update(branchId, { role_created_at: new Date() })
            }
            return password
          })
        )

      const steps = Effect.gen(function* () {
        const t0 = Date.now()
        const timings: Record<string, number> = {}
        const mark = (step: string) => Effect.sync(() => void (timings[step] = Date.now() - t0))
        // The row as the job began: nothing but this job changes it before the copy.
        const loaded = first
        let branch = loaded.branch
        const envelope = loaded.envelope
        // The role needs nothing from the copy: made beside it (on an admin session of its own),
        // it costs the create no time. Joined after the copy; when a step fails first, it is
        // awaited (below) before abandon drops what was made.
        const roleMade = yield* Effect.fork(Effect.tap(makeRole(branch, envelope), () => mark("role_ms")))
        const rulesLoaded = yield* Effect.fork(repo.maskingRules(branch.connectorId))
        // Awaited once the copy is made, before anything of it is recorded (awaitStarted).
        const startedOrUndone = awaitStarted(engine, branch, Fiber.await(roleMade))
        return yield* Effect.gen(function* () {
          if (branch.copiedAt === null && (branch.consistentWithSource || branch.minSourceLsn !== null)) {
            // Read-your-writes: the copy waits until the mirror has what the source had written.
            const target = branch.minSourceLsn ?? (yield* engines.sourcePosition(branch.connectorId))
            yield* job.report({ stage: "catch_up", stageLabel: `Waiting for the mirror to apply the source up to ${target}`, progress: 5 })
            yield* waitForSourcePosition(engine, target, freshness.catchUpTimeout).pipe(Effect.mapError((e) => new JobFailed({ message: `The branch could not be made consistent with the source: ${e.message}` })))
            yield* mark("catch_up_ms")
          }
          if (branch.copiedAt === null && branch.snapshotId !== null) {
            // From a snapshot: its template database, no pause of the mirror; its stamp is the branch's.
            const snapshot = yield* snapshots.find(branch.snapshotId)
            if (Option.isNone(snapshot) || snapshot.value.status !== "ready") {
              return yield* new JobFailed({ message: `Snapshot ${branch.snapshotId} is ${Option.match(snapshot, { onNone: () => "gone", onSome: (s) => s.status })}, not ready` })
            }
            yield* job.report({ stage: "copy", stageLabel: `Copying snapshot ${snapshot.value.name}`, progress: 10 })
            yield* copyFromSnapshot(engine, snapshot.value.databaseName, branch.databaseName)
            yield* mark("copied_ms")
            yield* repo.update(branchId, {
              copied_at: new Date(),
              engine_host: engine.host,
              engine_port: engine.port,
              source_lsn: snapshot.value.sourceLsn,
              data_as_of: snapshot.value.dataAsOf,
              // A ready snapshot's sequences were aligned by its own readying.
              sequences_aligned_at: new Date()
            })
            ;({ branch } = yield* load)
          }
          // What runs beside the copy and the first session: settled before the copy is changed.
          let copyRecorded: Effect.Effect<void, OperationEnded | RpcError> = Effect.void
          let dataAsOf = branch.dataAsOf
          // When the copy's sequences stood past its rows: aligned by the pause, or by a snapshot's readying.
          let sequencesAlignedAt = branch.sequencesAlignedAt
          // What the pause listed for the role to own (only for the copy made now: a redelivery searches).
          let owned: CopyMark["owned"] = null
          // The copy was a spare readied ahead: its placeholder owner becomes the branch's role.
          let spareOwner: string | null = null
          if (branch.copiedAt === null) {
            // The stage report travels while the copy runs; a report refused (the operation ended)
            // still fails the job, once the copy is done.
            const reported = yield* Effect.fork(Effect.zipRight(job.report({ stage: "copy", stageLabel: "Copying the mirror database (subscription paused)", progress: 10 }), mark("reported_ms")))
            const copied = yield* copier.copy(engine, branch.databaseName)
            yield* mark("copied_ms")
            yield* startedOrUndone
            dataAsOf ??= copied.dataAsOf
            if (copied.sequencesAligned) sequencesAlignedAt ??= new Date()
            owned = copied.owned
            spareOwner = copied.spareOwner
            // Recorded while the new database's first session opens (the steps below read none of
            // it), and before anything inside the copy changes: a redelivery finds the copy made,
            // with the stamp the pause read (the copy's own `scion` schema goes below).
            const recorded = yield* Effect.fork(
              repo.update(branchId, {
                copied_at: new Date(),
                engine_host: engine.host,
                engine_port: engine.port,
                ...(copied.sourceLsn !== null ? { source_lsn: copied.sourceLsn } : {}),
                ...(dataAsOf !== null ? { data_as_of: dataAsOf } : {}),
                // The pause aligned the mirror's sequences before this copy was cut from it.
                ...(copied.sequencesAligned && sequencesAlignedAt !== null ? { sequences_aligned_at: sequencesAlignedAt } : {})
              })
            )
            copyRecorded = Effect.zipRight(Fiber.join(reported), Fiber.join(recorded))
          } else {
            // A redelivery that finds the copy made, a snapshot's copy: marked running before they go on.
            yield* startedOrUndone
          }
          // One session on the new database serves every step that works inside it: the first
          // connection to a fresh copy is the expensive one (its caches are built from the catalog).
          // A spare readied ahead needs none (unless its data is to be masked).
          const { password, ready } = yield* Effect.scoped(
            Effect.gen(function* () {
              const session = yield* Effect.cached(Effect.tap(connectEngine(engine, branch.databaseName), () => mark("connected_ms")))
              if (spareOwner === null) yield* session
              yield* copyRecorded
              yield* mark("recorded_ms")
              if (dataAsOf === null && branch.snapshotId === null) {
                // The pause could not read the mirror's heartbeat (a redelivery after the copy, no
                // subscription running, none applied yet): the copy's own, recorded before the
                // readying below drops its `scion` schema.
                dataAsOf = yield* readHeartbeat(yield* session, branch.connectorId)
                if (dataAsOf !== null) yield* repo.update(branchId, { data_as_of: dataAsOf })
              }
              yield* mark("stamped_ms")
              const password = yield* Fiber.join(roleMade)
              let ready: BranchUpdate = {}
              if (branch.writeReadyAt === null) {
                // Sequences, ownership and CONNECT in one transaction, after the role exists; or the
                // spare's owner renamed to the branch's role, in one transaction on the admin session.
                if (spareOwner !== null) {
                  const owner = spareOwner
                  yield* Effect.scoped(Effect.flatMap(adminSession(engine), (admin) => adoptSpareOwner(admin, owner, branch.roleName, password)))
                } else yield* readyBranchDatabase(yield* session, branch.databaseName, branch.roleName, { alignSequences: sequencesAlignedAt === null, owned })
                const now = new Date()
                ready = { sequences_aligned_at: sequencesAlignedAt ?? now, read_ready_at: now, write_ready_at: now }
              }
              yield* mark("grant_ms")
              const rules = yield* Fiber.join(rulesLoaded)
              if (rules.length > 0 && branch.maskedReadyAt === null) {
                yield* job.report({ stage: "mask", stageLabel: "Masking columns", progress: 80 })
                const outcome = yield* applyMasking(yield* session, rules)
                yield* Effect.logInfo("branch masked").pipe(Effect.annotateLogs({ branch_id: branchId, applied: outcome.applied.length, skipped: outcome.skipped.join(", ") }))
                ready = { ...ready, masked_ready_at: new Date() }
              }
              return { password, ready }
            })
          )
          const pooler = Option.getOrNull(engine.pooler)
          // The steps' records and the activation in one statement.
          const activated = yield* repo.activate(branchId, {
            ...ready,
            engine_host: engine.host,
            engine_port: engine.port,
            pooler_host: pooler?.host ?? null,
            pooler_port: pooler?.port ?? null
          })
          if (Option.isNone(activated)) return yield* new JobFailed({ message: `Branch ${branchId} was deleted before it was ready` })
          branch = activated.value
          const urls = urlsOf(branch, Redacted.value(password))
          if (urls.branchUrl === null || urls.branchUrl === "") return yield* new JobFailed({ message: "The branch has no connection URL (the engine has no address)" })
          yield* mark("total_ms")
          yield* Effect.logInfo("branch ready").pipe(Effect.annotateLogs({ branch_id: branchId, connector_id: branch.connectorId, ...timings }))
          // The operation's result holds no password: it is stored and announced as it is, and every
          // role may read operations. The gateway adds the URLs for callers who may connect.
          return branchResult({ branch, urls: noUrls })
        }).pipe(Effect.ensuring(Fiber.await(roleMade)))
      })

      return yield* steps.pipe(
        Effect.catchAll((error): Effect.Effect<never, CreateError | SecretStoreFailure, BranchesRepo | PostgresPools> => {
          if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "OperationEnded") return Effect.fail(error)
          const message = error instanceof JobFailed ? error.message : `The branch could not be created: ${(error as { message?: string }).message ?? String(error)}`
          if (error instanceof JobFailed || job.attempt >= job.maxAttempts) return abandon(Option.some(engine), first.branch, message)
          return Effect.fail(error)
        })
      )
    }).pipe(Effect.withSpan("createJob.run", { attributes: { operationId: job.operationId } }))
}

/** The branch_delete job: drops the database (closing its sessions) and the role, then marks the branch deleted. */
export const deleteJob: JobHandler<BranchPayload, typeof BranchPayload.Encoded, JobFailed | OperationEnded | RpcError | EngineFailure | Error, BranchesRepo | Engines | PostgresPools> = {
  ...DELETE_JOB,
  payload: BranchPayload,
  run: (job) =>
    Effect.gen(function* () {
      const repo = yield* BranchesRepo
      const engines = yield* Engines
      const branchId = job.payload.branch_id
      const found = yield* repo.find(branchId)
      if (Option.isNone(found)) return yield* new JobFailed({ message: `Branch ${branchId} does not exist` })
      const branch = found.value
      if (branch.status === "deleted") return { branch_id: branchId, deleted: true, already_deleted: true } satisfies JsonObject
      if (branch.deleteOperationId !== job.operationId) return yield* new JobFailed({ message: `Superseded by delete operation ${branch.deleteOperationId ?? "none"}` })
      yield* job.report({ stage: "drop", stageLabel: "Dropping the branch database and role", progress: 20 })
      const engine = yield* engines.get(branch.connectorId).pipe(
        Effect.map(Option.some),
        Effect.catchTag("ConnectorNotFound", () => Effect.succeed(Option.none<BranchingEngine>()))
      )
      if (Option.isSome(engine) && engine.value.host !== "") yield* dropBranch(engine.value, branch.databaseName, branch.roleName)
      yield* repo.update(branchId, { status: "deleted", deleted_at: new Date(), password_envelope: null })
      yield* Effect.logInfo("branch deleted").pipe(Effect.annotateLogs({ branch_id: branchId }))
      return { branch_id: branchId, deleted: true } satisfies JsonObject
    }).pipe(Effect.withSpan("deleteJob.run", { attributes: { operationId: job.operationId } }))
}

/**
 * The branch_reset job: the branch's database is dropped (its sessions end) and cut again from the
 * mirror under the same name, then the create's later steps run again for it — data stamp,
 * sequences, grants to the existing role, masking. Id, name, role, password and URL stay. Every
 * attempt starts over (each step is idempotent); a reset that cannot finish leaves the branch
 * failed with the reason, since its database may be gone.
 */
export const resetJob: JobHandler<BranchPayload, typeof BranchPayload.Encoded, CreateError, BranchesRepo | Engines | Copier | PostgresPools> = {
  ...RESET_JOB,
  payload: BranchPayload,
  run: (job) =>
    Effect.gen(function* () {
      const repo = yield* BranchesRepo
      const engines = yield* Engines
      const copier = yield* Copier
      const branchId = job.payload.branch_id
      const found = yield* repo.findWithEnvelope(branchId)
      if (Option.isNone(found)) return yield* new JobFailed({ message: `Branch ${branchId} does not exist` })
      const { branch, envelope } = found.value
      if (branch.resetOperationId !== job.operationId) return yield* new JobFailed({ message: `Superseded by reset operation ${branch.resetOperationId ?? "none"}` })
      if (branch.status !== "active" || Option.isNone(envelope)) return yield* new JobFailed({ message: `Branch ${branchId} is ${branch.status}: only an active branch can be reset` })
      const engine = yield* engines.get(branch.connectorId).pipe(Effect.catchTag("ConnectorNotFound", () => new JobFailed({ message: `The connector ${branch.connectorId} no longer exists` })))
      if (!isBranchable(engine, { allowStale: branch.allowStale })) {
        return yield* new JobFailed({ message: `The connector's branching engine is not ready to branch (branching_engine_status ${engine.status})` })
      }
      const steps = Effect.gen(function* () {
        yield* job.report({ stage: "drop", stageLabel: "Ending the branch's sessions and dropping its database", progress: 10 })
        yield* dropDatabase(engine, branch.databaseName)
        yield* job.report({ stage: "copy", stageLabel: "Copying the mirror database (subscription paused)", progress: 30 })
        const copied = yield* copier.copy(engine, branch.databaseName)
        const rules = yield* repo.maskingRules(branch.connectorId)
        const dataAsOf = yield* Effect.scoped(
          Effect.gen(function* () {
            const session = yield* connectEngine(engine, branch.databaseName)
            const dataAsOf = copied.dataAsOf ?? (yield* readHeartbeat(session, branch.connectorId))
            yield* readyBranchDatabase(session, branch.databaseName, branch.roleName, { alignSequences: !copied.sequencesAligned, owned: copied.owned })
            if (rules.length > 0) {
              yield* job.report({ stage: "mask", stageLabel: "Masking columns", progress: 80 })
              yield* applyMasking(session, rules)
            }
            return dataAsOf
          })
        )
        const now = new Date()
        yield* repo.update(branchId, {
          copied_at: now,
          source_lsn: copied.sourceLsn,
          data_as_of: dataAsOf,
          sequences_aligned_at: now,
          read_ready_at: now,
          write_ready_at: now,
          masked_ready_at: rules.length > 0 ? now : null
        })
        const reset = yield* repo.find(branchId)
        if (Option.isNone(reset) || reset.value.status !== "active") {
          // Deleted meanwhile: the delete's drop may have run before our copy.
          yield* dropDatabase(engine, branch.databaseName)
          return yield* new JobFailed({ message: `Branch ${branchId} was deleted during its reset` })
        }
        yield* Effect.logInfo("branch reset").pipe(Effect.annotateLogs({ branch_id: branchId }))
        return branchResult({ branch: reset.value, urls: noUrls })
      })
      return yield* steps.pipe(
        Effect.catchAll((error): Effect.Effect<never, CreateError> => {
          if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "OperationEnded") return Effect.fail(error)
          if (!(error instanceof JobFailed) && job.attempt < job.maxAttempts) return Effect.fail(error)
          const message = error instanceof JobFailed ? error.message : `The branch could not be reset: ${(error as { message?: string }).message ?? String(error)}`
          return Effect.zipRight(
            repo.update(branchId, { status: "failed", error: message, password_envelope: null }),
            Effect.fail(new JobFailed({ message }))
          )
        })
      )
    }).pipe(Effect.withSpan("resetJob.run", { attributes: { operationId: job.operationId } }))
}
