import { SqlClient } from "@effect/sql"
import { dieOnSqlError, type Principal, quoteIdent, tracedFn } from "@scion/kit"
import { Config, Duration, Effect, Layer, Option, Schedule } from "effect"
import { Connectors } from "../connectors/Connectors.js"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { SourceIntrospector } from "../connectors/SchemaIntrospection.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { type Engine, EngineProvisioner } from "../engine/EngineProvisioner.js"
import { engineSession, onEngineDatabase, onMirrorUnderLock, type PgSession, sourceSession } from "../engine/PgSession.js"
import { makeSessionCache } from "./SessionCache.js"
import { writeHeartbeat } from "./SourceCapture.js"
import { recopyRequests, recopyTables, recordOverdue, TableRecopyTimeout } from "./TableRecopy.js"
import { refreshStructure } from "./StructureRefresh.js"
import { type FollowedEngine, type MirrorChangeResult, SchemaChangesRepo } from "./SchemaChangesRepo.js"

export const DEFAULT_SCHEMA_CHANGES_LIMIT = 500

/** GET …/schema-changes (connectors.read; other orgs' connectors are not found). */
export class SchemaChanges extends Effect.Service<SchemaChanges>()("@scion/connector/SchemaChanges", {
  effect: Effect.gen(function* () {
    const connectors = yield* Connectors
    const repo = yield* SchemaChangesRepo
    const list = tracedFn("SchemaChanges.list")(function* (principal: Principal, input: { readonly connectorId: string; readonly limit: number; readonly offset: number }) {
      const connector = yield* connectors.visible(principal, input.connectorId, "connectors.read")
      return yield* repo.list(connector.id, { limit: input.limit, offset: input.offset })
    })
    return { list } as const
  }),
  dependencies: [SchemaChangesRepo.Default]
}) {}

/**
 * Follows what each capturing mirror did with the source's schema changes: copies its results
 * into `schema_changes`, refreshes the subscription when a new table joined the publication (the
 * refresh copies it), and re-reads the source's structure after an applied change so
 * schema_version, the selected structure and needs_reselection tell the truth. The position only
 * moves past a batch once all of that is done, so a failed round is simply repeated.
 */
export const makeSchemaFollower = (options: { readonly heartbeatInterval: Duration.Duration; readonly recopyTimeout: Duration.Duration }) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* SchemaChangesRepo
  const connectorsRepo = yield* ConnectorsRepo
  const secrets = yield* SecretStore
  const provisioner = yield* EngineProvisioner
  const introspector = yield* SourceIntrospector
  const connect = { applicationName: "scion-schema-follower", connectMillis: 5_000 }

  const detailsOf = (connectorId: string) =>
    storedPostgresDetails(connectorId).pipe(Effect.provideService(ConnectorsRepo, connectorsRepo), Effect.provideService(SecretStore, secrets))
  const provideSources = <A, E>(effect: Effect.Effect<A, E, ConnectorsRepo | SecretStore | SourceIntrospector | SqlClient.SqlClient>) =>
    effect.pipe(
      Effect.provideService(ConnectorsRepo, connectorsRepo),
      Effect.provideService(SecretStore, secrets),
      Effect.provideService(SourceIntrospector, introspector),
      Effect.provideService(SqlClient.SqlClient, sql)
    )

  /** A session on each followed engine's `postgres` database, kept across rounds (it holds no mirror). */
  const engineAdmins = yield* makeSessionCache<PgSession>()
  /** Per connector: the source position its mirror had applied when the follower last read all its results. */
  const readUpTo = new Map<string, string>()

  /**
   * The source position the mirror has applied (its subscription's replication origin), read on
   * the engine's `postgres` database: a result is written by the transaction that applies its
   * change, which moves the origin, so an unmoved origin means nothing new to read and no session
   * on the mirror — which would make a branch's template copy wait for it to leave, and cost a
   * TLS + SCRAM login every round. Null when it cannot tell (the mirror is read then).
   */
  const appliedPosition = (engine: FollowedEngine, running: Engine) =>
    engineAdmins
      .withSession(engine.connector_id, engineSession(running, "postgres", connect), (admin) =>
        admin.query<{ lsn: string | null }>(
          "select o.remote_lsn::text as lsn from pg_subscription s join pg_replication_origin_status o on o.external_id = 'pg_' || s.oid where s.subname = $1",
          [engine.subscription_name]
        )
      )
      .pipe(
        Effect.map((rows) => rows[0]?.lsn ?? null),
        Effect.orElseSucceed(() => null)
      )

  const followOne = (engine: FollowedEngine) =>
    Effect.gen(function* () {
      const running = yield* provisioner.start(engine.connector_id).pipe(Effect.option)
      if (Option.isNone(running)) return
      const applied = yield* appliedPosition(engine, running.value)
      if (applied !== null && readUpTo.get(engine.connector_id) === applied) return
      // Read in full (below) up to at least `applied`: remembered once the round has done everything.
      const readAll = () => Effect.sync(() => void (applied !== null ? readUpTo.set(engine.connector_id, applied) : readUpTo.delete(engine.connector_id)))
      // Read on a session of its own, closed before anything else: a branch batch copies the
      // mirror only once no session is connected to it, and what follows waits on a lock, the
      // source (a remote one is slow) and the control database.
      const { results, mirrored, recopies } = yield* onEngineDatabase(running.value, engine.mirror_database, connect, (mirror) =>
        Effect.gen(function* () {
          const recopies = yield* recopyRequests(mirror)
          const results = yield* mirror.query<MirrorChangeResult & Record<string, unknown>>(
            `select log_id::text as log_id, source_at, applied_at, command_tag, object_identity, statement, status, actions, error, tables_added
             from scion.schema_change_results where log_id > $1 order by schema_change_results.log_id limit 200`,
            [engine.schema_log_position]
          )
          if (results.length === 0) return { results, mirrored: [], recopies }
          const mirrored = yield* mirror.query<{ path: string }>("select schema_name || '.' || table_name as path from scion.mirror_tables order by 1")
          return { results, mirrored, recopies }
        })
      )
      // Tables a change rewrote are copied again before the round goes on (a failure is recorded
      // on the request, for the quarantine monitor, and does not hold the rest of the round up).
      if (recopies.some((request) => request.error === null)) {
        yield* Effect.scoped(
          Effect.gen(function* () {
            const pipeline = { engine: running.value, mirrorDatabase: engine.mirror_database, subscriptionName: engine.subscription_name, publicationName: engine.publication_name }
            yield* recordOverdue(pipeline, recopies, { ...connect, copyTimeout: options.recopyTimeout })
            const details = yield* detailsOf(engine.connector_id)
            // An unreachable source is the subscription's to report: the copy waits, quietly, for the next round.
            const source = yield* sourceSession(details, details.password, { ...connect, queryMillis: 30_000 }).pipe(
              Effect.tapError((e) => Effect.logDebug("the source could not be reached to copy a table again", e)),
              Effect.option
            )
            if (Option.isNone(source)) return
            const copied = yield* recopyTables(pipeline, source.value, recopies, { ...connect, copyTimeout: options.recopyTimeout })
            if (copied > 0) yield* Effect.logInfo("tables copied again after a rewriting change").pipe(Effect.annotateLogs({ connector_id: engine.connector_id, tables: copied }))
          })
        ).pipe(Effect.catchAll((e) => Effect.logWarning("a table could not be copied again", e).pipe(Effect.annotateLogs({ connector_id: engine.connector_id }))))
      }
      if (results.length === 0) return yield* readAll()
      if (results.some((r) => r.tables_added.length > 0)) {
        // New tables joined the publication on the source: the refresh starts their copy.
        yield* onMirrorUnderLock(running.value, engine.mirror_database, connect, (mirror) =>
          mirror.query(`alter subscription ${quoteIdent(engine.subscription_name)} refresh publication with (copy_data = true)`)
        )
      }
      const details = yield* detailsOf(engine.connector_id)
      // An applied change moves the structure, and so does a table made but skipped (no replica
      // identity yet): it is listed as unresolved at once, not at the next applied change.
      if (results.some((r) => r.status === "applied" || (r.status === "skipped" && /^(CREATE TABLE|CREATE TABLE AS|SELECT INTO)$/.test(r.command_tag)))) {
        yield* refreshStructure(engine.connector_id).pipe(provideSources)
      }
      yield* repo.recordCaptured(
        engine.connector_id,
        results,
        mirrored.map((m) => `${details.database}.${m.path}`)
      )
      // A full page may have more behind it: read again next round.
      if (results.length < 200) yield* readAll()
      yield* Effect.logInfo("schema changes followed").pipe(
        Effect.annotateLogs({
          connector_id: engine.connector_id,
          applied: results.filter((r) => r.status === "applied").length,
          skipped: results.filter((r) => r.status === "skipped").length,
          failed: results.filter((r) => r.status === "failed").length
        })
      )
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("following schema changes failed", cause).pipe(Effect.annotateLogs({ connector_id: engine.connector_id }))),
      Effect.withSpan("SchemaFollower.follow", { attributes: { connectorId: engine.connector_id } })
    )

  const sources = yield* makeSessionCache<PgSession>()

  /** When each connector's next heartbeat is due (this replica's; two replicas only write twice as often). */
  const heartbeatDue = new Map<string, number>()
  const beat = (connectorId: string) =>
    Effect.gen(function* () {
      const now = Date.now()
      if ((heartbeatDue.get(connectorId) ?? 0) > now) return
      heartbeatDue.set(connectorId, now + Duration.toMillis(options.heartbeatInterval))
      // The source's session stays open between beats. (A mirror's never does: a template copy
      // refuses to start while any other session is connected to the mirror database.)
      yield* sources.withSession(
        connectorId,
        Effect.flatMap(detailsOf(connectorId), (details) => sourceSession(details, details.password, { ...connect, queryMillis: 5_000 })),
        (source) => writeHeartbeat(source, connectorId)
      )
    }).pipe(Effect.catchAllCause((cause) => Effect.logDebug("heartbeat not written", cause).pipe(Effect.annotateLogs({ connector_id: connectorId }))))

  const round = Effect.all(
    [
      Effect.flatMap(repo.capturingEngines, (engines) =>
        // Sessions on engines no longer followed close.
        Effect.zipRight(
          engineAdmins.closeAllBut(new Set(engines.map((e) => e.connector_id))),
          Effect.forEach(engines, followOne, { concurrency: 4, discard: true })
        )
      ),
      Effect.flatMap(repo.heartbeatEngines, (engines) =>
        // Sessions of connectors gone (deleted, or no longer set up) close.
        Effect.zipRight(
          sources.closeAllBut(new Set(engines.map((e) => e.connector_id))),
          Effect.forEach(engines, (e) => beat(e.connector_id), { concurrency: 4, discard: true })
        )
      )
    ],
    { concurrency: 2, discard: true }
  ).pipe(
    dieOnSqlError,
    Effect.catchAllCause((cause) => Effect.logWarning("schema follower round failed", cause))
  )
  return { round } as const
})

/**
 * SCHEMA_FOLLOW_INTERVAL (default 1 s): how often mirrors' results are read;
 * REPLICATION_HEARTBEAT_INTERVAL (default 5 s): how often the heartbeat is written on each source;
 * TABLE_RECOPY_TIMEOUT (default 10 min): how long a table copied again may take (branch creates wait meanwhile).
 */
export const SchemaFollowerConfig = Config.all({
  interval: Config.duration("SCHEMA_FOLLOW_INTERVAL").pipe(Config.withDefault(Duration.seconds(1))),
  heartbeatInterval: Config.duration("REPLICATION_HEARTBEAT_INTERVAL").pipe(Config.withDefault(Duration.seconds(5))),
  recopyTimeout: TableRecopyTimeout
})

/** Runs the follower for the life of the layer. */
export const SchemaFollowerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* SchemaFollowerConfig.pipe(Effect.orDie)
    const follower = yield* makeSchemaFollower(config)
    yield* Effect.forkScoped(follower.round.pipe(Effect.repeat(Schedule.spaced(config.interval))))
  })
).pipe(Layer.provide(SchemaChangesRepo.Default))
