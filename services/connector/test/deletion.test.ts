/**
 * The deletion lock, connector deletion and the project-deletion path on a fresh metadata
 * database (the real identity, operation and billing units; a real secret store) against one real
 * throwaway source cluster with logical WAL: the job drops the connector's publication and
 * replication slot there, purges the secret and deletes the row.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import type { ProgressUpdate } from "@scion/kit"
import { Effect, Fiber, Redacted } from "effect"
import { startSourceCluster, type SourceCluster } from "../../../test/support/sourceCluster.js"
import { ConnectorBranches, Connectors, deleteJob, Deletion, handleProjectEvent, PROJECT_DELETED, publicationName, secretPurgeJob, SourceCleaner } from "../src/index.js"
import { connectorTestLayer, moveOperation, newOrgId, newProjectId, operationOf, operationsOf, session } from "./support.js"

let source: SourceCluster

beforeAll(async () => {
  source = await startSourceCluster({ logical: true })
  await source.query("create table public.items (id bigint primary key, name text)")
}, 120_000)
afterAll(async () => {
  await source?.stop()
})

const details = (value: unknown) => Redacted.make<unknown>(value)

/**
 * The worker of `jobs.connector.secret_purge`, as the runtime would be: runs the purge job the
 * delete job put in the outbox and reports its operation completed (or failed) to the
 * operation unit.
 */
const purgeWorker = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const done = new Set<string>()
  for (;;) {
    const rows = yield* sql<{ readonly msg_id: string; readonly payload: { readonly payload: { connector_id: string; delete_operation_id: string } } }>`
      select msg_id, payload from outbox where subject like '%secret_purge' order by msg_id`
    for (const row of rows) {
      if (done.has(row.msg_id)) continue
      done.add(row.msg_id)
      const exit = yield* Effect.exit(
        secretPurgeJob.run({ operationId: row.msg_id, orgId: "org_x", payload: row.payload.payload, attempt: 1, maxAttempts: 3, started: Effect.void, report: () => Effect.void })
      )
      // What the worker runtime does next: the operation ends as the job did.
      yield* moveOperation(row.msg_id, exit._tag === "Success" ? "completed" : "failed")
    }
    yield* Effect.sleep("50 millis")
  }
})

/** Runs the delete job for an operation as the worker would (the purge's worker beside it). */
const runJob = (operationId: string, connectorId: string, force: boolean) =>
  Effect.gen(function* () {
    const reports: Array<ProgressUpdate> = []
    const purging = yield* Effect.fork(purgeWorker)
    const result = yield* deleteJob
      .run({
        operationId,
        orgId: "org_x",
        payload: { connector_id: connectorId, force },
        attempt: 1,
        maxAttempts: 3,
        started: Effect.void,
        report: (update) => Effect.sync(() => void reports.push(update))
      })
      .pipe(Effect.ensuring(Fiber.interrupt(purging)))
    return { result, reports }
  }).pipe(
    Effect.provideService(SourceCleaner, SourceCleaner.make({ connectTimeout: "2 seconds", queryTimeout: "10 seconds" })),
    // These connectors never had an engine, so the branch unit is never asked (test/e2e covers it).
    Effect.provideService(ConnectorBranches, ConnectorBranches.of({ deleteAll: () => Effect.dieMessage("no engine, no branches to delete") }))
  )

/** A count on the source (names are the connector's own: no quoting needed). */
const count = async (text: string) => Number((await source.query(text)).rows[0]?.n)

describe("deletion", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("the lock refuses deletes; delete is an operation whose job cleans the source, purges the secret and deletes the row", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const deletion = yield* Deletion
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const member = yield* session({ [orgId]: "member" })
        const viewer = yield* session({ [orgId]: "viewer" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        const created = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(source.details()), useEnvironment: false })
        const id = created.connector.id
        expect(created.connector.deletionLocked).toBe(false)
        const pub = publicationName(id)
        yield* Effect.promise(() => source.query(`create publication "${pub}" for table public.items`))
        yield* Effect.promise(() => source.query(`select pg_create_logical_replication_slot('${pub}', 'pgoutput')`))

        // Lock: update permission, idempotent; viewers 403, other orgs 404.
        expect(yield* Effect.flip(deletion.lock(viewer, id))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(deletion.lock(stranger, id))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect((yield* deletion.lock(member, id)).connector.deletionLocked).toBe(true)
        expect((yield* deletion.lock(owner, id)).connector.deletionLocked).toBe(true)
        expect((yield* connectors.get(viewer, id)).connector.deletionLocked).toBe(true)

        // Delete: connectors.delete (members 403), other orgs 404, 409 while locked.
        expect(yield* Effect.flip(deletion.delete(member, { connectorId: id, force: false }))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(deletion.delete(stranger, { connectorId: id, force: false }))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect(yield* Effect.flip(deletion.delete(owner, { connectorId: id, force: false }))).toMatchObject({ _tag: "DeletionLocked" })
        expect((yield* deletion.unlock(member, id)).connector.deletionLocked).toBe(false)
        expect((yield* deletion.unlock(member, id)).connector.deletionLocked).toBe(false)

        const started = yield* deletion.delete(owner, { connectorId: id, force: false })
        expect(started).toMatchObject({ connectorId: id, status: "pending" })
        expect(started.operationId).toMatch(/^op_del/)
        expect(yield* operationOf(started.operationId)).toMatchObject({ orgId, connectorId: id, status: "pending" })
        const outbox = yield* sql<{ subject: string; payload: unknown }>`select subject, payload from outbox where msg_id = ${started.operationId}`
        expect(outbox).toEqual([{ subject: "jobs.connector.delete", payload: { operation_id: started.operationId, org_id: orgId, payload: { connector_id: id, force: false }, traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/) } }])

        // While it is pending or running: another delete, a lock and an unlock are 409.
        expect(yield* Effect.flip(deletion.delete(owner, { connectorId: id, force: true }))).toMatchObject({ _tag: "DeleteInProgress", operationId: started.operationId })
        expect(yield* Effect.flip(deletion.lock(owner, id))).toMatchObject({ _tag: "DeleteInProgress" })
        yield* moveOperation(started.operationId, "running")
        expect(yield* Effect.flip(deletion.unlock(owner, id))).toMatchObject({ _tag: "DeleteInProgress" })

        const { result, reports } = yield* runJob(started.operationId, id, false)
        expect(result).toEqual({
          connector_id: id,
          deleted: true,
          force: false,
          source_cleanup: { status: "cleaned", databases: [{ database: "postgres", publications_dropped: [pub], slots_dropped: [pub], capture: "none" }] },
          engine: { status: "not_set_up" },
          steps: [{ type: "connector_secret_purge", operation_id: expect.stringMatching(/^op_prg/), status: "completed", secrets_purged: 1 }]
        })
        expect(reports.map((r) => r.stage)).toEqual(["engine_pause", "source", "engine", "secrets"])
        yield* moveOperation(started.operationId, "completed")
        expect(yield* Effect.promise(() => count(`select count(*) as n from pg_publication where pubname = '${pub}'`))).toBe(0)
        expect(yield* Effect.promise(() => count(`select count(*) as n from pg_replication_slots where slot_name = '${pub}'`))).toBe(0)
        expect(yield* sql`select 1 from secrets where owner_id = ${id}`).toEqual([])
        expect(yield* Effect.flip(connectors.get(owner, id))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect(yield* Effect.flip(deletion.delete(owner, { connectorId: id, force: false }))).toMatchObject({ _tag: "ConnectorNotFound" })
        // A redelivery after the row went answers that it is gone.
        expect((yield* runJob(started.operationId, id, false)).result).toMatchObject({ connector_id: id, deleted: true, already_deleted: true })
      }))

    it.effect("an unreachable source fails the delete and keeps the connector; force abandons it and says so", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const deletion = yield* Deletion
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        // self_managed skips the gate, so a source nobody listens on can be stored.
        const created = yield* connectors.create(owner, {
          orgId,
          serviceName: "postgresql",
          connectionDetails: details({ ...source.details(), port: 1 }),
          byoc: "self_managed",
          useEnvironment: false
        })
        const id = created.connector.id

        const first = yield* deletion.delete(owner, { connectorId: id, force: false })
        const failed = yield* Effect.flip(runJob(first.operationId, id, false))
        expect(failed._tag).toBe("JobFailed")
        expect((failed as { message: string }).message).toMatch(/^The source could not be cleaned up \(database postgres: .+\); the connector was not deleted\. .*force=true/)
        expect((failed as { message: string }).message).not.toContain(source.password)
        yield* moveOperation(first.operationId, "failed")
        // Still there, unchanged, its secret kept; it can be locked again now that no delete runs.
        expect((yield* connectors.get(owner, id)).connector).toMatchObject({ id, deletionLocked: false })
        expect((yield* sql`select 1 from secrets where owner_id = ${id}`).length).toBe(1)

        const forced = yield* deletion.delete(owner, { connectorId: id, force: true })
        expect(forced.operationId).not.toBe(first.operationId)
        const { result } = yield* runJob(forced.operationId, id, true)
        expect(result).toMatchObject({ connector_id: id, deleted: true, force: true, source_cleanup: { status: "skipped" }, steps: [{ type: "connector_secret_purge", secrets_purged: 1 }] })
        expect(String((result.source_cleanup as { reason: string }).reason)).toMatch(/^force: the source could not be cleaned up/)
        expect(yield* Effect.flip(connectors.get(owner, id))).toMatchObject({ _tag: "ConnectorNotFound" })
        // The failed operation's job, redelivered late, answers that the row is gone.
        expect((yield* runJob(first.operationId, id, false)).result).toMatchObject({ already_deleted: true })
      }))

    it.effect("a deleted project's connectors are deleted with force, locked or not; the event is idempotent", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const deletion = yield* Deletion
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const projectId = yield* newProjectId(orgId)
        const make = (projectId?: string) =>
          Effect.map(
            connectors.create(owner, { orgId, projectId, serviceName: "postgresql", connectionDetails: details(source.details()), byoc: "self_managed", useEnvironment: false }),
            (v) => v.connector.id
          )
        const a = yield* make(projectId)
        const b = yield* make(projectId)
        const other = yield* make()
        yield* deletion.lock(owner, b)
        // Another org cannot place a connector in this org's project (nor in an unknown one) ...
        const elsewhere = yield* newOrgId()
        const stranger = yield* session({ [elsewhere]: "owner" })
        const placeIn = (projectId: string) =>
          connectors.create(stranger, { orgId: elsewhere, projectId, serviceName: "postgresql", connectionDetails: details(source.details()), byoc: "self_managed", useEnvironment: false })
        for (const foreign of [projectId, "prj_unknown"]) {
          expect(yield* Effect.flip(placeIn(foreign))).toMatchObject({ _tag: "InvalidArgument", field: "project_id" })
        }
        // ... and one that names it all the same (made before that check) is not the event's: it names its org.
        const theirs = (yield* placeIn(yield* newProjectId(elsewhere))).connector.id
        yield* sql`update connectors set project_id = ${projectId} where id = ${theirs}`

        const delivery = {
          subject: PROJECT_DELETED,
          payload: { project_id: projectId, org_id: orgId, name: "p", deleted_by_user_id: null, deleted_at: new Date().toISOString() },
          headers: {},
          deliveryCount: 1,
          msgId: `project.deleted.${projectId}`,
          working: Effect.void
        }
        yield* handleProjectEvent(delivery)
        const deletesOf = (connectorId: string) => Effect.map(operationsOf(orgId, connectorId), (ops) => ops.map((o) => ({ ...o, connectorId })))
        const started = [...(yield* deletesOf(a)), ...(yield* deletesOf(b))]
        expect(started.map((o) => o.connectorId).sort()).toEqual([a, b].sort())
        expect(yield* operationsOf(orgId, other)).toEqual([])
        expect(yield* operationsOf(elsewhere, theirs)).toEqual([])
        // Again (a redelivery): the deletes in progress are kept, none is added.
        yield* handleProjectEvent(delivery)
        expect([...(yield* deletesOf(a)), ...(yield* deletesOf(b))]).toHaveLength(2)

        for (const o of started) {
          const { result } = yield* runJob(o.id, o.connectorId, true)
          expect(result).toMatchObject({ connector_id: o.connectorId, deleted: true, force: true, source_cleanup: { status: "cleaned" } })
          yield* moveOperation(o.id, "completed")
        }
        expect(yield* Effect.flip(connectors.get(owner, a))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect(yield* Effect.flip(connectors.get(owner, b))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect((yield* connectors.get(owner, other)).connector.id).toBe(other)
        // Once they are gone the event finds nothing.
        expect(yield* deletion.removeProject(orgId, projectId)).toEqual({ connectors: 0, started: [] })
        expect((yield* connectors.get(stranger, theirs)).connector.id).toBe(theirs)
      }))
  })
})
