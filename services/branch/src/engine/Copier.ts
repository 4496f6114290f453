import { PostgresPools } from "@scion/kit"
import { Config, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import type { BranchingEngine } from "./Engines.js"
import {
  ADMIN_SESSIONS,
  adminSession,
  alignMirrorSequences,
  awaitTablesCopied,
  copyDatabase,
  databaseExists,
  disableSubscriptions,
  enableSubscriptions,
  type EngineClient,
  EngineFailure,
  listOwnedObjects,
  tablesBeingCopied,
  waitSubscriptionWorkersGone,
  waitTemplateFree
} from "./EngineSql.js"
import { type CopyMark, noMark, pausedPosition, readHeartbeat, runningSubscriptions } from "./Freshness.js"
import { makeMirrorSessions, type MirrorSession, mirrorKey } from "./MirrorSessions.js"
import { type CutSpare, type HandedOut, makeSpares, type SpareCopies } from "./Spares.js"
import { ensureDdlMarker, listSpares, mirrorFingerprint } from "./SpareSql.js"

export type { SpareCopies } from "./Spares.js"

interface Waiting {
  readonly database: string
  readonly done: Deferred.Deferred<CopyMark, EngineFailure>
}

interface Queue {
  engine: BranchingEngine
  readonly waiting: Array<Waiting>
  /** A spare was asked for (prepareSpare) while the queue's batches ran: cut once no copy waits. */
  spareWanted: boolean
  /** Completed when a copy joins the queue, while a batch waits to cut a spare (CopierOptions.spareCutDelay). */
  arrival: Deferred.Deferred<void> | null
}

/** How the Copier spends a pause. */
export interface CopierOptions {
  /** How long the mirror may stay busy after the pause (BRANCH_TEMPLATE_WAIT). */
  readonly templateWait: Duration.DurationInput
  /**
   * How long a pause waits, the mirror running, for the subscription's table syncs to copy the
   * tables the connector copies again after a rewrite (BRANCH_SYNC_WAIT): such a table is empty or
   * partial until then, and so would every copy be.
   */
  readonly syncWait: Duration.DurationInput
  /**
   * Copies that arrive while a pause is younger than this join it (BRANCH_PAUSE_JOIN_WINDOW): the
   * mirror stays paused for them instead of resuming and pausing again. A joining copy holds what
   * the mirror held when it was asked for (paused, the mirror did not change since); the window
   * bounds how long replication waits, so how far behind the source the pause lets it fall.
   */
  readonly joinWindow: Duration.DurationInput
  /** Copies of one pause run on this many sessions at once (BRANCH_COPY_CONCURRENCY). */
  readonly concurrency: number
  /**
   * How long the session a resume logged in on the mirror stays for the engine's next pause
   * (BRANCH_MIRROR_SESSION_KEEP): a pause in that time logs in nowhere. Zero closes it at once.
   */
  readonly mirrorSessionKeep: Duration.DurationInput
  /** Which engines keep a spare copy of their mirror (BRANCH_SPARE_COPIES): see SpareCopies. */
  readonly spares: SpareCopies
  /**
   * After a spare is handed out, its batch waits this long before it cuts the next one (before
   * it pauses the mirror, or with the mirror paused when the spare was handed out in the pause),
   * or less if another copy comes first, which then joins that pause (BRANCH_SPARE_CUT_DELAY,
   * 150 ms). The create that took the spare finishes, is heard and logs in
   * on its branch meanwhile, with the engine and this process to itself: cut at once, the next
   * spare's pause and clone took the same two cores and slowed that create's last steps by ~40 ms.
   */
  readonly spareCutDelay: Duration.DurationInput
}

/**
 * Template copies of a connector's mirror, with the subscription paused around them. One pause
 * serves every create waiting on that engine, and copies that arrive while it is young join it;
 * the rest wait for the next batch, which pauses once for all of them. A pause's copies run on
 * several sessions at once: concurrent FILE_COPY copies share their checkpoints and overlap
 * their writes (measured on a clean cluster: 1.4–2× faster than one after another; less where
 * the disk's fsyncs bound them, see the README).
 * Across processes, a session advisory lock on the engine serialises batches (released by the
 * server if a process dies). The subscriptions are enabled again whatever happens to the copies.
 */
export class Copier extends Context.Tag("@scion/branch/Copier")<
  Copier,
  {
    /**
     * Copies the mirror into `database` (nothing to do when it already exists) and answers the
     * source position and heartbeat the paused mirror held (unknown when the copy was there already).
     */
    readonly copy: (engine: BranchingEngine, database: string) => Effect.Effect<CopyMark, EngineFailure>
    /**
     * A spare cut on an engine that keeps them, ahead of any create (the engine has just become
     * ready, with a new mirror): the first create then takes it as the later ones take theirs.
     * Nothing happens when a spare of the mirror as it is stands already, or on an engine without
     * spares; a batch that runs anyway cuts one. Answers at once: the cut runs in the background,
     * and what fails there is logged.
     */
    readonly prepareSpare: (engine: BranchingEngine) => Effect.Effect<void>
    /**
     * A session on the mirror logged in ahead of the batch of a create just accepted, and kept for
     * it (as a resume's is). Answers at once.
     */
    readonly warmMirror: (engine: BranchingEngine) => Effect.Effect<void>
    /**
     * Pauses (batches) run, databases copied, logins on mirrors made, spares cut and spares handed
     * out (each in place of a copy; of those, handed out before any pause) by this process so far.
     */
    readonly stats: Effect.Effect<{
      readonly pauses: number
      readonly copies: number
      readonly mirrorLogins: number
      readonly sparesCut: number
      readonly sparesUsed: number
      readonly sparesUsedRunning: number
    }>
  }
>() {
  static make(options: CopierOptions): Effect.Effect<Context.Tag.Service<Copier>, never, PostgresPools | Scope.Scope> {
    return Effect.gen(function* () {
      const pools = yield* PostgresPools
      // The queues' batches live as long as the Copier, not as the job that started them: at
      // shutdown they are interrupted (a pause's release resumes the mirror) before the pools
      // they work through are ended.
      const copierScope = yield* Effect.scope
      const queues = new Map<string, Queue>()
      const counters = { pauses: 0, copies: 0 }
      const joinWindowMillis = Duration.toMillis(options.joinWindow)
      const sessions = yield* makeMirrorSessions({ keep: options.mirrorSessionKeep, busy: (key) => queues.has(key) })
      const spares = makeSpares(options.spares)

      /**
       * Pauses the subscriptions and, on the same session, once their workers have exited (the
       * mirror's data no longer changes):
       * - runs `settled` first (a spare handed out from the mirror's fingerprint: nothing below
       *   changes what it compares, since only these alignments move the mirror's sequences);
       * - aligns the mirror's sequences, once for every copy of the pause rather than in each copy,
       *   where on reflink storage it read every page it touched from disk (a clone shares the
       *   mirror's blocks, not its page cache: ~110 ms a copy against ~35 on the mirror, measured
       *   with 30 keyed tables);
       * - lists the objects the copies' roles are to own, so no copy searches its own catalogs for
       *   them (the mirror's schema holds still while the batch holds the copy lock: the connector
       *   changes it only under that lock);
       * - reads the heartbeat the mirror holds, the batch's freshness stamp, so no copy has to open
       *   a session just to read it;
       * - on an engine that keeps spares, reads the mirror's fingerprint (SpareSql): a spare cut
       *   when it was the same holds what a copy cut now would. Only once the sequences are
       *   aligned and the objects listed, as a spare's copy relies on both.
       * What fails here is left to each copy's readying (which reports a failure of its own); a
       * pause never fails once the subscriptions are disabled (only the batch's use resumes them),
       * save with them running: while it waits for a table copied again (BRANCH_SYNC_WAIT), or
       * when one has yet to start.
       * Nothing runs (each copy stamps and readies itself) when no subscription is running.
       */
      const pause = (engine: BranchingEngine, mirrorSession: MirrorSession, mark: (step: string) => Effect.Effect<void>, settledFirst: (mirror: EngineClient) => Effect.Effect<void>) =>
        Effect.gen(function* () {
          if (engine.subscriptionNames.length === 0) return { dataAsOf: null, sequencesAligned: false, owned: null, fingerprint: null }
          const mirror = yield* mirrorSession.session
          yield* mark("logged_in")
          yield* disableSubscriptions(mirror, engine.subscriptionNames)
          yield* mark("disabled")
          // Until the workers are gone the mirror may still change: nothing is read for the copies.
          const workersGone = waitSubscriptionWorkersGone(mirror, engine.subscriptionNames, options.templateWait).pipe(
            Effect.as(true),
            Effect.catchAll((e) => Effect.as(Effect.logWarning("the paused mirror's workers did not exit; each copy readies itself", e), false))
          )
          let settled = yield* workersGone
          yield* mark("workers_gone")
          // A table the connector is copying again is empty or partial until its sync has copied
          // it, and so would every copy be: the mirror runs again until it is copied, then pauses
          // again. Past BRANCH_SYNC_WAIT the pause fails with the mirror running, and so do the
          // batch's copies (their creates can be retried). Asked whether the workers exited or not:
          // a sync cut short leaves its table in part either way.
          const pending = yield* tablesBeingCopied(mirror, engine.subscriptionNames).pipe(
            Effect.catchAll((e) => Effect.as(Effect.logWarning("could not read the paused mirror's copies; copying without waiting for them", e), { copying: null, toCopyAgain: null }))
          )
          // A table the connector has yet to copy again holds the mirror's own values (a rewrite's):
          // the connector starts that copy under the lock this batch holds, so the batch lets go,
          // the mirror running, and its creates are tried again (the job retries within seconds).
          if (pending.toCopyAgain !== null) {
            yield* enableSubscriptions(mirror, engine.subscriptionNames)
            return yield* new EngineFailure({
              step: "pause",
              message: `a schema change rewrote ${pending.toCopyAgain} on the source and the mirror copies it again first: a branch now would hold the mirror's own values; try again in a moment`
            })
          }
          if (pending.copying !== null) {
            yield* enableSubscriptions(mirror, engine.subscriptionNames)
            // Interruptible (the pause is the batch's acquisition): a shutdown leaves the mirror running.
            yield* Effect.interruptible(awaitTablesCopied(mirror, engine.subscriptionNames, options.syncWait))
            yield* disableSubscriptions(mirror, engine.subscriptionNames)
            settled = yield* workersGone
            yield* mark("tables_copied")
          }
          if (settled) yield* settledFirst(mirror)
          const sequencesAligned =
            settled &&
            (yield* alignMirrorSequences(mirror).pipe(
              Effect.as(true),
              Effect.catchAll((e) => Effect.as(Effect.logWarning("could not align the paused mirror's sequences; each copy aligns its own", e), false))
            ))
          yield* mark("aligned")
          const owned = settled
            ? yield* listOwnedObjects(mirror).pipe(
                Effect.catchAll((e) => Effect.as(Effect.logWarning("could not list the paused mirror's objects; each copy searches its own", e), null))
              )
            : null
          yield* mark("listed")
          const dataAsOf = yield* readHeartbeat(mirror, engine.connectorId).pipe(Effect.orElseSucceed(() => null))
          // Before the fingerprint a spare's stamp takes: the marker then speaks for every DDL after it.
          if (spares.keptOn(engine) && settled) yield* ensureDdlMarker(mirror, engine.mirrorDatabase).pipe(Effect.catchAll((e) => Effect.logWarning("could not install the mirror's DDL marker; spares are checked against its catalogs", e)))
          const fingerprint =
            spares.keptOn(engine) && sequencesAligned && owned !== null
              ? yield* mirrorFingerprint(mirror).pipe(
                  Effect.catchAll((e) => Effect.as(Effect.logWarning("could not read the paused mirror's fingerprint; no spare is used or cut", e), null))
                )
              : null
          yield* mark("fingerprinted")
          return { dataAsOf, sequencesAligned, owned, fingerprint }
        }).pipe(Effect.ensuring(mirrorSession.close), Effect.withSpan("Copier.pause"))

      /** Waiters whose database exists already (a crashed worker copied it) are answered now; the rest are left to copy. */
      const toCopy = (admin: EngineClient, waiting: ReadonlyArray<Waiting>) =>
        Effect.gen(function* () {
          const todo: Array<Waiting> = []
          for (const w of waiting) {
            if (yield* databaseExists(admin, w.database)) yield* Deferred.succeed(w.done, noMark)
            else todo.push(w)
          }
          return todo
        })

      /** One copy on a session of its own from the engine's pool; its waiter gets its own outcome. */
      const copyOne = (engine: BranchingEngine, w: Waiting, mark: CopyMark) =>
        Effect.scoped(Effect.flatMap(adminSession(engine), (session) => copyDatabase(session, engine, w.database))).pipe(
          Effect.exit,
          Effect.flatMap((exit) => Deferred.done(w.done, Exit.as(exit, mark)))
        )

      /**
       * The pause's copies on `concurrency` sessions, each taking the next copy as soon as it is
       * free: first the batch's own, then those that arrived since, while the pause is young.
       * (Copies used to run in rounds, each waiting for the slowest of the one before: ten creates
       * at once paused for one copy, then joined in rounds of four ~250 ms apart.) Answers how
       * many copies were made.
       */
      const copyJoining = (admin: EngineClient, engine: BranchingEngine, queue: Queue, todo: ReadonlyArray<Waiting>, mark: CopyMark, started: number) =>
        Effect.gen(function* () {
          const pending = [...todo]
          let copies = 0
          const refill = yield* Effect.makeSemaphore(1)
          const next = refill.withPermits(1)(
            Effect.gen(function* () {
              if (pending.length === 0 && Date.now() - started < joinWindowMillis && queue.waiting.length > 0) {
                const joined = queue.waiting.splice(0, queue.waiting.length)
                // Taken off the queue here, so answered here if the check fails.
                const fresh = yield* toCopy(admin, joined).pipe(
                  Effect.catchAllCause((cause) => Effect.as(Effect.forEach(joined, (w) => Deferred.failCause(w.done, cause), { discard: true }), []))
                )
                pending.push(...fresh)
              }
              const taken = pending.shift()
              if (taken !== undefined) {
                copies++
                counters.copies++
              }
              return taken
            })
          )
          const session = Effect.gen(function* () {
            for (let w = yield* next; w !== undefined; w = yield* next) yield* copyOne(engine, w, mark)
          })
          yield* Effect.all(Array.from({ length: options.concurrency }, () => session), { concurrency: "unbounded", discard: true })
          return copies
        })

      /**
       * After a spare is handed out with no other copy waiting: CopierOptions.spareCutDelay, or
       * until a copy joins the queue (it then joins the pause that cuts the next spare).
       */
      const cutDelay = (queue: Queue, mark: (step: string) => Effect.Effect<void>) =>
        Effect.gen(function* () {
          if (queue.waiting.length > 0) return
          const arrival = yield* Deferred.make<void>()
          queue.arrival = arrival
          // Interruptible: it also runs inside the pause's acquisition, where the race could not end its loser.
          yield* Effect.interruptible(Effect.race(Effect.sleep(options.spareCutDelay), Deferred.await(arrival))).pipe(Effect.ensuring(Effect.sync(() => void (queue.arrival = null))))
          yield* mark("cut_delayed")
        })

      const batch = (engine: BranchingEngine, queue: Queue, waiting: ReadonlyArray<Waiting>) =>
        Effect.scoped(
          Effect.gen(function* () {
            const admin = yield* adminSession(engine)
            // The connector names the lock (engine.proto, copy_lock_key) and takes it around its own subscription changes.
            const lock = engine.copyLockKey
            yield* Effect.acquireRelease(admin.query("lock", "select pg_advisory_lock(hashtext($1))", [lock]), () =>
              admin.query("lock", "select pg_advisory_unlock(hashtext($1))", [lock]).pipe(Effect.ignore)
            )
            const todo = yield* toCopy(admin, waiting)
            // A batch with no waiter at all only cuts a spare (prepareSpare), on a ready engine.
            const spareOnly = waiting.length === 0 && spares.keptOn(engine) && engine.status === "ready" && engine.subscriptionNames.length > 0
            // Nothing to copy (a redelivery after the copy): still make sure the subscriptions run,
            // in case the worker that copied died while they were paused — unless the monitor
            // paused them (a quarantine), which only its release undoes.
            if (todo.length === 0 && !spareOnly) return engine.status === "degraded" ? undefined : yield* sessions.resume(engine)
            // A degraded engine's quarantined subscription stays paused after the copy: only the
            // subscriptions running now are paused and resumed.
            const paused = engine.status === "degraded" ? { ...engine, subscriptionNames: yield* runningSubscriptions(admin, engine.subscriptionNames) } : engine
            const mirrorSession = yield* sessions.open(paused)
            const started = Date.now()
            counters.pauses++
            const marks: Record<string, number> = {}
            const markStep = (step: string) => Effect.sync(() => void (marks[step] = Date.now() - started))
            let copies = 0
            const used: Array<string> = []
            /** The spare this batch cut (set in the pause's use: a holder, as TypeScript does not follow assignments in callbacks). */
            const cut: { spare: CutSpare | null } = { spare: null }
            /** The spares the engine held as the batch began. */
            const found = yield* listSpares(admin).pipe(Effect.catchAll((e) => Effect.as(Effect.logWarning("could not list the engine's spares", e), [])))
            let waitingCopies = todo
            /** The first waiting copy is the spare just handed out; with no other copy waiting, the next spare's cut waits for the create just served to finish. */
            const servedBySpare = (handed: HandedOut) =>
              Effect.gen(function* () {
                yield* Deferred.succeed(waitingCopies[0]!.done, handed.mark)
                used.push(handed.spare)
                waitingCopies = waitingCopies.slice(1)
              })
            if (spareOnly) {
              const standing = yield* spares.standing(admin, engine, mirrorSession, found).pipe(
                Effect.catchAll((e) => Effect.as(Effect.logWarning("could not compare the engine's spares with its mirror; cutting a new one", e), null))
              )
              if (standing !== null) return yield* Effect.logInfo("a spare of the mirror as it is stands already").pipe(Effect.annotateLogs({ engine: mirrorKey(engine), spare: standing.name }))
            } else if (spares.keptOn(engine) && paused.subscriptionNames.length > 0) {
              const handed = yield* spares.handOutRunning(admin, engine, mirrorSession, found, todo[0]!.database)
              if (handed !== null) yield* servedBySpare(handed)
              yield* markStep("handed_out_running")
              if (handed !== null && waitingCopies.length === 0) yield* cutDelay(queue, markStep)
            }
            /**
             * The paused mirror holds what it held when a spare was cut (its fingerprint, read before
             * the sequences are aligned: they stand where that spare's pause aligned them): the first
             * copy is the spare, handed out before the rest of the pause's reads. The rest of the
             * pause (the next spare's cut) then waits for the create just served to finish; the
             * mirror stays paused that much longer.
             */
            const handOutPaused = (mirror: EngineClient) =>
              Effect.gen(function* () {
                if (waitingCopies.length === 0) return
                const handed = yield* spares.handOutPaused(admin, engine, mirror, found.filter((s) => !used.includes(s.name)), waitingCopies[0]!.database)
                if (handed === null) return
                yield* servedBySpare(handed)
                if (waitingCopies.length === 0) yield* cutDelay(queue, markStep)
              }).pipe(
                Effect.catchAll((e) => Effect.logWarning("could not hand out the engine's spare in the pause; copying instead", e)),
                Effect.zipRight(markStep("spare"))
              )
            yield* Effect.acquireUseRelease(
              Effect.tap(pause(paused, mirrorSession, markStep, spares.keptOn(engine) ? handOutPaused : () => Effect.void), () => markStep("paused")),
              ({ dataAsOf, owned, sequencesAligned, fingerprint }) =>
                Effect.gen(function* () {
                  yield* waitTemplateFree(admin, engine.mirrorDatabase, options.templateWait)
                  yield* markStep("free")
                  // Every copy of the batch holds what the paused mirror held.
                  const mark: CopyMark = {
                    sourceLsn: yield* pausedPosition(admin, engine.subscriptionNames).pipe(Effect.orElseSucceed(() => null)),
                    dataAsOf,
                    sequencesAligned,
                    owned,
                    spareOwner: null
                  }
                  copies = yield* copyJoining(admin, engine, queue, waitingCopies, mark, started)
                  yield* markStep("copied")
                  // The next create's spare, cut from this pause once its copies are made (cut beside
                  // them, it slowed them down): the mirror stays paused one clone longer.
                  if (spares.keptOn(engine) && fingerprint?.fingerprint != null) {
                    cut.spare = yield* spares.cut(admin, engine, { fingerprint: fingerprint.fingerprint, catalogs: fingerprint.catalogs }, mark, markStep("spare_warmed"))
                    yield* markStep("spare_cut")
                  }
                }),
              () =>
                sessions.resume(paused).pipe(
                  Effect.retry({ times: 5 }),
                  Effect.catchAll((e) => Effect.logError("could not resume the mirror's subscriptions; the next branch create resumes them", e))
                )
            )
            // Spares that no longer match the mirror (or were never stamped) go, once it runs again.
            const dropped = yield* spares.dropStale(admin, found, used)
            // The batch (and the engine's next one) waits for the warm-up: a spare is handed out only once no session is in it.
            if (cut.spare !== null) yield* Fiber.join(cut.spare.warming)
            yield* spares.dropOrphans(admin, engine, found.length > 0)
            yield* Effect.logInfo("template copies done").pipe(
              Effect.annotateLogs({
                engine: mirrorKey(engine),
                copies,
                pause_ms: Date.now() - started,
                spare_used: used.join(","),
                spare_cut: cut.spare?.name ?? "",
                spares_dropped: dropped,
                ...Object.fromEntries(Object.entries(marks).map(([step, at]) => [`${step}_at_ms`, at]))
              })
            )
          })
        ).pipe(Effect.provideService(PostgresPools, pools), Effect.withSpan("Copier.batch", { attributes: { queued: waiting.length } }))

      /** The queue's batches, one after another, while copies wait (or a spare is wanted, once none does). */
      const drain = (key: string, queue: Queue): Effect.Effect<void> =>
        Effect.gen(function* () {
          while (true) {
            const next = yield* Effect.sync(() => {
              const taken = queue.waiting.splice(0, queue.waiting.length)
              // A batch with copies cuts a spare too.
              const spareOnly = taken.length === 0 && queue.spareWanted
              queue.spareWanted = false
              if (taken.length === 0 && !spareOnly) queues.delete(key)
              return { taken, spareOnly }
            })
            if (next.taken.length === 0 && !next.spareOnly) return
            const exit = yield* Effect.exit(batch(queue.engine, queue, next.taken))
            // A batch that failed before a copy ran fails every waiting copy with its error.
            if (Exit.isFailure(exit)) {
              if (next.spareOnly) yield* Effect.logWarning("could not cut a spare copy of the new mirror; the next create cuts one", exit.cause)
              for (const w of next.taken) yield* Deferred.failCause(w.done, exit.cause)
            } else for (const w of next.taken) yield* Deferred.succeed(w.done, noMark)
          }
        })

      /** The engine's queue, made (and its drain started) when it has none. */
      const enqueue = (engine: BranchingEngine, join: (queue: Queue) => void) =>
        Effect.gen(function* () {
          const start = yield* Effect.sync(() => {
            const key = mirrorKey(engine)
            const existing = queues.get(key)
            if (existing !== undefined) {
              existing.engine = engine
              join(existing)
              return undefined
            }
            const queue: Queue = { engine, waiting: [], spareWanted: false, arrival: null }
            join(queue)
            queues.set(key, queue)
            return { key, queue }
          })
          if (start !== undefined) yield* Effect.forkIn(drain(start.key, start.queue), copierScope)
        })

      const copy = (engine: BranchingEngine, database: string) =>
        Effect.gen(function* () {
          const done = yield* Deferred.make<CopyMark, EngineFailure>()
          yield* enqueue(engine, (queue) => {
            queue.waiting.push({ database, done })
            if (queue.arrival !== null) Deferred.unsafeDone(queue.arrival, Exit.void)
          })
          return yield* Deferred.await(done)
        }).pipe(Effect.withSpan("Copier.copy", { attributes: { database } }))

      const prepareSpare = (engine: BranchingEngine) =>
        spares.keptOn(engine) && engine.subscriptionNames.length > 0
          ? enqueue(engine, (queue) => void (queue.spareWanted = true)).pipe(Effect.withSpan("Copier.prepareSpare"))
          : Effect.void

      const stats = Effect.gen(function* () {
        return { ...counters, mirrorLogins: yield* sessions.logins, ...(yield* spares.stats) }
      })
      return Copier.of({ copy, prepareSpare, warmMirror: sessions.warm, stats })
    })
  }

  /**
   * BRANCH_TEMPLATE_WAIT (10 s), BRANCH_SYNC_WAIT (5 minutes), BRANCH_PAUSE_JOIN_WINDOW (1 s), BRANCH_COPY_CONCURRENCY (4),
   * BRANCH_MIRROR_SESSION_KEEP (10 minutes: creates that come now and then find it too),
   * BRANCH_SPARE_COPIES (auto: engines whose copies are reflink clones), BRANCH_SPARE_CUT_DELAY
   * (150 ms): see CopierOptions.
   */
  static readonly layerConfig: Layer.Layer<Copier, never, PostgresPools> = Layer.scoped(
    Copier,
    Effect.flatMap(
      Config.all({
        templateWait: Config.duration("BRANCH_TEMPLATE_WAIT").pipe(Config.withDefault(Duration.seconds(10))),
        syncWait: Config.duration("BRANCH_SYNC_WAIT").pipe(Config.withDefault(Duration.minutes(5))),
        joinWindow: Config.duration("BRANCH_PAUSE_JOIN_WINDOW").pipe(Config.withDefault(Duration.seconds(1))),
        // The engine's admin pool also holds the batch's lock session and the roles made beside the copies.
        concurrency: Config.integer("BRANCH_COPY_CONCURRENCY").pipe(
          Config.withDefault(4),
          Config.validate({ message: `must be from 1 to ${ADMIN_SESSIONS - 2}`, validation: (n) => n >= 1 && n <= ADMIN_SESSIONS - 2 })
        ),
        mirrorSessionKeep: Config.duration("BRANCH_MIRROR_SESSION_KEEP").pipe(Config.withDefault(Duration.minutes(10))),
        spares: Config.literal("auto", "on", "off")("BRANCH_SPARE_COPIES").pipe(Config.withDefault("auto" as const)),
        spareCutDelay: Config.duration("BRANCH_SPARE_CUT_DELAY").pipe(Config.withDefault(Duration.millis(150)))
      }).pipe(Effect.orDie),
      Copier.make
    )
  )
}
