/**
 * GET /v1/operations/{operation_id} end to end: operations are created and reported by a plain
 * Connect client straight on the operation unit (as a worker would, with the principal identity
 * issued for its API key or session), and read through the gateway. Two operation replicas share
 * the database and announce changes over core NATS.
 */
import { createClient, type Client } from "@connectrpc/connect"
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node"
import type { JsonObject } from "@bufbuild/protobuf"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { OperationService, OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createApiKey, createOrg } from "../support/flows.js"
import { signUp, startScion, type Scion } from "../support/system.js"

const sessions: Array<Http2SessionManager> = []
const client = <S extends typeof OperationService | typeof AuthService>(service: S, baseUrl: string): Client<S> => {
  const sessionManager = new Http2SessionManager(baseUrl)
  sessions.push(sessionManager)
  return createClient(service, createGrpcTransport({ baseUrl, sessionManager }))
}

let counter = 0
const newId = () => `op_e2e${Date.now().toString(36)}${(counter++).toString(36)}`
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** `?wait=10`, the longest wait: an answer well inside it returned early, not at the wait's end. */
const WAIT_10_MS = 10_000

interface Actor {
  readonly token: string
  readonly orgId: string
  /** x-scion-principal for calls straight to the operation unit. */
  readonly headers: Record<string, string>
}

const actor = async (scion: Scion, name: string): Promise<Actor> => {
  const user = await signUp(scion, name)
  const org = await createOrg(scion, user.token, `${name} org`)
  const auth = client(AuthService, scion.identityUrl)
  const { principalToken } = await auth.authenticate({ bearerToken: user.token })
  return { token: user.token, orgId: org.org_id, headers: { "x-scion-principal": principalToken } }
}

afterAll(() => sessions.forEach((s) => s.abort()))

describe("operations through the gateway, two operation replicas", () => {
  let scion: Scion
  let alice: Actor
  let bob: Actor
  let replica1: Client<typeof OperationService>
  let replica2: Client<typeof OperationService>

  beforeAll(async () => {
    // Units call each other with the Connect protocol here (UNIT_RPC_PROTOCOL); every other
    // system uses the default, gRPC. Both must behave the same. Info logs: the shared-wait test
    // reads the gateway's lines.
    scion = await startScion({ operationReplicas: 2, env: { UNIT_RPC_PROTOCOL: "connect", LOG_LEVEL: "Info" } })
    alice = await actor(scion, "alice")
    bob = await actor(scion, "bob")
    replica1 = client(OperationService, scion.operationUrls[0]!)
    replica2 = client(OperationService, scion.operationUrls[1]!)
  })
  afterAll(async () => {
    await scion?.stop()
  })

  const create = async (who: Actor, type = OperationType.BRANCH_CREATE, resourceId = "br_e2e") => {
    const id = newId()
    const response = await replica2.createOperation({ id, orgId: who.orgId, type, resourceId }, { headers: who.headers })
    expect(response.created).toBe(true)
    return id
  }
  const report = (who: Actor, request: Parameters<typeof replica1.reportOperation>[0], replica = replica1) => replica.reportOperation(request, { headers: who.headers })
  const get = (who: Actor | string, id: string, query = "", headers: Record<string, string> = {}) =>
    scion.request("GET", `/v1/operations/${id}${query}`, { token: typeof who === "string" ? who : who.token, headers })

  it("answers 200 with exactly the interface's fields, for a member's session and an org API key", async () => {
    const id = await create(alice)
    const response = await get(alice, id)
    expect(response.status, scion.explain(response)).toBe(200)
    expect(Object.keys(response.body).sort()).toEqual(
      ["id", "org_id", "type", "resource_id", "status", "stage", "stage_label", "progress", "result", "error", "created_at", "updated_at", "started_at", "completed_at"].sort()
    )
    expect(response.body).toMatchObject({
      id,
      org_id: alice.orgId,
      type: "branch_create",
      resource_id: "br_e2e",
      status: "pending",
      stage: null,
      stage_label: null,
      progress: null,
      result: null,
      error: null,
      started_at: null,
      completed_at: null
    })
    expect(response.body.created_at).toMatch(ISO_Z)
    expect(response.body.updated_at).toMatch(ISO_Z)

    const key = await createApiKey(scion, alice.token, alice.orgId, { role_id: "role_org_viewer" })
    expect((await get(key.secret, id)).status).toBe(200)
  })

  it("refuses a revoked API key within the revocation bound (1 s), although the operation unit caches grants", async () => {
    const id = await create(alice)
    const key = await createApiKey(scion, alice.token, alice.orgId, { role_id: "role_org_viewer" })
    // Twice: the second answer comes from the operation unit's cache.
    expect((await get(key.secret, id)).status).toBe(200)
    expect((await get(key.secret, id)).status).toBe(200)
    expect((await scion.request("DELETE", `/v1/orgs/${alice.orgId}/api-keys/${key.api_key_id}`, { token: alice.token })).status).toBe(204)
    const deadline = Date.now() + 1_000
    let status = (await get(key.secret, id)).status
    while (status === 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      status = (await get(key.secret, id)).status
    }
    expect(status).toBe(401)
  })

  it("answers 404 for an unknown operation and for another org's, 401 without a token", async () => {
    const id = await create(alice)
    const foreign = await get(bob, id)
    expect(foreign.status).toBe(404)
    expect(foreign.body).toEqual({ detail: expect.any(String) })
    const bobKey = await createApiKey(scion, bob.token, bob.orgId)
    expect((await get(bobKey.secret, id)).status).toBe(404)
    const unknown = await get(alice, newId())
    expect(unknown.status).toBe(404)
    expect(typeof unknown.body.detail).toBe("string")
    expect((await scion.request("GET", `/v1/operations/${id}`)).status).toBe(401)
    // The operation unit itself says the same to a plain client.
    await expect(replica1.getOperation({ id }, { headers: bob.headers })).rejects.toMatchObject({ code: 5 })
  })

  it("answers 422 with loc [query, wait] for a wait outside 0..10 or not an integer", async () => {
    const id = await create(alice)
    for (const wait of ["11", "-1", "abc", "1.5", ""]) {
      const response = await get(alice, id, `?wait=${wait}`)
      expect(response.status, `wait=${wait}`).toBe(422)
      expect(response.body.detail[0].loc, `wait=${wait}`).toEqual(["query", "wait"])
      expect(typeof response.body.detail[0].msg).toBe("string")
      expect(typeof response.body.detail[0].type).toBe("string")
    }
    expect((await get(alice, id, "?wait=0")).status).toBe(200)
  })

  it("a wait returns as soon as the other replica records completion", async () => {
    const id = await create(alice)
    await report(alice, { id, status: OperationStatus.RUNNING, progress: 10 })
    const started = Date.now()
    const waiting = get(alice, id, "?wait=10")
    await new Promise((resolve) => setTimeout(resolve, 700))
    // The gateway talks to replica 1; the completion is committed and announced by replica 2.
    await report(alice, { id, status: OperationStatus.COMPLETED, result: { branch_id: "br_e2e", ready: true } }, replica2)
    const response = await waiting
    const elapsed = Date.now() - started
    expect(response.status).toBe(200)
    // The completion reported after the wait began, so the answer carries the changed state …
    expect(response.body).toMatchObject({ status: "completed", result: { branch_id: "br_e2e", ready: true } })
    // … and came before its 10 s wait ran out: the change woke it.
    expect(elapsed, "answered before its wait ran out").toBeLessThan(WAIT_10_MS - 1000)
  })

  it("many waits of one caller on one operation all wake with the change; another org's caller still gets 404, and a client that gives up ends nobody's wait", async () => {
    const id = await create(alice)
    await report(alice, { id, status: OperationStatus.RUNNING })
    const started = Date.now()
    // The first wait goes upstream with its request id; the others join it.
    const requestIds = Array.from({ length: 6 }, (_, n) => `e2e-wait-${n}-${Date.now().toString(36)}`)
    const waiting = [get(alice, id, "?wait=10", { "x-request-id": requestIds[0]! })]
    await new Promise((resolve) => setTimeout(resolve, 200))
    waiting.push(...requestIds.slice(1).map((requestId) => get(alice, id, "?wait=10", { "x-request-id": requestId })))
    const quitter = new AbortController()
    const quitting = fetch(`${scion.baseUrl}/v1/operations/${id}?wait=10`, { headers: { authorization: `Bearer ${alice.token}` }, signal: quitter.signal }).catch((e: Error) => e.name)
    // Bob waits on the same operation at the same moment: refused at once, never answered with alice's view.
    const stranger = await get(bob, id, "?wait=10")
    expect(stranger.status).toBe(404)
    expect(Date.now() - started, "refused rather than held for its wait").toBeLessThan(WAIT_10_MS - 1000)
    await new Promise((resolve) => setTimeout(resolve, 300))
    quitter.abort()
    expect(await quitting).toBe("AbortError")
    await new Promise((resolve) => setTimeout(resolve, 400))
    await report(alice, { id, status: OperationStatus.COMPLETED, result: { shared: true } }, replica2)
    for (const response of await Promise.all(waiting)) {
      expect(response.status).toBe(200)
      expect(response.body).toMatchObject({ id, status: "completed", result: { shared: true } })
    }
    expect(Date.now() - started, "every wait woke before its wait ran out").toBeLessThan(WAIT_10_MS - 1000)
    // Each wait that joined names, in the gateway's log, the request id the shared wait went
    // upstream with (and which the operation unit's lines carry): its own id still finds it.
    const joined = scion.gateway
      .output()
      .split("\n")
      .filter((line) => line.includes("long poll joined a wait already upstream") && line.includes(id))
      .map((line) => (JSON.parse(line) as { annotations: Record<string, unknown> }).annotations)
    // (The client that gave up joined too, under an id the gateway made for it.)
    expect(joined.map((a) => a.request_id).filter((r) => requestIds.includes(String(r))).sort()).toEqual(requestIds.slice(1).sort())
    expect(new Set(joined.map((a) => a.upstream_request_id))).toEqual(new Set([requestIds[0]]))
    // The next wait is its own: an operation already ended answers at once.
    expect((await get(alice, id, "?wait=10")).body).toMatchObject({ status: "completed" })
  })

  it("a wait with no change returns after about the wait, with the current state", async () => {
    const id = await create(alice)
    await report(alice, { id, status: OperationStatus.RUNNING, stage: "copy", progress: 5 })
    const started = Date.now()
    const response = await get(alice, id, "?wait=2")
    const elapsed = Date.now() - started
    expect(response.status).toBe(200)
    expect(response.body).toMatchObject({ status: "running", stage: "copy", progress: 5 })
    // It held for its own 2 s, not less and not the longest wait (10 s).
    expect(elapsed, "held for the wait").toBeGreaterThanOrEqual(2000 - 100)
    expect(elapsed, "held for its own wait, not the longest").toBeLessThan(WAIT_10_MS)
    // A terminal operation answers a wait at once.
    await report(alice, { id, status: OperationStatus.FAILED, error: "source unreachable" }, replica2)
    const t0 = Date.now()
    expect((await get(alice, id, "?wait=10")).body).toMatchObject({ status: "failed", error: "source unreachable" })
    expect(Date.now() - t0, "answered without waiting").toBeLessThan(WAIT_10_MS - 1000)
  })

  it("keeps the state machine: progress never goes down, started_at and completed_at are set once, terminal stays terminal", async () => {
    const id = await create(alice)
    await report(alice, { id, status: OperationStatus.RUNNING, stage: "copy", stageLabel: "Copying data", progress: 40 })
    const running = (await get(alice, id)).body
    expect(running).toMatchObject({ status: "running", stage: "copy", stage_label: "Copying data", progress: 40, completed_at: null })
    expect(running.started_at).toMatch(ISO_Z)

    await report(alice, { id, progress: 20, stage: "grant", stageLabel: "Granting access" }, replica2)
    const later = (await get(alice, id)).body
    expect(later).toMatchObject({ progress: 40, stage: "grant", stage_label: "Granting access", started_at: running.started_at })
    await expect(report(alice, { id, progress: 101 })).rejects.toMatchObject({ code: 3 })

    await report(alice, { id, status: OperationStatus.COMPLETED, progress: 100, result: { branch_id: "br_1" } })
    const done = (await get(alice, id)).body
    expect(done).toMatchObject({ status: "completed", progress: 100, result: { branch_id: "br_1" }, started_at: running.started_at })
    expect(done.completed_at).toMatch(ISO_Z)

    // The identical repeat is fine; anything else is refused and changes nothing.
    await report(alice, { id, status: OperationStatus.COMPLETED, progress: 100, result: { branch_id: "br_1" } }, replica2)
    await expect(report(alice, { id, status: OperationStatus.FAILED, error: "late" })).rejects.toMatchObject({ code: 9 })
    await expect(report(alice, { id, status: OperationStatus.RUNNING })).rejects.toMatchObject({ code: 9 })
    const after = (await get(alice, id)).body
    expect(after).toEqual(done)
  })

  it("shows setup_status only for connector_engine_setup", async () => {
    const id = await create(alice, OperationType.CONNECTOR_ENGINE_SETUP, "con_e2e")
    const initial = (await get(alice, id)).body
    expect(initial).toMatchObject({ type: "connector_engine_setup", setup_status: {} })
    const setupStatus: JsonObject = { phase: "initial_copy", tables_ready: 2, tables_total: 7 }
    await report(alice, { id, status: OperationStatus.RUNNING, setupStatus })
    expect((await get(alice, id)).body.setup_status).toEqual(setupStatus)

    const branch = await create(alice, OperationType.BRANCH_CREATE)
    expect("setup_status" in (await get(alice, branch)).body).toBe(false)
    await expect(report(alice, { id: branch, setupStatus: { phase: "x" } })).rejects.toMatchObject({ code: 3 })
    const discovery = await create(alice, OperationType.CONNECTOR_DISCOVERY, "con_e2e")
    expect((await get(alice, discovery)).body).not.toHaveProperty("setup_status")
  })

  it("creating is idempotent per id; the same id with other content conflicts", async () => {
    const id = newId()
    const first = await replica1.createOperation({ id, orgId: alice.orgId, type: OperationType.BRANCH_DELETE, resourceId: "br_x" }, { headers: alice.headers })
    const again = await replica2.createOperation({ id, orgId: alice.orgId, type: OperationType.BRANCH_DELETE, resourceId: "br_x" }, { headers: alice.headers })
    expect(first.created).toBe(true)
    expect(again.created).toBe(false)
    expect(again.operation?.createdAt).toEqual(first.operation?.createdAt)
    await expect(
      replica1.createOperation({ id, orgId: alice.orgId, type: OperationType.BRANCH_DELETE, resourceId: "br_y" }, { headers: alice.headers })
    ).rejects.toMatchObject({ code: 6 })
    // Bob cannot create in Alice's org.
    await expect(replica1.createOperation({ id: newId(), orgId: alice.orgId, type: OperationType.BRANCH_DELETE, resourceId: "br_x" }, { headers: bob.headers })).rejects.toMatchObject({ code: 7 })
  })
})

describe("the sweeper", () => {
  let scion: Scion
  let alice: Actor
  beforeAll(async () => {
    scion = await startScion({ operationEnv: { OPERATION_HEARTBEAT_DEADLINE_SECONDS: "1", OPERATION_SWEEP_INTERVAL_SECONDS: "0.25" } })
    alice = await actor(scion, "sweeper")
  })
  afterAll(async () => {
    await scion?.stop()
  })

  it("fails a running operation whose worker stopped heartbeating, and wakes waiters", async () => {
    const operations = client(OperationService, scion.operationUrls[0]!)
    const id = newId()
    await operations.createOperation({ id, orgId: alice.orgId, type: OperationType.BRANCH_CREATE, resourceId: "br_s" }, { headers: alice.headers })
    await operations.reportOperation({ id, status: OperationStatus.RUNNING, progress: 10 }, { headers: alice.headers })
    const started = Date.now()
    const response = await scion.request("GET", `/v1/operations/${id}?wait=10`, { token: alice.token })
    expect(response.status).toBe(200)
    expect(response.body).toMatchObject({ status: "failed", error: "worker stopped heartbeating: no report for more than 1 seconds", progress: 10 })
    expect(response.body.completed_at).toMatch(ISO_Z)
    // The sweep woke the wait: it answered before its 10 s ran out.
    expect(Date.now() - started, "woken by the sweep").toBeLessThan(WAIT_10_MS - 1000)
    // A pending operation is not swept (its worker has not started).
    const pending = newId()
    await operations.createOperation({ id: pending, orgId: alice.orgId, type: OperationType.BRANCH_CREATE, resourceId: "br_p" }, { headers: alice.headers })
    await new Promise((resolve) => setTimeout(resolve, 1600))
    expect((await scion.request("GET", `/v1/operations/${pending}`, { token: alice.token })).body.status).toBe("pending")
  })
})
