/**
 * Connector deletion through the gateway, with identity, the operation unit, billing, the
 * connector unit (its outbox relay and delete worker on the machine's NATS in a namespace of its
 * own, and its durable on identity's events) and the gateway as separate processes, against one
 * throwaway source cluster: the deletion lock refuses deletes; DELETE → 202 → the operation
 * completes → 404, the publication and slot gone from the source, no secret row; 403/404/409;
 * deleting a project deletes its connectors.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryMetadata, type RoleKey, settleOperation, teamOrg, createPostgresConnector } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let source: SourceCluster
let orgId: string
const tokens = {} as Record<RoleKey, string>
let strangerToken: string

beforeAll(async () => {
  ;[scion, source] = await Promise.all([startScion(), startSourceCluster({ logical: true })])
  await source.query("create table public.items (id int primary key, name text)")
  const org = await teamOrg(scion, "Delete Org")
  orgId = org.orgId
  Object.assign(tokens, org.tokens)
  strangerToken = org.strangerToken
}, 180_000)
afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

const createConnector = (extra: Record<string, unknown> = {}) =>
  createPostgresConnector(scion, { token: tokens.member, orgId, details: source.details(), extra: extra })
const getConnector = (id: string) => scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })
const remove = (id: string, token = tokens.admin, query = "") => scion.request("DELETE", `/v1/connectors/${id}${query}`, { token })
const lock = (id: string, token = tokens.member) => scion.request("POST", `/v1/connectors/${id}/deletion-lock`, { token })
const unlock = (id: string, token = tokens.member) => scion.request("DELETE", `/v1/connectors/${id}/deletion-lock`, { token })

/** The publication Scion names for a connector (GrantScript's publicationName). */
const publicationOf = (id: string) => `scion_${id.toLowerCase().replace(/[^a-z0-9_]/g, "_")}`.slice(0, 63)
const onSource = async (sql: string) => Number((await source.query(sql)).rows[0]?.n)

const settle = (operationId: string) => settleOperation(scion, operationId, tokens.admin)

const secretRows = (connectorId: string) => queryMetadata(scion, "select name from connector.secrets where owner_id = $1", [connectorId])

describe("connector deletion", () => {
  it("lock → 409 → unlock → 202 → the operation completes: 404, nothing left on the source, no secret", async () => {
    const id = await createConnector()
    const pub = publicationOf(id)
    await source.query(`create publication "${pub}" for table public.items`)
    await source.query(`select pg_create_logical_replication_slot('${pub}', 'pgoutput')`)
    expect((await getConnector(id)).body).toMatchObject({ deletion_locked: false, can_delete: false })

    const locked = await lock(id)
    expect(locked.status, scion.explain(locked)).toBe(200)
    expect(locked.body).toMatchObject({ connector_id: id, deletion_locked: true })
    expect((await lock(id)).body.deletion_locked).toBe(true)
    const refused = await remove(id)
    expect(refused.status, scion.explain(refused)).toBe(409)
    expect(refused.body.detail).toMatch(/locked against deletion/)
    const unlocked = await unlock(id)
    expect(unlocked.status).toBe(200)
    expect(unlocked.body.deletion_locked).toBe(false)

    const started = await remove(id)
    expect(started.status, scion.explain(started)).toBe(202)
    expect(started.body).toEqual({ operation_id: expect.stringMatching(/^op_del/), resource_id: id, status: "pending", type: "connector_delete" })
    const operation = await settle(started.body.operation_id)
    expect(operation, JSON.stringify(operation)).toMatchObject({
      type: "connector_delete",
      status: "completed",
      resource_id: id,
      result: {
        connector_id: id,
        deleted: true,
        force: false,
        source_cleanup: { status: "cleaned", databases: [{ database: "postgres", publications_dropped: [pub], slots_dropped: [pub] }] },
        steps: [{ type: "connector_secret_purge", operation_id: expect.stringMatching(/^op_prg/), status: "completed", secrets_purged: 1 }]
      }
    })
    expect((await getConnector(id)).status).toBe(404)
    // The purge was an operation of its own, polled like any other.
    const purge = await scion.request("GET", `/v1/operations/${operation.result.steps[0].operation_id}`, { token: tokens.admin })
    expect(purge.body).toMatchObject({ type: "connector_secret_purge", status: "completed", resource_id: id, result: { connector_id: id, secrets_purged: 1 } })
    expect(await onSource(`select count(*) as n from pg_publication where pubname = '${pub}'`)).toBe(0)
    expect(await onSource(`select count(*) as n from pg_replication_slots where slot_name = '${pub}'`)).toBe(0)
    expect(await secretRows(id)).toEqual([])
    expect((await remove(id)).status).toBe(404)
    expect((await lock(id)).status).toBe(404)
    expect((await unlock(id)).status).toBe(404)
  })

  it("permissions: members 403 (viewers for the lock), other orgs 404; while a delete runs, delete, lock and unlock are 409 and discover is 400", async () => {
    const id = await createConnector()
    expect((await remove(id, tokens.member)).status).toBe(403)
    expect((await remove(id, tokens.viewer)).status).toBe(403)
    expect((await lock(id, tokens.viewer)).status).toBe(403)
    expect((await unlock(id, tokens.viewer)).status).toBe(403)
    expect((await remove(id, strangerToken)).status).toBe(404)
    expect((await lock(id, strangerToken)).status).toBe(404)
    expect((await unlock(id, strangerToken)).status).toBe(404)
    expect((await remove("con_nope")).status).toBe(404)
    expect((await lock("con_nope")).status).toBe(404)
    expect((await unlock("con_nope")).status).toBe(404)
    // Request validation is the interface's 422 at the edge.
    expect((await remove(id, tokens.admin, "?force=maybe")).status).toBe(422)
    expect((await scion.request("DELETE", `/v1/connectors/${id}`)).status).toBe(401)

    // A transaction on the source holding the publication keeps the delete running meanwhile.
    const pub = publicationOf(id)
    await source.query(`create publication "${pub}" for table public.items`)
    const holder = new pg.Client({ host: source.host, port: source.port, user: source.username, password: source.password, database: "postgres" })
    await holder.connect()
    try {
      await holder.query("begin")
      await holder.query(`comment on publication "${pub}" is 'held by the test'`)
      const started = await remove(id, tokens.owner, "?force=true")
      expect(started.status, scion.explain(started)).toBe(202)
      // While it is pending or running: another delete, the lock and the unlock are 409.
      const again = await remove(id)
      expect(again.status, scion.explain(again)).toBe(409)
      expect(again.body.detail).toMatch(/is being deleted/)
      expect((await lock(id)).status).toBe(409)
      expect((await unlock(id)).status).toBe(409)
      // Nor is it discoverable (the interface's 400): the delete purges the credentials discovery reads.
      const discover = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.owner })
      expect(discover.status, scion.explain(discover)).toBe(400)
      expect(discover.body.detail).toMatch(/being deleted/)
      expect((await getConnector(id)).status).toBe(200)
      await holder.query("rollback")
      const operation = await settle(started.body.operation_id)
      expect(operation).toMatchObject({ status: "completed", result: { force: true, source_cleanup: { status: "cleaned", databases: [{ publications_dropped: [pub] }] } } })
    } finally {
      await holder.end()
    }
    expect((await getConnector(id)).status).toBe(404)
  })

  it("deleting a project deletes its connectors", async () => {
    const project = await scion.request("POST", "/v1/projects", { token: tokens.owner, body: { org_id: orgId, name: `delete-me-${Date.now()}` } })
    expect(project.status, scion.explain(project)).toBe(201)
    const projectId = project.body.project_id as string
    const inProject = await createConnector({ project_id: projectId })
    const lockedInProject = await createConnector({ project_id: projectId })
    expect((await lock(lockedInProject)).status).toBe(200)
    const elsewhere = await createConnector()

    expect((await scion.request("DELETE", `/v1/projects/${projectId}`, { token: tokens.owner })).status).toBe(200)
    await waitFor(
      "the project's connectors to be deleted",
      async () => (await getConnector(inProject)).status === 404 && (await getConnector(lockedInProject)).status === 404,
      60_000
    )
    expect(await secretRows(inProject)).toEqual([])
    expect((await getConnector(elsewhere)).status).toBe(200)
  })
})
