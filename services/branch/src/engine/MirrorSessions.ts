import { Duration, Effect, ExecutionStrategy, Exit, Fiber, Scope } from "effect"
import type { BranchingEngine } from "./Engines.js"
import { connectMirror, enableSubscriptions, type EngineClient, EngineFailure } from "./EngineSql.js"

/** An engine's mirror, as the Copier's queues and kept sessions know it. */
export const mirrorKey = (engine: BranchingEngine) => `${engine.host}:${engine.port}/${engine.mirrorDatabase}`

/** The session on the mirror a batch's pause works on: logged in (or taken over) when first asked for. */
export interface MirrorSession {
  readonly session: Effect.Effect<EngineClient, EngineFailure>
  readonly close: Effect.Effect<void>
}

/** An engine without subscriptions: nothing to pause, so no session (the pause never asks for it). */
const noMirrorSession: MirrorSession = {
  session: Effect.fail(new EngineFailure({ step: "pause", message: "no session on the mirror: it has no subscriptions to pause" })),
  close: Effect.void
}

/** A resume's session on a mirror, kept logged in for the engine's next pause. */
interface KeptSession {
  readonly client: EngineClient
  readonly close: Effect.Effect<void>
  readonly expiry: Fiber.RuntimeFiber<void>
}

/**
 * The Copier's sessions on mirrors: a login (TLS + SCRAM and a new backend, tens of milliseconds
 * of the engine's CPU) is what a pause would otherwise start with, so the session a resume logged
 * in on is kept for the engine's next pause, and one is logged in ahead for the batch of a create
 * just accepted. A kept session sits idle on the mirror; another replica's batch that needs the
 * mirror ends it (EngineSql's waitTemplateFree).
 */
export interface MirrorSessions {
  /** A session for a batch's pause, in the batch's scope: see `open` in makeMirrorSessions. */
  readonly open: (engine: BranchingEngine) => Effect.Effect<MirrorSession, never, Scope.Scope>
  /** The engine's subscriptions enabled again, on a new login that is then kept for the next pause. */
  readonly resume: (engine: BranchingEngine) => Effect.Effect<void, EngineFailure>
  /** A login made ahead, in the background, unless one is kept or under way or `busy` says the engine's batches run. */
  readonly warm: (engine: BranchingEngine) => Effect.Effect<void>
  /** Logins on mirrors made so far. */
  readonly logins: Effect.Effect<number>
}

/**
 * `keep`: how long a session stays for the engine's next pause (BRANCH_MIRROR_SESSION_KEEP; zero
 * closes it at once). `busy`: whether the engine's batches run now (a session logged in ahead
 * then would sit on a paused mirror and hold up their copies).
 */
export const makeMirrorSessions = (options: {
  readonly keep: Duration.DurationInput
  readonly busy: (key: string) => boolean
}): Effect.Effect<MirrorSessions, never, Scope.Scope> =>
  Effect.gen(function* () {
    const keepFor = Duration.decode(options.keep)
    let logins = 0

    /** Resumes' sessions kept for the next pause, by engine; closed when their time is up or the Copier goes. */
    const kept = new Map<string, KeptSession>()
    const closeKept = (key: string, session: KeptSession) =>
      Effect.suspend(() => {
        if (kept.get(key) !== session) return Effect.void
        kept.delete(key)
        return session.close
      })
    /** A kept session closed before its time (the Copier ends, or a newer resume replaces it). */
    const dropKept = (key: string, session: KeptSession) => Effect.zipRight(Fiber.interrupt(session.expiry), closeKept(key, session))
    yield* Effect.addFinalizer(() => Effect.forEach([...kept], ([key, session]) => dropKept(key, session), { discard: true }))

    /** A login on the mirror, in the given scope (TLS + SCRAM: the step a kept session saves). */
    const loginOnMirror = (engine: BranchingEngine, scope: Scope.Scope) =>
      Effect.zipLeft(Scope.extend(connectMirror(engine), scope), Effect.sync(() => void logins++))

    /** A logged-in session on the mirror kept for the engine's next pause, in place of any kept before. */
    const keep = (key: string, client: EngineClient, scope: Scope.CloseableScope) =>
      Effect.gen(function* () {
        const previous = kept.get(key)
        if (previous !== undefined) yield* dropKept(key, previous)
        const session: KeptSession = {
          client,
          close: Scope.close(scope, Exit.void),
          // Forked from the batch's release, which runs uninterruptibly: the wait must stay interruptible.
          expiry: yield* Effect.forkDaemon(Effect.interruptible(Effect.zipRight(Effect.sleep(keepFor), Effect.suspend(() => closeKept(key, session)))))
        }
        kept.set(key, session)
      })

    const resume = (engine: BranchingEngine) =>
      Effect.gen(function* () {
        if (engine.subscriptionNames.length === 0) return
        const key = mirrorKey(engine)
        const scope = yield* Scope.make()
        const enabled = yield* Effect.exit(
          Effect.gen(function* () {
            const mirror = yield* loginOnMirror(engine, scope)
            yield* enableSubscriptions(mirror, engine.subscriptionNames)
            return mirror
          })
        ).pipe(Effect.onInterrupt(() => Scope.close(scope, Exit.void)))
        if (Exit.isFailure(enabled) || Duration.toMillis(keepFor) <= 0) {
          yield* Scope.close(scope, Exit.void)
          return yield* enabled
        }
        yield* keep(key, enabled.value, scope)
      }).pipe(Effect.withSpan("MirrorSessions.resume"))

    /** Logins on mirrors made ahead of a batch (warm), by engine, while they run. */
    const warming = new Map<string, Fiber.RuntimeFiber<void>>()

    const warm = (engine: BranchingEngine) =>
      Effect.suspend(() => {
        const key = mirrorKey(engine)
        if (engine.subscriptionNames.length === 0 || Duration.toMillis(keepFor) <= 0 || kept.has(key) || warming.has(key) || options.busy(key)) return Effect.void
        return Effect.gen(function* () {
          const scope = yield* Scope.make()
          const login = Effect.gen(function* () {
            const client = yield* Effect.exit(loginOnMirror(engine, scope))
            // A batch that begins meanwhile waits for this login (open), so none is paused with
            // it kept; one kept since (another path) stays, and this one closes.
            if (Exit.isFailure(client) || kept.has(key)) return yield* Scope.close(scope, Exit.void)
            yield* keep(key, client.value, scope)
          }).pipe(
            Effect.ensuring(Effect.sync(() => warming.delete(key))),
            Effect.withSpan("MirrorSessions.warm")
          )
          warming.set(key, yield* Effect.forkDaemon(login))
        })
      })

    /**
     * The session on the mirror the pause works on, opened once the batch holds the copy lock (a
     * session waiting for the lock would sit on the mirror and hold up the holder's copy): the
     * one the engine's last resume kept, when another replica's batch has not ended it since
     * (asked `select 1` first), else a new login. Closed by the pause, or with the batch's
     * scope when there is no pause.
     */
    const open = (engine: BranchingEngine): Effect.Effect<MirrorSession, never, Scope.Scope> =>
      Effect.gen(function* () {
        if (engine.subscriptionNames.length === 0) return noMirrorSession
        const sessionScope = yield* Effect.flatMap(Effect.scope, (scope) => Scope.fork(scope, ExecutionStrategy.sequential))
        const login = loginOnMirror(engine, sessionScope)
        const key = mirrorKey(engine)
        // Chosen when first asked for (a spare handed out on the DDL marker's word asks for none
        // before it): the kept session, once a login made ahead for this batch (warm) is done (it
        // is under way already), else a new login. Asked for by a spare's hand-out and then by
        // the pause: one login at most.
        const session = Effect.gen(function* () {
          const ahead = warming.get(key)
          if (ahead !== undefined) yield* Fiber.await(ahead)
          const previous = kept.get(key)
          if (previous === undefined) return yield* login
          kept.delete(key)
          yield* Fiber.interruptFork(previous.expiry)
          yield* Scope.addFinalizer(sessionScope, previous.close)
          return yield* previous.client.query("pause", "select 1").pipe(
            Effect.as(previous.client),
            Effect.catchAll(() => login)
          )
        })
        return { session: yield* Effect.cached(session), close: Scope.close(sessionScope, Exit.void) }
      })

    return { open, resume, warm, logins: Effect.sync(() => logins) }
  })
