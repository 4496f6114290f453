/**
 * The branch create and delete jobs against a REAL engine: two local Postgres 18 clusters from
 * the connector's LocalEngineProvisioner (TLS only, SCRAM), one as the source with a publication,
 * one as the engine with a mirror database subscribed to it. A branch is created through
 * Branches.create and the create job, then used with real psql over TLS. Access is the identity
 * unit's answer and operations are the operation unit's (each on a database of its own, over
 * HTTP/2 gRPC: test/support/units.ts); the connector's engine lookup is a stand-in here (the e2e
 * tests run it for real).
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type Engine, EngineProvisioner, LocalEngineProvisionerLive } from "@scion/connector"
import { GENERATED_PASSWORD_SCRAM_ITERATIONS, type Job, JobFailed, OperationEnded, type Principal, PostgresPools } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { ConfigProvider, type Context, Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import pg from "pg"
import { answeredForCaller, IdentityOverTheWire, IdentityUnit, IdentityWireLive, newOrg, newUser, newWorker, OperationUnitOverTheWire } from "../../../test/support/units.js"
import {
  BranchOperations,
  Branches,
  BranchesRepo,
  BranchServices,
  type BranchingEngine,
  Copier,
  snapshotCreateJob,
  Snapshots,
  SnapshotsRepo,
  createJob,
  FreshnessConfig,
  deleteJob,
  Engines,
  OrgAccess,
  Passwords,
  PlanLimits
} from "../src/index.js"

const dataDir = join(tmpdir(), `scion-branch-test-${randomBytes(5).toString("hex")}`)
const sourceId = `con_src${randomBytes(4).toString("hex")}`
const engineId = `con_eng${randomBytes(4).toString("hex")}`
/** The source time of the one heartbeat the source holds: every branch's data_as_of. */
const HEARTBEAT_AT = "2026-03-04T05:06:07.089Z"

const provisioner = LocalEngineProvisionerLive.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["ENGINE_DATA_DIR", dataDir]])))))
const runProvisioner = <A, E>(effect: Effect.Effect<A, E, EngineProvisioner>) => Effect.runPromise(Effect.provide(effect, provisioner))

const query = async (e: Engine, database: string, text: string, values: ReadonlyArray<unknown> = []) => {
  const c = new pg.Client({ host: e.host, port: e.port, user: e.superuser.username, password: Redacted.value(e.superuser.password), database, ssl: { rejectUnauthorized: false } })
  await c.connect()
  try {
    return (await c.query(text, [...values])).rows
  } finally {
    await c.end()
  }
}

const psql = (url: string, sql: string) => execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql], { encoding: "utf8", timeout: 30_000 }).trim()

let source: Engine
let engine: Engine
let branching: BranchingEngine

/** The org's owner, who branches here, and a user of no org; both made by identity in beforeAll. */
let orgId: string
let user: Principal
let stranger: Principal

/** OrgAccess.live with the caller's token in the fiber, as the RPC handler would have put it. */
const AccessAsHandled = Layer.effect(
  OrgAccess,
  Effect.map(OrgAccess, (live) => OrgAccess.of({ require: answeredForCaller(live.require) }))
).pipe(Layer.provide(OrgAccess.live), Layer.provide(IdentityOverTheWire))
const FakeEngines = Layer.succeed(Engines, Engines.of({ get: () => Effect.sync(() => branching), sourcePosition: () => Effect.succeed("0/0") }))
const key = randomBytes(32).toString("base64")

const runtime = ManagedRuntime.make(
  Layer.unwrapScoped(
    Effect.map(freshDatabase("branch_test"), (url) =>
      Layer.mergeAll(BranchServices.pipe(Layer.provideMerge(Copier.layerConfig)), FreshnessConfig.layerConfig).pipe(
        Layer.provideMerge(Layer.mergeAll(AccessAsHandled, FakeEngines, BranchOperations.live, PlanLimits.unlimited, Passwords.layerConfig.pipe(Layer.orDie), PostgresPools.layer)),
        Layer.provide(withConfig({ DATABASE_URL: url, SECRET_KEYS: `t1:${key}` }))
      )
    )
  ).pipe(Layer.provideMerge(OperationUnitOverTheWire("branch")), Layer.provideMerge(IdentityWireLive), Layer.provideMerge(IdentityUnit), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))
)

/** The engine's spares: name, database oid and stamp (its comment). */
const spares = async () =>
  (await query(engine, "postgres", `select datname as name, oid::text as oid, shobj_description(oid, 'pg_database') as stamp from pg_database where starts_with(datname, 'scion_spare_')`)) as Array<{
    name: string
    oid: string
    stamp: string | null
  }>

/** The stage reports each job sent, by operation (the worker would pass them to the operation unit). */
const reports = new Map<string, Array<{ readonly stage?: string | undefined; readonly progress?: number | undefined }>>()

const jobOf = (operationId: string, branchId: string, attempt = 1): Job<{ branch_id: string }> => ({
  operationId,
  orgId,
  payload: { branch_id: branchId },
  attempt,
  maxAttempts: 3,
  started: Effect.void,
  report: (update) => Effect.sync(() => void reports.set(operationId, [...(reports.get(operationId) ?? []), { stage: update.stage, progress: update.progress }]))
})

/** The branch's URL as its creator reads it (GET: the operation's result never holds it). */
/** A change on the source, once the mirror has applied it (`check` on the mirror answers `expected`). */
const replicate = async (change: string, check: string, expected: unknown) => {
  await query(source, "app", change)
  const deadline = Date.now() + 30_000
  while (JSON.stringify((await query(engine, "mirror", check))[0]) !== JSON.stringify(expected)) {
    if (Date.now() > deadline) throw new Error(`the mirror did not apply: ${change}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const urlOf = (branchId: string) => runtime.runPromise(Effect.map(Effect.flatMap(Branches, (b) => b.get(user, branchId)), (view) => view.urls.branchUrl as string))

/** Creates a branch through the service and runs its job: the completed operation's result, and the URL. */
const createBranch = (name: string) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const branches = yield* Branches
      const handle = yield* branches.create(user, { connectorId: engineId, name, serviceType: "postgres", idempotencyKey: undefined })
      const result = (yield* createJob.run(jobOf(handle.operationId, handle.branchId))) as Record<string, any>
      const view = yield* branches.get(user, handle.branchId)
      return { handle, result, url: view.urls.branchUrl as string }
    })
  )

beforeAll(async () => {
  ;({ orgId, user, stranger } = await runtime.runPromise(
    Effect.gen(function* () {
      const org = yield* newOrg("Branching")
      return { orgId: org.orgId, user: org.owner, stranger: (yield* newUser("stranger")).principal }
    })
  ))
  ;[source, engine] = await runProvisioner(Effect.all([EngineProvisioner.pipe(Effect.flatMap((p) => p.provision(sourceId))), EngineProvisioner.pipe(Effect.flatMap((p) => p.provision(engineId)))]))
  // Scion's heartbeat travels with the tables, as the connector's setup publishes it.
  const ddl = `create table customers (id bigint primary key, email text not null, name text);
    create table orders (id bigint primary key, customer_id bigint references customers(id), total numeric not null, customer_email text);
    create schema scion; create table scion.heartbeat (connector_id text primary key, at timestamptz not null, lsn pg_lsn not null);`
  await query(source, "postgres", "create database app")
  await query(source, "app", ddl)
  await query(
    source,
    "app",
    `insert into customers select g, 'user' || g || '@example.com', 'Name ' || g from generate_series(1, 200) g;
     insert into orders select g, 1 + g % 200, g * 1.5, 'user' || (1 + g % 200) || '@example.com' from generate_series(1, 1000) g;
     insert into scion.heartbeat values ('${engineId}', '${HEARTBEAT_AT}', pg_current_wal_lsn());
     create publication scion_pub for table customers, orders, scion.heartbeat;`
  )
  await query(engine, "postgres", "create database mirror")
  await query(engine, "mirror", ddl)
  await query(
    engine,
    "mirror",
    `create subscription scion_sub connection 'host=${source.host} port=${source.port} user=${source.superuser.username} password=${Redacted.value(source.superuser.password)} dbname=app sslmode=require sslcert=/nonexistent/client.crt sslkey=/nonexistent/client.key' publication scion_pub`
  )
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const rows = await query(engine, "mirror", "select count(*) filter (where srsubstate <> 'r')::int as pending, (select count(*)::int from orders) as orders from pg_subscription_rel")
    if (rows[0].pending === 0 && rows[0].orders === 1000 && (await query(engine, "mirror", "select count(*)::int as n from scion.heartbeat"))[0].n === 1) break
    await new Promise((r) => setTimeout(r, 200))
  }
  branching = {
    connectorId: engineId,
    orgId,
    status: "ready",
    host: engine.host,
    port: engine.port,
    superuser: { username: engine.superuser.username, password: engine.superuser.password },
    mirrorDatabase: "mirror",
    subscriptionNames: ["scion_sub"],
    copyLockKey: "scion-branch-copy:mirror",
    fileCopyClone: false,
    pooler: Option.none(),
    maskingSuggestions: [],
    quarantine: Option.none()
  }
}, 180_000)

afterAll(async () => {
  await runtime.dispose()
  await runProvisioner(Effect.flatMap(EngineProvisioner, (p) => Effect.all([p.destroy(sourceId), p.destroy(engineId)]))).catch(() => undefined)
  await rm(dataDir, { recursive: true, force: true })
}, 120_000)

describe("branches on a real engine", () => {
  it("creates a branch whose URL works with psql over TLS, writable, independent of mirror and source", async () => {
    await runtime.runPromise(Effect.flatMap(Branches, (b) => b.setMaskingRules(user, engineId, {
      rules: [
        { schema: "public", table: "customers", column: "email", method: "email" },
        { schema: "public", table: "orders", column: "customer_email", method: "email" },
        { schema: "public", table: "customers", column: "nope", method: "hash" }
      ],
      policy: undefined,
      safeColumns: []
    })))
    const started = Date.now()
    const { handle, result, url } = await createBranch("feature-a")
    const elapsed = Date.now() - started
    expect(result).toMatchObject({ branch_id: handle.branchId, name: "feature-a", connector_id: engineId, service_type: "postgres", status: "active" })
    for (const field of ["created_at", "read_ready_at", "write_ready_at", "masked_ready_at"]) expect(typeof result[field]).toBe("string")
    // It said what it was doing: the copy, then the masking (the connector has rules).
    expect(reports.get(handle.operationId)?.map((r) => r.stage)).toEqual(["copy", "mask"])
    // The operation's result (stored, announced, readable by every role) holds no password.
    expect(result).toMatchObject({ branch_url: null, pooled_branch_url: null, pooled_branch_prisma_url: null })
    expect(url).toMatch(/^postgresql:\/\/scion_br_[0-9a-z]+_owner:[^@]+@127\.0\.0\.1:\d+\/scion_br_[0-9a-z]+\?sslmode=require&channel_binding=disable$/)
    expect(elapsed).toBeLessThan(15_000)
    // As fresh as the heartbeat the paused mirror held; Scion's own schema is not in the branch.
    expect(result.data_as_of).toBe(new Date(HEARTBEAT_AT).toISOString())
    expect(psql(url, "select count(*) from pg_namespace where nspname = 'scion'")).toBe("0")

    // Read over TLS with the branch role.
    expect(psql(url, "select count(*) from orders")).toBe("1000")
    expect(psql(url, "select ssl from pg_stat_ssl where pid = pg_backend_pid()")).toBe("t")
    expect(psql(url, "select current_user")).toMatch(/_owner$/)
    // The role's verifier holds the rounds Scion chose for its random passwords, not Postgres's 4,096.
    const role = new URL(url).username
    expect((await query(engine, "postgres", `select split_part(rolpassword, ':', 1) as v from pg_authid where rolname = '${role}'`))[0].v).toBe(
      `SCRAM-SHA-256$${GENERATED_PASSWORD_SCRAM_ITERATIONS}`
    )
    // Masked deterministically: emails replaced, the join on the masked columns still matches.
    expect(psql(url, "select count(*) from customers where email like '%@example.com'")).toBe("0")
    expect(psql(url, "select count(*) from orders o join customers c on c.email = o.customer_email")).toBe("1000")
    // Writable (it owns the tables), DDL too.
    psql(url, "insert into customers values (100001, 'new@x.io', 'New'); update orders set total = 0; create table scratch (x int)")
    expect(psql(url, "select sum(total) from orders")).toBe("0")
    // Mirror and source untouched.
    expect((await query(engine, "mirror", "select sum(total)::text as s from orders"))[0].s).not.toBe("0")
    expect((await query(source, "app", "select count(*)::int as n from customers"))[0].n).toBe(200)
    expect((await query(engine, "mirror", "select count(*)::int as n from customers where email like '%@example.com'"))[0].n).toBe(200)
    // The subscription was resumed: a new source row reaches the mirror.
    await query(source, "app", "insert into customers values (5000, 'late@example.com', 'Late')")
    const deadline = Date.now() + 20_000
    let replicated = 0
    while (Date.now() < deadline && replicated === 0) {
      replicated = (await query(engine, "mirror", "select count(*)::int as n from customers where id = 5000"))[0].n
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(replicated).toBe(1)

    // GET answers the URL again; a stranger sees nothing.
    const view = await runtime.runPromise(Effect.flatMap(Branches, (b) => b.get(user, handle.branchId)))
    expect(view.urls.branchUrl).toBe(url)
    const refused = await runtime.runPromise(Effect.flip(Effect.flatMap(Branches, (b) => b.get(stranger, handle.branchId))))
    expect(refused._tag).toBe("BranchNotFound")
  }, 120_000)

  it("keeps two branches independent, unable to open each other; redelivery of a completed job answers the same branch", async () => {
    const [b, c] = await Promise.all([createBranch("two-b"), createBranch("two-c")])
    psql(b.url, "delete from orders")
    expect(psql(b.url, "select count(*) from orders")).toBe("0")
    expect(psql(c.url, "select count(*) from orders")).toBe("1000")
    // A branch role cannot connect to another branch's database.
    const other = b.url.replace(/\/scion_br_[0-9a-z]+\?/, `/${new URL(c.url).pathname.slice(1)}?`)
    expect(() => psql(other, "select 1")).toThrow()
    const again = await runtime.runPromise(createJob.run(jobOf(b.handle.operationId, b.handle.branchId, 2)))
    expect(again).toMatchObject({ branch_id: b.handle.branchId, branch_url: null, status: "active" })
    expect(await urlOf(b.handle.branchId)).toBe(b.url)
  }, 120_000)

  it("runs the copies waiting on one engine under one pause, several at once", async () => {
    const outcome = await runtime.runPromise(
      Effect.gen(function* () {
        const copier = yield* Copier
        const before = yield* copier.stats
        const names = Array.from({ length: 6 }, (_, i) => `scion_coalesce_${i}_${randomBytes(3).toString("hex")}`)
        yield* Effect.all(names.map((name) => copier.copy(branching, name)), { concurrency: "unbounded" })
        const after = yield* copier.stats
        return { names, pauses: after.pauses - before.pauses, copies: after.copies - before.copies }
      })
    )
    expect(outcome.copies).toBe(6)
    // The first copy starts a batch; the five that arrive while it is young join its pause.
    expect(outcome.pauses).toBe(1)
    // Copied closed: no role of the engine but the superuser may connect before any grant.
    const open = await query(engine, "postgres", `select datname from pg_database where datname in (${outcome.names.map((n) => `'${n}'`).join(", ")}) and has_database_privilege('public', oid, 'CONNECT')`)
    expect(open).toEqual([])
    for (const name of outcome.names) await query(engine, "postgres", `drop database "${name}"`)
    expect((await query(engine, "mirror", "select bool_and(subenabled) as on from pg_subscription"))[0].on).toBe(true)
  }, 120_000)

  it("serves copies asked of two replicas at once: neither's session on the mirror holds the other's copy up", async () => {
    // Two branch unit replicas, a Copier each, the advisory lock on the engine between them; each
    // keeps its resume's session on the mirror longer than the other may wait for the mirror.
    const replica = Copier.make({ templateWait: "3 seconds", syncWait: "1 minute", joinWindow: "1 second", concurrency: 2, mirrorSessionKeep: "10 seconds", spares: "off", spareCutDelay: "150 millis" })
    const outcome = await runtime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const [first, second] = [yield* replica, yield* replica]
          const names = Array.from({ length: 6 }, (_, i) => `scion_replicas_${i}_${randomBytes(3).toString("hex")}`)
          const copyOn = (copier: Context.Tag.Service<Copier>, name: string) => Effect.either(copier.copy(branching, name))
          // At once, then one after another alternating, so each batch meets the other's kept session.
          const together = yield* Effect.all([copyOn(first, names[0]!), copyOn(second, names[1]!)], { concurrency: "unbounded" })
          const alternating = []
          for (const [i, name] of names.slice(2).entries()) alternating.push(yield* copyOn(i % 2 === 0 ? first : second, name))
          return { names, results: [...together, ...alternating] }
        })
      )
    )
    // No batch was held up by the other replica's kept session: one that waited for it would have
    // failed after its 3 s (the session is kept 10 s). Not a timing check: a loaded machine may
    // take seconds over six copies without any batch waiting on the other.
    for (const result of outcome.results) expect(result._tag, JSON.stringify(result)).toBe("Right")
    const made = await query(engine, "postgres", `select count(*)::int as n from pg_database where datname like 'scion_replicas_%'`)
    expect(made[0].n).toBe(6)
    for (const name of outcome.names) await query(engine, "postgres", `drop database "${name}"`)
    expect((await query(engine, "mirror", "select bool_and(subenabled) as on from pg_subscription"))[0].on).toBe(true)
  }, 120_000)

  it("keeps the resume's session on the mirror for the engine's next pause, then closes it; a create accepted logs in ahead of its batch", async () => {
    const mirrorSessions = async () =>
      (await query(engine, "postgres", `select count(*)::int as n from pg_stat_activity where datname = 'mirror' and application_name = 'scion-branch-mirror'`))[0].n
    /** The Copier's sessions on the mirror once there is one (or none after 2 s). */
    const firstMirrorSession = Effect.gen(function* () {
      let sessions = 0
      for (let i = 0; i < 100 && sessions === 0; i++) sessions = yield* Effect.zipLeft(Effect.promise(mirrorSessions), Effect.sleep("20 millis"))
      return sessions
    })
    const outcome = await runtime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const copier = yield* Copier.make({ templateWait: "5 seconds", syncWait: "1 minute", joinWindow: "1 second", concurrency: 2, mirrorSessionKeep: "1500 millis", spares: "off", spareCutDelay: "150 millis" })
          const names = [0, 1, 2].map((i) => `scion_kept_${i}_${randomBytes(3).toString("hex")}`)
          yield* copier.copy(branching, names[0]!)
          // The copy is answered before the resume: wait for the resume's session.
          const keptAfterFirst = yield* firstMirrorSession
          const afterFirst = yield* copier.stats
          yield* copier.copy(branching, names[1]!)
          yield* Effect.sleep("500 millis")
          const afterSecond = yield* copier.stats
          yield* Effect.sleep("2000 millis")
          const keptLater = yield* Effect.promise(mirrorSessions)
          // With none kept, a create just accepted has the Copier log in ahead of its batch, which pauses on that session.
          yield* copier.warmMirror(branching)
          const warmed = yield* firstMirrorSession
          const afterWarm = yield* copier.stats
          yield* copier.copy(branching, names[2]!)
          yield* Effect.sleep("500 millis")
          const afterThird = yield* copier.stats
          return { names, afterFirst, afterSecond, keptAfterFirst, keptLater, warmed, afterWarm, afterThird }
        })
      )
    )
    // The first pause logged in, and so did its resume, whose session stayed on the mirror.
    expect(outcome.afterFirst.mirrorLogins).toBe(2)
    expect(outcome.keptAfterFirst).toBe(1)
    // The second pause used it: only its resume logged in.
    expect(outcome.afterSecond.mirrorLogins - outcome.afterFirst.mirrorLogins).toBe(1)
    // Closed once its time was up.
    expect(outcome.keptLater).toBe(0)
    // Logged in ahead: the third pause used that session, and only its resume logged in again.
    expect(outcome.warmed).toBe(1)
    expect(outcome.afterWarm.mirrorLogins - outcome.afterSecond.mirrorLogins).toBe(1)
    expect(outcome.afterThird.mirrorLogins - outcome.afterWarm.mirrorLogins).toBe(1)
    for (const name of outcome.names) await query(engine, "postgres", `drop database "${name}"`)
    expect((await query(engine, "mirror", "select bool_and(subenabled) as on from pg_subscription"))[0].on).toBe(true)
  }, 120_000)

  it("refuses a second live branch of the same name, and a create in flight", async () => {
    const create = (name: string) => runtime.runPromise(Effect.flip(Effect.flatMap(Branches, (b) => b.create(user, { connectorId: engineId, name, serviceType: "postgres", idempotencyKey: undefined }))))
    expect((await create("feature-a"))._tag).toBe("BranchNameTaken")
    // Accepted, its job not run yet: a second create of the name is the one in flight.
    const pending = await runtime.runPromise(Effect.flatMap(Branches, (b) => b.create(user, { connectorId: engineId, name: "in-flight", serviceType: "postgres", idempotencyKey: undefined })))
    expect(await create("in-flight")).toMatchObject({ _tag: "CreateInProgress", operationId: pending.operationId })
    // Finished, it stays refused by name.
    await runtime.runPromise(createJob.run(jobOf(pending.operationId, pending.branchId)))
    expect((await create("in-flight"))._tag).toBe("BranchNameTaken")
  })

  it("resumes after a crash between steps, and a failed create leaves no database or role", async () => {
    const handle = await runtime.runPromise(
      Effect.flatMap(Branches, (b) => b.create(user, { connectorId: engineId, name: "crashy", serviceType: "postgres", idempotencyKey: undefined }))
    )
    const names = (await runtime.runPromise(Effect.flatMap(BranchesRepo, (r) => r.find(handle.branchId)))).pipe(Option.getOrThrow)
    // A previous attempt copied the database and died before recording it: the redelivery resumes.
    await query(engine, "postgres", `alter subscription scion_sub disable`).catch(() => undefined)
    await query(engine, "mirror", `alter subscription scion_sub disable`)
    await new Promise((r) => setTimeout(r, 500))
    // The session this process's copier keeps on the mirror for its next pause goes, as another replica's copy would end it.
    await query(engine, "postgres", "select pg_terminate_backend(pid) from pg_stat_activity where datname = 'mirror' and application_name = 'scion-branch-mirror'")
    await new Promise((r) => setTimeout(r, 200))
    await query(engine, "postgres", `create database "${names.databaseName}" template mirror strategy file_copy`)
    const copiedOid = (await query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${names.databaseName}'`))[0].oid
    const result = (await runtime.runPromise(createJob.run(jobOf(handle.operationId, handle.branchId, 2)))) as Record<string, any>
    expect(result.status).toBe("active")
    // The copy the earlier attempt made is the branch's: not dropped and made again.
    expect((await query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${names.databaseName}'`))[0]?.oid).toBe(copiedOid)
    const resumedUrl = await urlOf(handle.branchId)
    expect(psql(resumedUrl, "select count(*) from customers")).toBe("201")
    // No pause read the mirror for this copy: its stamp came from the copy itself.
    expect(result.data_as_of).toBe(new Date(HEARTBEAT_AT).toISOString())
    expect(psql(resumedUrl, "select count(*) from pg_namespace where nspname = 'scion'")).toBe("0")
    // The subscription is enabled again after the batch.
    expect((await query(engine, "mirror", "select subenabled from pg_subscription"))[0].subenabled).toBe(true)

    // A create whose engine stops being branchable fails and leaves nothing behind.
    const doomed = await runtime.runPromise(
      Effect.flatMap(Branches, (b) => b.create(user, { connectorId: engineId, name: "doomed", serviceType: "postgres", idempotencyKey: undefined }))
    )
    const doomedRow = (await runtime.runPromise(Effect.flatMap(BranchesRepo, (r) => r.find(doomed.branchId)))).pipe(Option.getOrThrow)
    const saved = branching
    branching = { ...branching, mirrorDatabase: "no_such_mirror" }
    const failure = await runtime.runPromise(Effect.flip(createJob.run({ ...jobOf(doomed.operationId, doomed.branchId, 3) })))
    branching = saved
    expect(failure).toBeInstanceOf(JobFailed)
    expect((await query(engine, "postgres", `select count(*)::int as n from pg_database where datname = '${doomedRow.databaseName}'`))[0].n).toBe(0)
    expect((await query(engine, "postgres", `select count(*)::int as n from pg_roles where rolname = '${doomedRow.roleName}'`))[0].n).toBe(0)
    const after = (await runtime.runPromise(Effect.flatMap(BranchesRepo, (r) => r.find(doomed.branchId)))).pipe(Option.getOrThrow)
    expect(after.status).toBe("failed")

    // The copy and the role are made while the operation is being marked running; an operation that
    // had ended by then (swept) stops the job, and what it made on the engine is dropped again.
    const late = await runtime.runPromise(Effect.flatMap(Branches, (b) => b.create(user, { connectorId: engineId, name: "late", serviceType: "postgres", idempotencyKey: undefined })))
    const lateRow = (await runtime.runPromise(Effect.flatMap(BranchesRepo, (r) => r.find(late.branchId)))).pipe(Option.getOrThrow)
    const ended = new OperationEnded({ operationId: late.operationId, status: "failed" })
    const stopped = await runtime.runPromise(
      Effect.flip(createJob.run({ ...jobOf(late.operationId, late.branchId), started: Effect.zipRight(Effect.sleep("300 millis"), Effect.fail(ended)) }))
    )
    expect((stopped as { _tag?: string })._tag, String(stopped)).toBe("OperationEnded")
    expect((await query(engine, "postgres", `select count(*)::int as n from pg_database where datname = '${lateRow.databaseName}'`))[0].n).toBe(0)
    expect((await query(engine, "postgres", `select count(*)::int as n from pg_roles where rolname = '${lateRow.roleName}'`))[0].n).toBe(0)
    const unchanged = (await runtime.runPromise(Effect.flatMap(BranchesRepo, (r) => r.find(late.branchId)))).pipe(Option.getOrThrow)
    expect(unchanged.status).toBe("creating")
    expect(unchanged.copiedAt).toBeNull()
  }, 120_000)

  it("a snapshot job redelivered after the seal, before the snapshot was recorded ready, makes it ready and sealed", async () => {
    const handle = await runtime.runPromise(Effect.flatMap(Snapshots, (s) => s.create(user, engineId, "sealed-twice")))
    const snapshotJob = (attempt: number): Job<{ snapshot_id: string }> => ({ ...jobOf(handle.operationId, "", attempt), payload: { snapshot_id: handle.snapshotId } })
    const first = (await runtime.runPromise(snapshotCreateJob.run(snapshotJob(1)))) as Record<string, any>
    expect(first.status).toBe("ready")
    const database = `scion_${handle.snapshotId}`
    expect((await query(engine, "postgres", `select datallowconn from pg_database where datname = '${database}'`))[0].datallowconn).toBe(false)
    // The crash window: sealed on the engine, the row not yet ready. The mirror moves on meanwhile
    // (a later heartbeat applied), so a redelivery that read the mirror again would say so.
    await runtime.runPromise(Effect.flatMap(SnapshotsRepo, (r) => r.update(handle.snapshotId, { status: "creating" })))
    const later = "2026-03-05T00:00:00.000Z"
    await replicate(`update scion.heartbeat set at = '${later}'`, `select at = '${later}' as moved from scion.heartbeat`, { moved: true })
    const again = (await runtime.runPromise(snapshotCreateJob.run(snapshotJob(2))).finally(() =>
      replicate(`update scion.heartbeat set at = '${HEARTBEAT_AT}'`, `select at = '${HEARTBEAT_AT}' as back from scion.heartbeat`, { back: true })
    )) as Record<string, any>
    expect(again).toMatchObject({ snapshot_id: handle.snapshotId, status: "ready" })
    // The redelivery keeps what the first attempt's pause read (its copy no longer holds the heartbeat).
    expect(first.data_as_of).toBe(new Date(HEARTBEAT_AT).toISOString())
    expect(first.source_lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/)
    expect(again.data_as_of).toBe(first.data_as_of)
    expect(again.source_lsn).toBe(first.source_lsn)
    expect((await query(engine, "postgres", `select datallowconn, datistemplate from pg_database where datname = '${database}'`))[0]).toEqual({ datallowconn: false, datistemplate: true })
  }, 120_000)

  it("hands the next copy a spare cut from an unchanged mirror, heartbeats aside; a changed mirror's spare is dropped and cut anew", async () => {
    const oidOf = async (database: string) => (await query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${database}'`))[0]?.oid as string | undefined
    /** Runs `change` on the source and waits until the mirror answers `check` with `expected`. */
    const names = Array.from({ length: 6 }, (_, i) => `scion_withspare_${i}_${randomBytes(3).toString("hex")}`)
    /** The spares once the batch that answered a copy has finished with them (it cuts and drops after answering). */
    const sparesWhen = async (count: number, without: ReadonlyArray<string> = []) => {
      const deadline = Date.now() + 15_000
      while (true) {
        const now = await spares()
        if ((now.length === count && now.every((s) => s.stamp !== null && !without.includes(s.name))) || Date.now() > deadline) return now
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    await runtime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const copier = yield* Copier.make({ templateWait: "5 seconds", syncWait: "1 minute", joinWindow: "1 second", concurrency: 2, mirrorSessionKeep: "10 seconds", spares: "on", spareCutDelay: "150 millis" })

          // No spare yet: a copy, and a spare cut from the same pause, stamped with the mirror's fingerprint.
          yield* copier.copy(branching, names[0]!)
          const [cut] = yield* Effect.promise(() => sparesWhen(1))
          expect(JSON.parse(cut!.stamp!)).toMatchObject({ fingerprint: expect.stringMatching(/^[0-9a-f]{32}$/), catalogs: expect.stringMatching(/^[0-9a-f]{32}$/), origins: expect.stringMatching(/^pg_\d+=[0-9A-F]+\/[0-9A-F]+/) })
          expect(yield* copier.stats).toMatchObject({ sparesCut: 1, sparesUsed: 0, copies: 1 })

          // Only the heartbeat moved: the spare is the next copy (the same database, renamed), with
          // the heartbeat the mirror holds now; a new spare takes its place.
          yield* Effect.promise(() => replicate(`update scion.heartbeat set at = '2026-05-06T07:08:09Z'`, "select at = '2026-05-06T07:08:09Z' as moved from scion.heartbeat", { moved: true }))
          const mark = yield* copier.copy(branching, names[1]!)
          expect(mark.dataAsOf?.toISOString()).toBe("2026-05-06T07:08:09.000Z")
          expect(yield* Effect.promise(() => oidOf(names[1]!))).toBe(cut!.oid)
          const afterUse = yield* Effect.promise(() => sparesWhen(1, [cut!.name]))
          expect(afterUse).toHaveLength(1)
          expect(afterUse[0]!.name).not.toBe(cut!.name)
          // The origins moved (the heartbeat's transaction), so it was the pause that found the rows unchanged.
          expect(yield* copier.stats).toMatchObject({ sparesCut: 2, sparesUsed: 1, sparesUsedRunning: 0, copies: 1 })

          // A row changed on the source: the spare no longer matches, so the copy is cut anew and
          // holds the row; the stale spare is dropped and a fresh one cut.
          yield* Effect.promise(() => replicate("insert into customers values (7000, 'spare@example.com', 'Spare')", "select count(*)::int as n from customers where id = 7000", { n: 1 }))
          yield* copier.copy(branching, names[2]!)
          expect((yield* Effect.promise(() => query(engine, names[2]!, "select count(*)::int as n from customers where id = 7000")))[0].n).toBe(1)
          const afterChange = yield* Effect.promise(() => sparesWhen(1, [afterUse[0]!.name]))
          expect(afterChange.map((s) => s.name)).not.toContain(afterUse[0]!.name)
          expect(afterChange).toHaveLength(1)
          expect(yield* copier.stats).toMatchObject({ sparesCut: 3, sparesUsed: 1, copies: 2 })

          // The mirror's schema changed (as the connector's reconciling does): its DDL marker moved, so
          // the spare is not handed out before the pause; copied anew, with the column.
          const marker = async () =>
            (await query(engine, "postgres", "select pg_replication_origin_progress('scion_ddl_' || (select oid from pg_database where datname = 'mirror'), false)::text as lsn"))[0].lsn as string | null
          const markerBefore = yield* Effect.promise(marker)
          expect(markerBefore).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/)
          expect(JSON.parse(afterChange[0]!.stamp!).origins).toContain(`scion_ddl_`)
          yield* Effect.promise(() => query(engine, "mirror", "alter table customers add column spare_probe text"))
          expect(yield* Effect.promise(marker)).not.toBe(markerBefore)
          // A copy not readied yet still holds the trigger: its own DDL runs (there is no marker of its to move), and moves not the mirror's.
          const markerAfter = yield* Effect.promise(marker)
          yield* Effect.promise(() => query(engine, names[2]!, "create table probe_in_copy (id int); alter table probe_in_copy add column note text"))
          expect(yield* Effect.promise(marker)).toBe(markerAfter)
          yield* copier.copy(branching, names[3]!)
          expect((yield* Effect.promise(() => query(engine, names[3]!, "select count(*)::int as n from information_schema.columns where column_name = 'spare_probe'")))[0].n).toBe(1)
          const afterColumn = yield* Effect.promise(() => sparesWhen(1, [afterChange[0]!.name]))
          expect(yield* copier.stats).toMatchObject({ sparesCut: 4, sparesUsed: 1, copies: 3 })

          // A change that writes no `pg_class` row (a column's default) is caught too.
          yield* Effect.promise(() => query(engine, "mirror", "alter table orders alter column total set default 42"))
          yield* copier.copy(branching, names[5]!)
          expect((yield* Effect.promise(() => query(engine, names[5]!, "select column_default from information_schema.columns where table_name = 'orders' and column_name = 'total'")))[0].column_default).toBe("42")
          const afterDefault = yield* Effect.promise(() => sparesWhen(1, [afterColumn[0]!.name]))
          expect(yield* copier.stats).toMatchObject({ sparesCut: 5, sparesUsed: 1, copies: 4 })

          // Unchanged since, not even a heartbeat: handed out again, before the mirror is paused, on the
          // word of the origins and the DDL marker alone (no login on the mirror before it).
          yield* copier.copy(branching, names[4]!)
          expect((yield* Effect.promise(() => query(engine, names[4]!, "select count(*)::int as n from information_schema.columns where column_name = 'spare_probe'")))[0].n).toBe(1)
          yield* Effect.promise(() => sparesWhen(1, [afterDefault[0]!.name]))
          expect(yield* copier.stats).toMatchObject({ sparesCut: 6, sparesUsed: 2, sparesUsedRunning: 1, copies: 4 })
        })
      )
    )
    // Put back what the other tests rely on: no extra column or row, the one heartbeat.
    await query(engine, "mirror", "alter table customers drop column spare_probe; alter table orders alter column total drop default")
    await replicate("delete from customers where id = 7000", "select count(*)::int as n from customers where id = 7000", { n: 0 })
    await replicate(`update scion.heartbeat set at = '${HEARTBEAT_AT}'`, `select at = '${HEARTBEAT_AT}' as back from scion.heartbeat`, { back: true })
    // A Copier that keeps no spares drops the engine's at its next batch.
    const last = `scion_withspare_off_${randomBytes(3).toString("hex")}`
    await runtime.runPromise(Effect.flatMap(Copier, (copier) => copier.copy(branching, last)))
    expect(await sparesWhen(0)).toEqual([])
    for (const name of [...names, last]) await query(engine, "postgres", `drop database "${name}"`)
    expect((await query(engine, "mirror", "select bool_and(subenabled) as on from pg_subscription"))[0].on).toBe(true)
  }, 120_000)

  it("cuts a spare ahead of any create when asked (an engine just made ready), once; the next copy takes it before pausing", async () => {
    const sparesWhen = async (check: (now: Awaited<ReturnType<typeof spares>>) => boolean) => {
      const deadline = Date.now() + 15_000
      while (true) {
        const now = await spares()
        if (check(now) || Date.now() > deadline) return now
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    const name = `scion_withspare_ready_${randomBytes(3).toString("hex")}`
    expect(await spares()).toEqual([])
    await runtime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const copier = yield* Copier.make({ templateWait: "5 seconds", syncWait: "1 minute", joinWindow: "1 second", concurrency: 2, mirrorSessionKeep: "10 seconds", spares: "on", spareCutDelay: "150 millis" })
          // Answered at once; the spare is cut in the background, from a pause of its own.
          yield* copier.prepareSpare(branching)
          const [cut] = yield* Effect.promise(() => sparesWhen((now) => now.length === 1 && now[0]!.stamp !== null))
          expect(cut?.stamp).toBeTruthy()
          expect(yield* copier.stats).toMatchObject({ pauses: 1, copies: 0, sparesCut: 1, sparesUsed: 0 })

          // Asked again while that spare stands: nothing new is cut. The next copy takes the very
          // spare (its database renamed) before any pause, and its batch cuts the one after.
          yield* copier.prepareSpare(branching)
          const mark = yield* copier.copy(branching, name)
          expect((yield* Effect.promise(() => query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${name}'`)))[0].oid).toBe(cut!.oid)
          // Readied ahead: everything in it is owned by a placeholder role named after the spare.
          expect(mark.spareOwner).toBe(cut!.name)
          expect((yield* Effect.promise(() => query(engine, "postgres", `select pg_get_userbyid(datdba) as owner from pg_database where datname = '${name}'`)))[0].owner).toBe(cut!.name)
          const ownedByOthers = `select count(*)::int as n from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and pg_get_userbyid(c.relowner) <> $1`
          expect((yield* Effect.promise(() => query(engine, name, ownedByOthers, [cut!.name])))[0].n).toBe(0)
          const after = yield* Effect.promise(() => sparesWhen((now) => now.length === 1 && now[0]!.name !== cut!.name && JSON.parse(now[0]!.stamp ?? "{}").owner != null))
          expect(after).toHaveLength(1)
          expect(yield* copier.stats).toMatchObject({ copies: 0, sparesCut: 2, sparesUsed: 1, sparesUsedRunning: 1 })

          // A create that takes a readied spare opens no session in it: the placeholder becomes the
          // branch's role (same database, same owner oid), with the branch's password.
          const branches = yield* Branches
          const handle = yield* branches.create(user, { connectorId: engineId, name: "from-a-spare", serviceType: "postgres", idempotencyKey: undefined })
          const placeholderOid = (yield* Effect.promise(() => query(engine, "postgres", `select oid::text as oid from pg_roles where rolname = '${after[0]!.name}'`)))[0].oid
          yield* createJob.run(jobOf(handle.operationId, handle.branchId)).pipe(Effect.provideService(Copier, copier))
          const view = yield* branches.get(user, handle.branchId)
          const url = view.urls.branchUrl as string
          const database = new URL(url).pathname.slice(1)
          const role = decodeURIComponent(new URL(url).username)
          expect((yield* Effect.promise(() => query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${database}'`)))[0].oid).toBe(after[0]!.oid)
          expect((yield* Effect.promise(() => query(engine, "postgres", `select oid::text as oid, rolcanlogin as login from pg_roles where rolname = '${role}'`)))[0]).toEqual({ oid: placeholderOid, login: true })
          expect((yield* Effect.promise(() => query(engine, "postgres", `select count(*)::int as n from pg_roles where rolname = '${after[0]!.name}'`)))[0].n).toBe(0)
          // Its role owns the database and everything in it: it writes, alters and creates.
          expect(psql(url, "insert into customers (id, email) values (900001, 'spare@example.com'); alter table orders add column note text; create table mine (id int); select current_user").split("\n").at(-1)).toBe(role)
          expect(psql(url, "select count(*) from information_schema.schemata where schema_name = 'scion'")).toBe("0")
          expect((yield* Effect.promise(() => query(engine, database, ownedByOthers, [role])))[0].n).toBe(0)
          yield* branches.delete(user, handle.branchId).pipe(Effect.flatMap((started) => deleteJob.run(jobOf(started.operationId, handle.branchId))))

          // A snapshot that takes a readied spare gives everything back to the engine's superuser
          // (nobody owns a snapshot) and drops the placeholder.
          const readied = yield* Effect.promise(() => sparesWhen((now) => now.length === 1 && JSON.parse(now[0]!.stamp ?? "{}").owner != null))
          const snapshot = yield* Effect.flatMap(Snapshots, (sn) => sn.create(user, engineId, "from-a-spare"))
          const made = (yield* snapshotCreateJob
            .run({ ...jobOf(snapshot.operationId, "", 1), payload: { snapshot_id: snapshot.snapshotId } })
            .pipe(Effect.provideService(Copier, copier))) as Record<string, unknown>
          expect(made.status).toBe("ready")
          const snapshotDatabase = `scion_${snapshot.snapshotId}`
          expect((yield* Effect.promise(() => query(engine, "postgres", `select oid::text as oid, pg_get_userbyid(datdba) as owner from pg_database where datname = '${snapshotDatabase}'`)))[0]).toEqual({
            oid: readied[0]!.oid,
            owner: engine.superuser.username
          })
          expect((yield* Effect.promise(() => query(engine, "postgres", `select count(*)::int as n from pg_roles where rolname = '${readied[0]!.name}'`)))[0].n).toBe(0)

          // A marker whose mirror is gone (a deep reset's retired mirror dropped) goes with the next batch.
          yield* Effect.promise(() => query(engine, "postgres", "select pg_replication_origin_create('scion_ddl_4000000000')"))
          yield* copier.copy(branching, `${name}_after`)
          const orphans = async () => (await query(engine, "postgres", "select count(*)::int as n from pg_replication_origin where roname = 'scion_ddl_4000000000'"))[0].n as number
          for (let i = 0; i < 100 && (yield* Effect.promise(orphans)) > 0; i++) yield* Effect.sleep("50 millis")
          expect(yield* Effect.promise(orphans)).toBe(0)
          yield* Effect.flatMap(Snapshots, (sn) => sn.delete(user, snapshot.snapshotId)).pipe(Effect.ignore)
        })
      )
    )
    // A Copier without spares asked for one: nothing happens (and its next batch drops the engine's).
    await runtime.runPromise(Effect.flatMap(Copier, (copier) => copier.prepareSpare(branching)))
    const last = `scion_withspare_off_${randomBytes(3).toString("hex")}`
    await runtime.runPromise(Effect.flatMap(Copier, (copier) => copier.copy(branching, last)))
    expect(await sparesWhen((now) => now.length === 0)).toEqual([])
    for (const database of [name, `${name}_after`, last]) await query(engine, "postgres", `drop database "${database}"`)
  }, 120_000)

  it("cuts the next spare a while after one is handed out before any pause, or at once for a copy that comes meanwhile, which joins that pause", async () => {
    const standing = async (without: ReadonlyArray<string>) => {
      const deadline = Date.now() + 15_000
      while (true) {
        const now = await spares()
        const readied = now.filter((s) => !without.includes(s.name) && JSON.parse(s.stamp ?? "{}").owner != null)
        if (readied.length > 0 || Date.now() > deadline) return readied
        await new Promise((r) => setTimeout(r, 20))
      }
    }
    const oidOf = async (database: string) => (await query(engine, "postgres", `select oid::text as oid from pg_database where datname = '${database}'`))[0]?.oid as string | undefined
    const names = [0, 1, 2].map((i) => `scion_withspare_delay_${i}_${randomBytes(3).toString("hex")}`)
    const delayMillis = 1500
    await runtime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const copier = yield* Copier.make({ templateWait: "5 seconds", syncWait: "1 minute", joinWindow: "1 second", concurrency: 2, mirrorSessionKeep: "10 seconds", spares: "on", spareCutDelay: `${delayMillis} millis` })
          yield* copier.prepareSpare(branching)
          const [first] = yield* Effect.promise(() => standing([]))
          const before = yield* copier.stats

          // Handed out before any pause; the next spare is cut only once the delay has passed.
          const handedAt = Date.now()
          yield* copier.copy(branching, names[0]!)
          expect(yield* Effect.promise(() => oidOf(names[0]!))).toBe(first!.oid)
          const [second] = yield* Effect.promise(() => standing([first!.name]))
          expect(second).toBeDefined()
          expect(Date.now() - handedAt).toBeGreaterThanOrEqual(delayMillis)
          expect(yield* copier.stats).toMatchObject({ pauses: before.pauses + 1, copies: before.copies, sparesUsedRunning: before.sparesUsedRunning + 1 })

          // The next copy takes that spare; one asked for while its batch waits ends the wait and
          // is copied in the pause that cuts the spare after it.
          yield* copier.copy(branching, names[1]!)
          expect(yield* Effect.promise(() => oidOf(names[1]!))).toBe(second!.oid)
          const askedAt = Date.now()
          yield* copier.copy(branching, names[2]!)
          expect(Date.now() - askedAt).toBeLessThan(delayMillis)
          expect(yield* copier.stats).toMatchObject({ pauses: before.pauses + 2, copies: before.copies + 1, sparesUsedRunning: before.sparesUsedRunning + 2 })
          expect((yield* Effect.promise(() => query(engine, names[2]!, "select count(*)::int as n from customers")))[0].n).toBeGreaterThan(0)
          expect(yield* Effect.promise(() => standing([first!.name, second!.name]))).toHaveLength(1)
        })
      )
    )
    // A Copier that keeps no spares drops the engine's at its next batch.
    const last = `scion_withspare_delay_off_${randomBytes(3).toString("hex")}`
    await runtime.runPromise(Effect.flatMap(Copier, (copier) => copier.copy(branching, last)))
    for (let i = 0; i < 100 && (await spares()).length > 0; i++) await new Promise((r) => setTimeout(r, 50))
    expect(await spares()).toEqual([])
    for (const database of [...names, last]) await query(engine, "postgres", `drop database "${database}"`)
  }, 120_000)

  it("deletes a branch: database and role dropped, reads answer not found; connector cleanup drops the rest", async () => {
    const { handle, url } = await createBranch("to-delete")
    const started = await runtime.runPromise(Effect.flatMap(Branches, (b) => b.delete(user, handle.branchId)))
    const done = await runtime.runPromise(deleteJob.run(jobOf(started.operationId, handle.branchId)))
    expect(done).toMatchObject({ branch_id: handle.branchId, deleted: true })
    expect(() => psql(url, "select 1")).toThrow()
    const gone = await runtime.runPromise(Effect.flip(Effect.flatMap(Branches, (b) => b.get(user, handle.branchId))))
    expect(gone._tag).toBe("BranchNotFound")

    // The connector unit's worker, with the service principal identity issues it.
    const service = await runtime.runPromise(newWorker("connector"))
    const deleted = await runtime.runPromise(Effect.flatMap(Branches, (b) => b.removeConnectorBranches(service, engineId)))
    expect(deleted).toBeGreaterThanOrEqual(3)
    expect(await runtime.runPromise(Effect.flatMap(Branches, (b) => b.removeConnectorBranches(service, engineId)))).toBe(0)
    const leftovers = await query(engine, "postgres", "select count(*)::int as n from pg_database where datname like 'scion_br_%'")
    expect(leftovers[0].n).toBe(0)
    const roles = await query(engine, "postgres", "select count(*)::int as n from pg_roles where rolname like 'scion_br_%'")
    expect(roles[0].n).toBe(0)
  }, 120_000)
})
