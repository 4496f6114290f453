import { Effect, Exit, Scope } from "effect"

/**
 * Sessions kept open across rounds, one per key, for loops that ask the same database every
 * few seconds (the heartbeat on each source): a TLS + SCRAM connection costs more than the
 * statement. Never for a mirror database: a template copy refuses to start while another
 * session is connected to it. A session whose use fails is closed and
 * opened again next time; every session closes with the scope that made the cache.
 */
export const makeSessionCache = <S>() => Effect.gen(function* () {
  const sessions = new Map<string, { readonly session: S; readonly scope: Scope.CloseableScope }>()
  const close = (key: string) =>
    Effect.suspend(() => {
      const entry = sessions.get(key)
      sessions.delete(key)
      return entry === undefined ? Effect.void : Scope.close(entry.scope, Exit.void)
    })
  yield* Effect.addFinalizer(() => Effect.forEach([...sessions.keys()], close, { discard: true }))

  /** Runs `use` on the key's session, opening it with `open` when there is none. */
  const withSession = <A, E, R, E2, R2>(key: string, open: Effect.Effect<S, E2, Scope.Scope | R2>, use: (session: S) => Effect.Effect<A, E, R>) =>
    Effect.gen(function* () {
      let entry = sessions.get(key)
      if (entry === undefined) {
        const scope = yield* Scope.make()
        const session = yield* open.pipe(
          Scope.extend(scope),
          Effect.tapErrorCause(() => Scope.close(scope, Exit.void))
        )
        entry = { session, scope }
        sessions.set(key, entry)
      }
      return yield* use(entry.session).pipe(Effect.tapErrorCause(() => close(key)))
    })

  /** Closes every session whose key is not in `keep`. */
  const closeAllBut = (keep: ReadonlySet<string>) => Effect.forEach([...sessions.keys()].filter((key) => !keep.has(key)), close, { discard: true })

  return { withSession, close, closeAllBut } as const
})
