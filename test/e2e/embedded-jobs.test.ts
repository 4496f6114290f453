/**
 * The embedded mode's shape for background work: identity, the operation unit and a worker unit
 * (the copier) in one process, meeting over in-memory Connect transports, one in-memory bus and
 * in-memory change announcements, with the same kit runtime as production: outbox → relay → bus →
 * JobWorker → operation reports, and a waiting read woken in memory.
 */
import { createRouterTransport, type Transport } from "@connectrpc/connect"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Entitlements, identityLive, identityRoutes } from "@scion/identity"
import { ABANDONED, asService, enqueueJob, InMemoryBus, JobWorker, makeUnitOperations, newOperationId, OperationClient, OutboxRelay, type Routes, ServiceIdentity, transactional, unitDatabase } from "@scion/kit"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { IdentityClient, OperationChanges, OperationLive, operationRoutes } from "@scion/operation"
import { OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { copyTable } from "@scion/test-worker"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"

const inMemory = (routes: ReadonlyArray<Routes>): Transport => createRouterTransport((router) => routes.forEach((register) => register(router)))

/** Identity and the operation unit in-process; what a worker unit needs from them. */
const Units = Layer.unwrapScoped(
  Effect.gen(function* () {
    const identity = inMemory(yield* identityRoutes)
    const operationUnit = yield* Layer.build(OperationLive.pipe(Layer.provide(Layer.merge(IdentityClient.fromTransport(identity), OperationChanges.inMemory))))
    const operation = inMemory(yield* Effect.provide(operationRoutes, operationUnit))
    return Layer.merge(ServiceIdentity.layer("copier", identity), OperationClient.fromTransport(operation))
  })
).pipe(Layer.provide(identityLive(Entitlements.unlimited)))

const CopierDatabase = unitDatabase({ schema: "copier", migrations: new URL("../worker/migrations/", import.meta.url) })

const Copier = Layer.mergeAll(
  JobWorker.layer({ ...copyTable("copier"), ackWait: Duration.seconds(5), heartbeatInterval: Duration.millis(500), maxAttempts: 2, backoff: [Duration.millis(100)] }),
  OutboxRelay.layer({ pollInterval: Duration.millis(20) })
)

const Embedded = Layer.unwrapScoped(
  Effect.map(freshDatabase("scion_embedded_jobs"), (url) =>
    Copier.pipe(
      Layer.provideMerge(Layer.mergeAll(Units, CopierDatabase)),
      Layer.provide(InMemoryBus.layer),
      Layer.provide(withConfig({ DATABASE_URL: url, SERVICE_CREDENTIAL: "embedded-test-credential" }))
    )
  )
).pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))

let counter = 0

/** What a unit starting work does: the operation first, then its job in the outbox. */
const startCopy = (payload: Record<string, unknown>) =>
  Effect.gen(function* () {
    const operations = yield* OperationClient
    const sql = yield* SqlClient.SqlClient
    const id = `op_embedded${Date.now().toString(36)}${(counter++).toString(36)}`
    const orgId = "org_embedded"
    yield* asService(operations.createOperation({ id, orgId, type: OperationType.CONNECTOR_DISCOVERY, resourceId: `copier:${id}` }))
    yield* sql.withTransaction(enqueueJob({ unit: "copier", type: "copy_table", operationId: id, orgId, payload }))
    return id
  })

const settle = (id: string) =>
  Effect.gen(function* () {
    const operations = yield* OperationClient
    for (let i = 0; i < 6; i++) {
      const { operation } = yield* asService(operations.getOperation({ id, waitSeconds: 10 }))
      if (operation!.status === OperationStatus.COMPLETED || operation!.status === OperationStatus.FAILED) return operation!
    }
    return yield* Effect.dieMessage(`operation ${id} did not settle`)
  })

describe("embedded mode: background work with the in-memory adapters", () => {
  layer(Embedded, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("runs a job from the outbox to a completed operation, progress and result included", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`create table public.embedded_src (id bigint primary key, payload text not null)`
        yield* sql`insert into public.embedded_src select g, md5(g::text) from generate_series(1, 5000) g`
        const id = yield* startCopy({ source_table: "public.embedded_src", target_table: "public.embedded_dst", batch_rows: 500 })
        const operation = yield* settle(id)
        expect(operation.status).toBe(OperationStatus.COMPLETED)
        expect(operation.progress).toBe(100)
        expect(operation.result).toMatchObject({ rows_copied: 5000, batches: 10, target_rows: 5000 })
        expect(operation.startedAt).toBeDefined()
        const [copied] = yield* sql<{ readonly n: string }>`select count(*)::text as n from public.embedded_dst`
        expect(copied!.n).toBe("5000")
        const published = yield* sql<{ readonly published_at: Date | null }>`select published_at from outbox where msg_id = ${id}`
        expect(published[0]!.published_at).not.toBeNull()
      })
    )

    it.effect("fails the operation with the handler's message when the work cannot succeed", () =>
      Effect.gen(function* () {
        const id = yield* startCopy({ source_table: "public.missing_table", target_table: "public.embedded_never" })
        const operation = yield* settle(id)
        expect(operation.status).toBe(OperationStatus.FAILED)
        expect(operation.error).toBe("Source table public.missing_table does not exist")
      })
    )

    it.effect("does not run the job of an operation that ended before its delivery, and leaves the operation as it was", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const operations = yield* OperationClient
        yield* sql`create table public.embedded_ended_src (id bigint primary key, payload text not null)`
        yield* sql`insert into public.embedded_ended_src values (1, 'x')`
        const ended = `op_embedded_ended${Date.now().toString(36)}`
        yield* asService(operations.createOperation({ id: ended, orgId: "org_embedded", type: OperationType.CONNECTOR_DISCOVERY, resourceId: `copier:${ended}` }))
        yield* asService(operations.reportOperation({ id: ended, status: OperationStatus.FAILED, error: "Cancelled before it started" }))
        yield* sql.withTransaction(
          enqueueJob({ unit: "copier", type: "copy_table", operationId: ended, orgId: "org_embedded", payload: { source_table: "public.embedded_ended_src", target_table: "public.embedded_ended_dst" } })
        )
        // A job enqueued after it runs after it (one at a time, in order): once it settles, the first was handled.
        const later = yield* startCopy({ source_table: "public.embedded_ended_src", target_table: "public.embedded_ended_later" })
        expect((yield* settle(later)).status).toBe(OperationStatus.COMPLETED)
        const deliveries = yield* sql<{ readonly n: number }>`select count(*)::int as n from job_deliveries where operation_id = ${ended}`
        expect(deliveries[0]!.n).toBe(0)
        const [target] = yield* sql<{ readonly exists: boolean }>`select to_regclass('public.embedded_ended_dst') is not null as exists`
        expect(target!.exists).toBe(false)
        const { operation } = yield* asService(operations.getOperation({ id: ended }))
        expect(operation).toMatchObject({ status: OperationStatus.FAILED, error: "Cancelled before it started" })
      })
    )

    it.effect("an operation created in a transaction that rolls back is failed, not left pending; one whose transaction commits is left alone", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const operations = yield* OperationClient
        const unitOperations = yield* makeUnitOperations<"connector_discovery", string>((cause) => cause)
        const transaction = transactional(sql)
        const start = (id: string) => unitOperations.create({ id, orgId: "org_embedded", resourceId: `copier:${id}`, type: "connector_discovery" })
        const statusOf = (id: string) => Effect.map(asService(operations.getOperation({ id })), (r) => r.operation!)
        const settled = (id: string) =>
          Effect.gen(function* () {
            for (let i = 0; i < 100; i++) {
              const operation = yield* statusOf(id)
              if (operation.status === OperationStatus.FAILED) return operation
              yield* Effect.sleep("20 millis")
            }
            return yield* statusOf(id)
          })

        // Refused after the create: the rows roll back, the operation is failed.
        const refused = newOperationId("undo")
        expect(yield* Effect.flip(transaction(Effect.zipRight(start(refused), Effect.fail("refused after the create"))))).toBe("refused after the create")
        expect(yield* settled(refused)).toMatchObject({ status: OperationStatus.FAILED, error: ABANDONED })
        // A savepoint that held inside a transaction that then failed: failed too.
        const nested = newOperationId("undo")
        yield* Effect.flip(transaction(Effect.zipRight(transaction(start(nested)), Effect.fail("the outer transaction failed"))))
        expect((yield* settled(nested)).status).toBe(OperationStatus.FAILED)
        // Committed: left to its job (still pending here, where no job runs it).
        const kept = newOperationId("kept")
        yield* transaction(start(kept))
        // Outside any transaction: nothing to undo.
        const bare = newOperationId("bare")
        yield* start(bare)
        // As long as the refused one was given to be failed: nothing comes for these.
        yield* Effect.sleep("2 seconds")
        expect((yield* statusOf(kept)).status).toBe(OperationStatus.PENDING)
        expect((yield* statusOf(bare)).status).toBe(OperationStatus.PENDING)
      })
    )

    it.effect("gives up after the last attempt and says so", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`create table public.embedded_misfit_src (id bigint primary key, payload text not null)`
        yield* sql`insert into public.embedded_misfit_src values (1, 'x')`
        yield* sql`create table public.embedded_misfit_dst (id bigint primary key)`
        const id = yield* startCopy({ source_table: "public.embedded_misfit_src", target_table: "public.embedded_misfit_dst" })
        const operation = yield* settle(id)
        expect(operation.status).toBe(OperationStatus.FAILED)
        expect(operation.error).toMatch(/^Gave up after 2 attempts: /)
        const attempts = yield* sql<{ readonly attempt: number }>`select attempt from job_deliveries where operation_id = ${id} order by id`
        expect(attempts.map((a) => a.attempt)).toEqual([1, 2])
      })
    )
  })
})
