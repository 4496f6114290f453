import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { OperationConfig, Operations, OperationsRepo, staleMessage, sweepOnce } from "../src/index.js"
import { scansDuring } from "@scion/kit/testing"
import { newApiKey, newOperationId, newOrg, newOrgId, newUser, newWorker, operationTestLayer } from "./support.js"

/** An operation a unit's worker created, as units do, with its service principal. */
const setup = (type: "branch_create" | "connector_engine_setup" = "branch_create", orgId = newOrgId()) =>
  Effect.gen(function* () {
    const operations = yield* Operations
    const { principal } = yield* newWorker()
    const { operation } = yield* operations.create(principal, { id: newOperationId(), orgId, type, resourceId: "br_1" })
    return { operations, orgId, principal, operation, id: operation.id }
  })

describe("operations", () => {
  layer(operationTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("creates a pending operation; a repeat returns it; other content with the same id conflicts", () =>
      Effect.gen(function* () {
        const operations = yield* Operations
        const orgId = newOrgId()
        const { principal } = yield* newWorker()
        const id = newOperationId()
        const first = yield* operations.create(principal, { id, orgId, type: "branch_create", resourceId: "br_a" })
        expect(first.created).toBe(true)
        expect(first.operation).toMatchObject({
          id, orgId, type: "branch_create", resourceId: "br_a", status: "pending",
          stage: null, stageLabel: null, progress: null, result: null, error: null, setupStatus: null, startedAt: null, completedAt: null
        })
        const again = yield* operations.create(principal, { id, orgId, type: "branch_create", resourceId: "br_a" })
        expect(again.created).toBe(false)
        expect(again.operation.createdAt).toEqual(first.operation.createdAt)
        const conflict = yield* Effect.flip(operations.create(principal, { id, orgId, type: "branch_create", resourceId: "br_b" }))
        expect(conflict).toMatchObject({ _tag: "OperationIdConflict", operationId: id })
        const otherType = yield* Effect.flip(operations.create(principal, { id, orgId, type: "branch_delete", resourceId: "br_a" }))
        expect(otherType._tag).toBe("OperationIdConflict")
      })
    )

    it.effect("validates input and refuses orgs the caller is not in", () =>
      Effect.gen(function* () {
        const operations = yield* Operations
        const org = yield* newOrg()
        const orgId = org.orgId
        const key = yield* newApiKey(org)
        const principal = key.principal
        for (const id of ["", "op_", "branch_1", "op_has space", `op_${"x".repeat(121)}`]) {
          expect(yield* Effect.flip(key.as(operations.create(principal, { id, orgId, type: "branch_create", resourceId: "br" })))).toMatchObject({ _tag: "InvalidArgument", field: "id" })
        }
        expect(yield* Effect.flip(key.as(operations.create(principal, { id: newOperationId(), orgId, type: "branch_create", resourceId: "" })))).toMatchObject({
          _tag: "InvalidArgument",
          field: "resource_id"
        })
        const other = (yield* newOrg("Other")).orgId
        expect(yield* Effect.flip(key.as(operations.create(principal, { id: newOperationId(), orgId: other, type: "branch_create", resourceId: "br" })))).toMatchObject({
          _tag: "NotAMember",
          orgId: other
        })
        // Identity answers for a session: its owner is a member, a user of no org is not.
        const created = yield* org.owner.as(operations.create(org.owner.principal, { id: newOperationId(), orgId, type: "connector_discovery", resourceId: "con_1" }))
        expect(created.operation.status).toBe("pending")
        const outsider = yield* newUser("outsider")
        expect(yield* Effect.flip(outsider.as(operations.create(outsider.principal, { id: newOperationId(), orgId, type: "connector_discovery", resourceId: "con_1" })))).toMatchObject({
          _tag: "NotAMember",
          orgId
        })
      })
    )

    it.effect("pending → running → completed: started_at and completed_at are set once, terminal never changes", () =>
      Effect.gen(function* () {
        const { operations, principal, id } = yield* setup()
        const running = yield* operations.report(principal, { id, status: "running", stage: "copying", stageLabel: "Copying the template", progress: 10 })
        expect(running).toMatchObject({ status: "running", stage: "copying", stageLabel: "Copying the template", progress: 10, completedAt: null })
        expect(running.startedAt).toBeInstanceOf(Date)
        const later = yield* operations.report(principal, { id, status: "running", stage: "granting", progress: 50 })
        expect(later.startedAt).toEqual(running.startedAt)
        expect(later).toMatchObject({ stage: "granting", stageLabel: "Copying the template", progress: 50 })
        expect(later.updatedAt.getTime()).toBeGreaterThanOrEqual(running.updatedAt.getTime())

        const done = yield* operations.report(principal, { id, status: "completed", progress: 100, result: { branch_id: "br_1", nested: { a: 1, b: [1, 2] } } })
        expect(done).toMatchObject({ status: "completed", progress: 100, result: { branch_id: "br_1", nested: { a: 1, b: [1, 2] } }, error: null })
        expect(done.completedAt).toBeInstanceOf(Date)
        expect(done.startedAt).toEqual(running.startedAt)

        // The identical repeat (keys in another order) is accepted without effect.
        const repeat = yield* operations.report(principal, { id, status: "completed", progress: 100, result: { nested: { b: [1, 2], a: 1 }, branch_id: "br_1" } })
        expect(repeat.updatedAt).toEqual(done.updatedAt)
        expect(repeat.completedAt).toEqual(done.completedAt)

        for (const report of [
          { id, status: "failed" as const, error: "boom" },
          { id, status: "running" as const },
          { id, status: "completed" as const, result: { branch_id: "br_2" } },
          { id, stage: "other" },
          { id }
        ]) {
          expect(yield* Effect.flip(operations.report(principal, report))).toMatchObject({ _tag: "OperationTerminal", status: "completed" })
        }
        const after = yield* operations.get(principal, id, 0)
        expect(after).toEqual(done)
      })
    )

    it.effect("a pending operation may fail directly; failed needs an error and stays failed", () =>
      Effect.gen(function* () {
        const { operations, principal, id } = yield* setup()
        expect(yield* Effect.flip(operations.report(principal, { id, status: "failed" }))).toMatchObject({ _tag: "InvalidArgument", field: "error" })
        expect(yield* Effect.flip(operations.report(principal, { id, status: "running", error: "x" }))).toMatchObject({ _tag: "InvalidArgument", field: "error" })
        expect(yield* Effect.flip(operations.report(principal, { id, status: "running", result: {} }))).toMatchObject({ _tag: "InvalidArgument", field: "result" })
        const failed = yield* operations.report(principal, { id, status: "failed", error: "source unreachable" })
        expect(failed).toMatchObject({ status: "failed", error: "source unreachable" })
        expect(failed.startedAt).toEqual(failed.completedAt)
        yield* operations.report(principal, { id, status: "failed", error: "source unreachable" })
        expect(yield* Effect.flip(operations.report(principal, { id, status: "failed", error: "another" }))).toMatchObject({ _tag: "OperationTerminal" })
      })
    )

    it.effect("progress is 0..100 and never goes down; running never goes back to pending", () =>
      Effect.gen(function* () {
        const { operations, principal, id } = yield* setup()
        for (const progress of [-1, 101, 1.5]) {
          expect(yield* Effect.flip(operations.report(principal, { id, progress }))).toMatchObject({ _tag: "InvalidArgument", field: "progress" })
        }
        expect((yield* operations.report(principal, { id, progress: 0 })).progress).toBe(0)
        expect((yield* operations.report(principal, { id, status: "running", progress: 40 })).progress).toBe(40)
        expect((yield* operations.report(principal, { id, progress: 20 })).progress).toBe(40)
        expect((yield* operations.report(principal, { id, stage: "next" })).progress).toBe(40)
        expect(yield* Effect.flip(operations.report(principal, { id, status: "pending" }))).toMatchObject({ _tag: "InvalidTransition", from: "running", to: "pending" })
      })
    )

    it.effect("concurrent reports on one operation all apply: progress ends at the highest, exactly one completes it", () =>
      Effect.gen(function* () {
        const { operations, principal, id } = yield* setup()
        yield* operations.report(principal, { id, status: "running" })
        yield* Effect.forEach(
          Array.from({ length: 30 }, (_, i) => i + 1),
          (progress) => operations.report(principal, { id, progress }),
          { concurrency: "unbounded", discard: true }
        )
        expect((yield* operations.get(principal, id, 0)).progress).toBe(30)
        const outcomes = yield* Effect.forEach(
          ["a", "b", "c", "d"],
          (tag) => Effect.either(operations.report(principal, { id, status: "completed", result: { by: tag } })),
          { concurrency: "unbounded" }
        )
        const winners = outcomes.filter((o) => o._tag === "Right")
        expect(winners).toHaveLength(1)
        for (const loser of outcomes.filter((o) => o._tag === "Left")) expect(loser.left).toMatchObject({ _tag: "OperationTerminal" })
        const final = yield* operations.get(principal, id, 0)
        expect(final.status).toBe("completed")
        expect(final.result).toEqual(winners[0]!.right.result)
      })
    )

    it.effect("many operations created, started and ended at once each get their own answer", () =>
      Effect.gen(function* () {
        const operations = yield* Operations
        const { principal } = yield* newWorker()
        const orgId = newOrgId()
        const ids = Array.from({ length: 60 }, () => newOperationId())
        // The same id twice in the same moment, same content: one creates it, the other finds it.
        const created = yield* Effect.forEach([...ids, ids[0]!], (id) => operations.create(principal, { id, orgId, type: "branch_create", resourceId: `br_${id}` }), {
          concurrency: "unbounded"
        })
        expect(created.filter((c) => c.operation.id === ids[0]).map((c) => c.created).sort()).toEqual([false, true])
        expect(created.filter((c) => c.created).map((c) => c.operation.resourceId).sort()).toEqual(ids.map((id) => `br_${id}`).sort())
        // Other content under an id being created at the same moment conflicts.
        const racing = newOperationId()
        const raced = yield* Effect.forEach(
          ["br_x", "br_y"],
          (resourceId) => Effect.either(operations.create(principal, { id: racing, orgId, type: "branch_create", resourceId })),
          { concurrency: "unbounded" }
        )
        expect(raced.map((r) => (r._tag === "Right" ? "created" : r.left._tag)).sort()).toEqual(["OperationIdConflict", "created"])
        yield* Effect.forEach(ids, (id) => operations.report(principal, { id, status: "running", progress: 10 }), { concurrency: "unbounded", discard: true })
        const ended = yield* Effect.forEach(
          ids,
          (id, i) => operations.report(principal, i % 2 === 0 ? { id, status: "completed", result: { id } } : { id, status: "failed", error: `failed ${id}` }),
          { concurrency: "unbounded" }
        )
        ended.forEach((operation, i) => {
          expect(operation.id).toBe(ids[i])
          expect(operation.version).toBe(2)
          if (i % 2 === 0) expect(operation).toMatchObject({ status: "completed", result: { id: ids[i] }, error: null, progress: 10 })
          else expect(operation).toMatchObject({ status: "failed", result: null, error: `failed ${ids[i]}` })
        })
        const read = yield* Effect.forEach(ids, (id) => operations.get(principal, id, 0), { concurrency: "unbounded" })
        expect(read.map((operation) => [operation.id, operation.status])).toEqual(ids.map((id, i) => [id, i % 2 === 0 ? "completed" : "failed"]))
      })
    )

    it.effect("reads and reports find their operation by its key, not by reading every operation", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* OperationsRepo
        const orgId = newOrgId()
        // Enough operations that a read of the whole table is the planner's choice only by mistake.
        yield* sql`insert into operations (id, org_id, type, resource_id) select 'op_many_' || g, ${orgId}, 'branch_create', 'br_many_' || g from generate_series(1, 20000) g`
        const { scans } = yield* scansDuring(
          "operations",
          Effect.gen(function* () {
            const found = yield* repo.find("op_many_7")
            expect(Option.map(found, (o) => o.resourceId)).toEqual(Option.some("br_many_7"))
            const written = yield* repo.updateIfVersion("op_many_8", 0, { status: "running", stage: null, stageLabel: null, progress: 5, result: null, error: null, setupStatus: null, start: true, complete: false })
            expect(Option.map(written, (o) => [o.status, o.version])).toEqual(Option.some(["running", 1]))
          })
        )
        expect(scans).toEqual({ seqScans: 0, indexScans: 2 })
      })
    )

    it.effect("setup_status exists only for connector_engine_setup", () =>
      Effect.gen(function* () {
        const engine = yield* setup("connector_engine_setup")
        expect(engine.operation.setupStatus).toEqual({})
        const reported = yield* engine.operations.report(engine.principal, { id: engine.id, status: "running", setupStatus: { tables_ready: 3, tables_total: 5 } })
        expect(reported.setupStatus).toEqual({ tables_ready: 3, tables_total: 5 })
        const branch = yield* setup("branch_create")
        expect(branch.operation.setupStatus).toBeNull()
        expect(yield* Effect.flip(branch.operations.report(branch.principal, { id: branch.id, setupStatus: {} }))).toMatchObject({
          _tag: "InvalidArgument",
          field: "setup_status"
        })
      })
    )

    it.effect("another org's operation is not found, for reads and reports alike", () =>
      Effect.gen(function* () {
        const org = yield* newOrg()
        const { operations, orgId, id } = yield* setup("branch_create", org.orgId)
        const otherOrg = yield* newOrg("Other")
        const stranger = yield* newApiKey(otherOrg)
        const get = (caller: typeof stranger, operationId: string, wait: number) => caller.as(operations.get(caller.principal, operationId, wait))
        expect(yield* Effect.flip(get(stranger, id, 0))).toMatchObject({ _tag: "OperationNotFound", operationId: id })
        expect(yield* Effect.flip(stranger.as(operations.report(stranger.principal, { id, status: "running" })))).toMatchObject({ _tag: "OperationNotFound" })
        expect(yield* Effect.flip(get(otherOrg.owner, id, 0))).toMatchObject({ _tag: "OperationNotFound" })
        expect((yield* get(org.owner, id, 0)).id).toBe(id)
        expect((yield* get(yield* newApiKey(org), id, 0)).id).toBe(id)
        expect(yield* Effect.flip(get(stranger, newOperationId(), 0))).toMatchObject({ _tag: "OperationNotFound" })
        expect(yield* Effect.flip(get(stranger, id, 11))).toMatchObject({ _tag: "InvalidArgument", field: "wait_seconds" })
        expect(yield* Effect.flip(stranger.as(operations.list(stranger.principal, orgId, "br_1")))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(otherOrg.owner.as(operations.list(otherOrg.owner.principal, orgId, "br_1")))).toMatchObject({ _tag: "NotAMember" })
        const listed = yield* org.owner.as(operations.list(org.owner.principal, orgId, "br_1"))
        expect(listed.map((o) => o.id)).toEqual([id])
      })
    )

    it.effect("a wait returns as soon as the operation ends, or when the wait elapses", () =>
      Effect.gen(function* () {
        const { operations, principal, id } = yield* setup()
        yield* operations.report(principal, { id, status: "running" })

        const started = Date.now()
        const waiting = yield* Effect.fork(operations.get(principal, id, 5))
        yield* Effect.sleep("300 millis")
        yield* operations.report(principal, { id, progress: 50 })
        yield* Effect.sleep("200 millis")
        yield* operations.report(principal, { id, status: "completed", result: { ok: true } })
        const answered = yield* Fiber.join(waiting)
        const elapsed = Date.now() - started
        // The changed state, and before the 5 s wait ran out: the end woke it.
        expect(answered.status).toBe("completed")
        expect(elapsed, "answered before its 5 s wait ran out").toBeLessThan(5000 - 500)

        // Terminal already: answers at once.
        const t0 = Date.now()
        expect((yield* operations.get(principal, id, 10)).status).toBe("completed")
        expect(Date.now() - t0, "answered without its 10 s wait").toBeLessThan(10_000 - 1000)

        const idle = yield* setup()
        const t1 = Date.now()
        const stillPending = yield* idle.operations.get(idle.principal, idle.id, 1)
        expect(stillPending.status).toBe("pending")
        // Nothing changed: it held for its own 1 s, not the longest wait (10 s).
        const held = Date.now() - t1
        expect(held, "held for the wait").toBeGreaterThanOrEqual(1000 - 50)
        expect(held, "held for its own wait, not the longest").toBeLessThan(10_000)
      })
    )

    it.effect("the sweeper fails running operations whose worker stopped heartbeating, and nothing else", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const stale = yield* setup()
        yield* stale.operations.report(stale.principal, { id: stale.id, status: "running", progress: 30 })
        const fresh = yield* setup()
        yield* fresh.operations.report(fresh.principal, { id: fresh.id, status: "running" })
        const pending = yield* setup()
        const done = yield* setup()
        yield* done.operations.report(done.principal, { id: done.id, status: "completed" })
        yield* sql`update operations set heartbeat_at = now() - interval '10 minutes' where id in (${stale.id}, ${pending.id})`

        const swept = yield* sweepOnce.pipe(Effect.provideService(OperationConfig, OperationConfig.make({ sweepIntervalSeconds: 15, heartbeatDeadlineSeconds: 60, waitRecheckSeconds: 5 })))
        expect(swept).toContain(stale.id)
        expect(swept).not.toContain(fresh.id)
        expect(swept).not.toContain(pending.id)
        const failed = yield* stale.operations.get(stale.principal, stale.id, 0)
        expect(failed).toMatchObject({ status: "failed", error: staleMessage(60), progress: 30 })
        expect(failed.error).toBe("worker stopped heartbeating: no report for more than 60 seconds")
        expect(failed.completedAt).toBeInstanceOf(Date)
        expect((yield* fresh.operations.get(fresh.principal, fresh.id, 0)).status).toBe("running")
        expect((yield* pending.operations.get(pending.principal, pending.id, 0)).status).toBe("pending")
        // A heartbeat from the worker that was given up on is refused: the operation is over.
        expect(yield* Effect.flip(stale.operations.report(stale.principal, { id: stale.id }))).toMatchObject({ _tag: "OperationTerminal", status: "failed" })
      })
    )

    it.effect("a report is decided again from the row when another replica wrote it since this one did: nothing is lost", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { operations, principal, id } = yield* setup()
        yield* operations.report(principal, { id, status: "running", stage: "copying", progress: 10 })
        // Another replica's report lands behind this replica's back.
        yield* sql`update operations set progress = 60, stage = 'granting', version = version + 1 where id = ${id}`
        const next = yield* operations.report(principal, { id, progress: 30, stageLabel: "Granting" })
        expect(next).toMatchObject({ status: "running", stage: "granting", stageLabel: "Granting", progress: 60 })
        expect(yield* operations.get(principal, id, 0)).toMatchObject({ stage: "granting", stageLabel: "Granting", progress: 60 })
        // And the next report, from the row this replica now wrote, keeps all of it.
        expect(yield* operations.report(principal, { id, status: "completed", progress: 100, result: { ok: true } })).toMatchObject({ status: "completed", stage: "granting", progress: 100 })
      })
    )

    it.effect("the database itself refuses to change a terminal operation", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { operations, principal, id } = yield* setup()
        yield* operations.report(principal, { id, status: "completed" })
        const refused = yield* Effect.flip(sql`update operations set status = 'running', completed_at = null where id = ${id}`)
        expect(String((refused as { cause?: unknown }).cause)).toMatch(/cannot change/)
      })
    )
  })
})
