import { randomBytes } from "node:crypto"
import type { PostgresPools } from "@scion/kit"
import { Effect, Exit, type Fiber } from "effect"
import type { BranchingEngine } from "./Engines.js"
import { adminSession, copyDatabase, type EngineClient, type EngineFailure, listOwnedObjects } from "./EngineSql.js"
import { type CopyMark, pausedPosition, readHeartbeat } from "./Freshness.js"
import type { MirrorSession } from "./MirrorSessions.js"
import {
  dropOrphanDdlMarkers,
  dropOrphanSpareOwners,
  dropSpare,
  handOutSpare,
  hasDdlMarker,
  mirrorCatalogs,
  mirrorFingerprint,
  type MirrorFingerprint,
  mirrorOrigins,
  type Spare,
  SPARE_PREFIX,
  type SpareStamp,
  stampSpare,
  warmSpare
} from "./SpareSql.js"

/**
 * Which engines keep a spare copy of their mirror, cut ahead of the next create
 * (BRANCH_SPARE_COPIES): `auto` those whose copies are reflink clones (a spare shares the mirror's
 * blocks, and cutting one costs a clone), `on` every engine, `off` none.
 */
export type SpareCopies = "auto" | "on" | "off"

/** A spare that became a create's copy, with the mark that copy holds. */
export interface HandedOut {
  readonly spare: string
  readonly mark: CopyMark
}

/** A spare just cut, and its warm-up running in the background (a create must not take it before that ends). */
export interface CutSpare {
  readonly name: string
  readonly warming: Fiber.RuntimeFiber<void>
}

/**
 * Spare copies of a mirror on reflink engines: a copy cut from a paused mirror ahead of the next
 * create, stamped with what it was cut from, readied for a branch, and handed out in place of a
 * copy while the mirror still holds what it held then. The Copier's batches decide when; this
 * says which spare stands and does the handing out, the cut and the clean-up (SQL in SpareSql).
 */
export interface Spares {
  /** Whether the engine keeps spares. */
  readonly keptOn: (engine: BranchingEngine) => boolean
  /**
   * A spare that holds the mirror as it is now, paused or not: nothing has changed the mirror
   * since it was cut. No worker committed a transaction into it (its subscriptions' origins stand
   * where they stood) and its schema is the same (the connector changes it only under the copy
   * lock the batch holds, and a TRUNCATE gives a table new files in `pg_class`). Null when none
   * does (a pause then looks again, with the mirror's row counters: the heartbeat's transactions
   * move the origins but no user table).
   */
  readonly standing: (admin: EngineClient, engine: BranchingEngine, mirrorSession: MirrorSession, found: ReadonlyArray<Spare>) => Effect.Effect<Spare | null, EngineFailure>
  /**
   * A standing spare handed out as `database` without pausing the mirror: the copy holds the
   * mirror as it is now, with the mark the spare's pause read. Null when no spare stands; what
   * fails here is logged and left to the pause.
   */
  readonly handOutRunning: (admin: EngineClient, engine: BranchingEngine, mirrorSession: MirrorSession, found: ReadonlyArray<Spare>, database: string) => Effect.Effect<HandedOut | null>
  /**
   * In a pause, before the sequences are aligned (they stand where the spare's pause aligned them):
   * the first of `candidates` whose stamp matches the paused mirror's fingerprint, handed out as
   * `database`, with the mark the paused mirror holds. Null when none matches.
   */
  readonly handOutPaused: (admin: EngineClient, engine: BranchingEngine, mirror: EngineClient, candidates: ReadonlyArray<Spare>, database: string) => Effect.Effect<HandedOut | null, EngineFailure>
  /**
   * The next create's spare, cut from the paused mirror (its fingerprint as the pause read it,
   * and the mark of the pause's copies) and stamped; then warmed in the background for the branch
   * that will take it (`warmed` runs when that ends). Null when the cut failed (logged).
   */
  readonly cut: (admin: EngineClient, engine: BranchingEngine, fingerprint: MirrorFingerprint & { readonly fingerprint: string }, mark: CopyMark, warmed: Effect.Effect<void>) => Effect.Effect<CutSpare | null, never, PostgresPools>
  /**
   * Once the mirror runs again: the spares `found` as the batch began that were not handed out
   * (they no longer match the mirror, or were never stamped). Answers how many were dropped.
   */
  readonly dropStale: (admin: EngineClient, found: ReadonlyArray<Spare>, used: ReadonlyArray<string>) => Effect.Effect<number>
  /** Placeholder owners and DDL markers left without their spare, on an engine that keeps or kept spares. */
  readonly dropOrphans: (admin: EngineClient, engine: BranchingEngine, hadSpares: boolean) => Effect.Effect<void>
  /** Spares cut and handed out (of those, handed out without a pause) by this process so far. */
  readonly stats: Effect.Effect<{ readonly sparesCut: number; readonly sparesUsed: number; readonly sparesUsedRunning: number }>
}

export const makeSpares = (copies: SpareCopies): Spares => {
  const counters = { sparesCut: 0, sparesUsed: 0, sparesUsedRunning: 0 }
  const keptOn = (engine: BranchingEngine) => copies === "on" || (copies === "auto" && engine.fileCopyClone)

  const standing = (admin: EngineClient, engine: BranchingEngine, mirrorSession: MirrorSession, found: ReadonlyArray<Spare>) =>
    Effect.gen(function* () {
      const stamped = found.flatMap(({ name, stamp }) => (stamp === null ? [] : [{ name, stamp }]))
      if (stamped.length === 0) return null
      const origins = yield* mirrorOrigins(admin, engine.subscriptionNames, engine.mirrorDatabase)
      const unchanged = stamped.filter((s) => s.stamp.origins === origins)
      if (unchanged.length === 0) return null
      // The DDL marker stood still with the rest: no DDL ran in the mirror, no need to read its catalogs.
      if (hasDdlMarker(origins)) return unchanged[0]!
      const catalogs = yield* mirrorCatalogs(yield* mirrorSession.session)
      return unchanged.find((s) => s.stamp.catalogs === catalogs) ?? null
    }).pipe(Effect.withSpan("Spares.standing"))

  const handOutRunning = (admin: EngineClient, engine: BranchingEngine, mirrorSession: MirrorSession, found: ReadonlyArray<Spare>, database: string) =>
    Effect.gen(function* () {
      const spare = yield* standing(admin, engine, mirrorSession, found)
      if (spare === null) return null
      // A spare readied ahead needs no list of what its role is to own; without a session on the
      // mirror (the DDL marker spoke for its schema) the copy's readying searches its own.
      const owned = spare.stamp.owner !== null || hasDdlMarker(spare.stamp.origins) ? null : yield* listOwnedObjects(yield* mirrorSession.session)
      yield* handOutSpare(admin, spare.name, database)
      counters.sparesUsed++
      counters.sparesUsedRunning++
      const mark: CopyMark = { sourceLsn: spare.stamp.sourceLsn, dataAsOf: spare.stamp.dataAsOf, sequencesAligned: true, owned, spareOwner: spare.stamp.owner }
      return { spare: spare.name, mark }
    }).pipe(
      Effect.catchAll((e) => Effect.as(Effect.logWarning("could not hand out a spare of the running mirror; the pause looks again", e), null)),
      Effect.withSpan("Spares.handOutRunning")
    )

  const handOutPaused = (admin: EngineClient, engine: BranchingEngine, mirror: EngineClient, candidates: ReadonlyArray<Spare>, database: string) =>
    Effect.gen(function* () {
      const stamped = candidates.filter((s) => s.stamp !== null)
      if (stamped.length === 0) return null
      const fingerprint = yield* mirrorFingerprint(mirror)
      const matching = fingerprint?.fingerprint == null ? undefined : stamped.find((s) => s.stamp?.fingerprint === fingerprint.fingerprint && s.stamp.catalogs === fingerprint.catalogs)
      if (matching === undefined) return null
      const spareOwner = matching.stamp?.owner ?? null
      const mark: CopyMark = {
        sourceLsn: yield* pausedPosition(admin, engine.subscriptionNames).pipe(Effect.orElseSucceed(() => null)),
        dataAsOf: yield* readHeartbeat(mirror, engine.connectorId).pipe(Effect.orElseSucceed(() => null)),
        sequencesAligned: true,
        owned: spareOwner !== null ? null : yield* listOwnedObjects(mirror),
        spareOwner
      }
      yield* handOutSpare(admin, matching.name, database)
      counters.sparesUsed++
      return { spare: matching.name, mark }
    }).pipe(Effect.withSpan("Spares.handOutPaused"))

  const cut = (admin: EngineClient, engine: BranchingEngine, fingerprint: MirrorFingerprint & { readonly fingerprint: string }, mark: CopyMark, warmed: Effect.Effect<void>) =>
    Effect.gen(function* () {
      const name = `${SPARE_PREFIX}${randomBytes(6).toString("hex")}`
      const made = yield* Effect.exit(
        Effect.gen(function* () {
          const stamp: SpareStamp = {
            fingerprint: fingerprint.fingerprint,
            catalogs: fingerprint.catalogs,
            origins: yield* mirrorOrigins(admin, engine.subscriptionNames, engine.mirrorDatabase),
            sourceLsn: mark.sourceLsn,
            dataAsOf: mark.dataAsOf,
            owner: null
          }
          yield* Effect.scoped(Effect.flatMap(adminSession(engine), (session) => copyDatabase(session, engine, name)))
          yield* stampSpare(admin, name, stamp)
          return stamp
        })
      )
      if (Exit.isFailure(made)) {
        yield* Effect.logWarning("could not cut a spare copy of the mirror", made.cause)
        yield* Effect.ignore(dropSpare(admin, name))
        return null
      }
      counters.sparesCut++
      // Warmed while the mirror resumes (the warm-up logs in to the spare, not the mirror), then
      // stamped with its owner: until then a create that takes it readies it itself.
      const warming = yield* Effect.fork(
        warmSpare(engine, name, mark.owned).pipe(
          Effect.flatMap((owner) => stampSpare(admin, name, { ...made.value, owner })),
          Effect.catchAll((e) => Effect.logWarning("could not ready the spare just cut; the create that takes it readies it itself", e)),
          Effect.zipRight(warmed)
        )
      )
      return { name, warming }
    }).pipe(Effect.withSpan("Spares.cut"))

  const dropStale = (admin: EngineClient, found: ReadonlyArray<Spare>, used: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const stale = found.filter((s) => !used.includes(s.name))
      yield* Effect.forEach(stale, (s) => dropSpare(admin, s.name).pipe(Effect.catchAll((e) => Effect.logWarning("could not drop a stale spare; the next batch tries again", e))), {
        discard: true
      })
      return stale.length
    })

  const dropOrphans = (admin: EngineClient, engine: BranchingEngine, hadSpares: boolean) =>
    // Only where spares are or were kept: on other engines nothing of theirs is left to drop.
    keptOn(engine) || hadSpares
      ? Effect.all([dropOrphanSpareOwners(admin), dropOrphanDdlMarkers(admin)], { discard: true }).pipe(
          Effect.catchAll((e) => Effect.logWarning("could not drop spares' orphaned owners or markers", e))
        )
      : Effect.void

  return { keptOn, standing, handOutRunning, handOutPaused, cut, dropStale, dropOrphans, stats: Effect.sync(() => ({ ...counters })) }
}
