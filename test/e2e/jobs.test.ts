/**
 * The worker runtime end to end: identity, the operation unit and the gateway as processes, the
 * copier (test/worker: a real job that copies a table in resumable batches) as another process
 * on a NATS server of this file's own, so the broker can be stopped and started. The test plays
 * the unit that starts work: it creates the operation with a service principal and writes the job
 * to the copier's outbox; users watch through GET /v1/operations/{id}.
 */
import { createClient, type Client } from "@connectrpc/connect"
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { OperationService, OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { connect as natsConnect } from "nats"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createOrg } from "../support/flows.js"
import { startNatsServer, type NatsServer } from "../support/nats.js"
import { healthServing, respawn, signUp, startScion, startUnit, waitFor, type Scion, type UnitProcess } from "../support/system.js"

const sessions: Array<Http2SessionManager> = []
const grpc = (baseUrl: string) => {
  const sessionManager = new Http2SessionManager(baseUrl)
  sessions.push(sessionManager)
  return createGrpcTransport({ baseUrl, sessionManager })
}

let counter = 0
const newId = (label: string) => `op_${label}${Date.now().toString(36)}${(counter++).toString(36)}`

describe("jobs through the worker runtime", () => {
  let scion: Scion
  let nats: NatsServer
  let copier: UnitProcess
  let db: pg.Client
  let operations: Client<typeof OperationService>
  let servicePrincipal: Record<string, string>
  let owner: { token: string; orgId: string }

  const startCopier = (overrides: Record<string, string> = {}) => {
    const unit = startUnit("copier", "test/worker/dist/main.js", {
      DATABASE_URL: scion.databaseUrl,
      NATS_URL: nats.url,
      BUS_NAMESPACE: `jobs${Date.now().toString(36)}`,
      IDENTITY_URL: scion.identityUrl,
      OPERATION_URL: scion.operationUrls[0]!,
      SERVICE_CREDENTIAL: scion.serviceCredential,
      WORKER_ACK_WAIT_MS: "2000",
      WORKER_HEARTBEAT_MS: "500",
      WORKER_MAX_ATTEMPTS: "3",
      WORKER_BACKOFF_MS: "200",
      OUTBOX_POLL_INTERVAL_MS: "50",
      LOG_LEVEL: "Info",
      ...overrides
    })
    return unit
  }
  const copierReady = (unit: UnitProcess) =>
    waitFor("the copier to consume", async () => {
      if (unit.child.exitCode !== null) throw new Error(`copier exited:\n${unit.output()}`)
      return unit.output().includes("worker consuming")
    })

  const createSource = async (table: string, rows: number) => {
    await db.query(`create table ${table} (id bigint primary key, payload text not null)`)
    await db.query(`insert into ${table} select g, md5(g::text) from generate_series(1, $1) g`, [rows])
  }

  /** What the unit that starts work does: the operation first, then the job in its outbox. */
  const startCopy = async (payload: Record<string, unknown>) => {
    const id = newId("copy")
    jobsStarted++
    await operations.createOperation(
      { id, orgId: owner.orgId, type: OperationType.CONNECTOR_DISCOVERY, resourceId: `copier:${String(payload.target_table)}` },
      { headers: servicePrincipal }
    )
    await db.query(`insert into copier.outbox (subject, msg_id, payload) values ('jobs.copier.copy_table', $1, $2)`, [
      id,
      JSON.stringify({ operation_id: id, org_id: owner.orgId, payload })
    ])
    return id
  }

  const read = async (id: string, wait = 0) => {
    const response = await scion.request("GET", `/v1/operations/${id}${wait > 0 ? `?wait=${wait}` : ""}`, { token: owner.token })
    expect(response.status, scion.explain(response)).toBe(200)
    return response.body
  }

  const settle = async (id: string, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      const op = await read(id, 10)
      if (op.status === "completed" || op.status === "failed") return op
    }
    throw new Error(`operation ${id} did not settle:\n${copier.output().slice(-4000)}`)
  }

  const deliveries = async (id: string) =>
    (await db.query<{ attempt: number }>(`select attempt from copier.job_deliveries where operation_id = $1 order by id`, [id])).rows.map((r) => r.attempt)

  /** The JOBS and DLQ streams of the copier's namespace, as the broker sees them. */
  const streamState = async (stream: "JOBS" | "DLQ") => {
    const nc = await natsConnect({ servers: nats.url })
    try {
      const jsm = await nc.jetstreamManager()
      return (await jsm.streams.info(`${copier.env.BUS_NAMESPACE}_${stream}`)).state
    } finally {
      await nc.close()
    }
  }
  let jobsStarted = 0

  const count = async (table: string) => Number((await db.query<{ n: string }>(`select count(*)::text as n from ${table}`)).rows[0]!.n)

  beforeAll(async () => {
    nats = await startNatsServer()
    scion = await startScion()
    db = new pg.Client({ connectionString: scion.databaseUrl })
    await db.connect()
    const user = await signUp(scion, "jobs")
    const org = await createOrg(scion, user.token, "jobs org")
    owner = { token: user.token, orgId: org.org_id }
    const auth = createClient(AuthService, grpc(scion.identityUrl))
    const issued = await auth.issueServiceToken({ serviceName: "e2e-starter", credential: scion.serviceCredential })
    servicePrincipal = { "x-scion-principal": issued.principalToken }
    operations = createClient(OperationService, grpc(scion.operationUrls[0]!))
    copier = startCopier()
    await copierReady(copier)
  })

  afterAll(async () => {
    sessions.forEach((s) => s.abort())
    await copier?.stop()
    await db?.end()
    await scion?.stop()
    await nats?.dispose()
  })

  it("runs a job to completed, reporting progress that never goes down", async () => {
    await createSource("public.src_progress", 60_000)
    const id = await startCopy({ source_table: "public.src_progress", target_table: "public.dst_progress", batch_rows: 1000 })
    const seen: Array<number> = []
    let op = await read(id)
    while (op.status !== "completed" && op.status !== "failed") {
      if (op.progress !== null) seen.push(op.progress)
      op = await read(id)
    }
    expect(op.status, JSON.stringify(op)).toBe("completed")
    expect(op.progress).toBe(100)
    expect(op.result).toEqual({ source_table: "public.src_progress", target_table: "public.dst_progress", rows_copied: 60_000, batches: 60, target_rows: 60_000 })
    expect(op.started_at).not.toBeNull()
    expect(op.completed_at).not.toBeNull()
    expect(op.error).toBeNull()
    expect(seen.some((p) => p > 0 && p < 100), `progress seen: ${seen.join(",")}`).toBe(true)
    expect([...seen].sort((a, b) => a - b)).toEqual(seen)
    expect(await count("public.dst_progress")).toBe(60_000)
    expect(await deliveries(id)).toEqual([1])
  })

  it("changes nothing for a job whose operation ended before it ran, though its handler starts while the operation is being marked running", async () => {
    await createSource("public.src_ended", 100)
    const id = newId("copy")
    jobsStarted++
    await operations.createOperation({ id, orgId: owner.orgId, type: OperationType.CONNECTOR_DISCOVERY, resourceId: "copier:public.dst_ended" }, { headers: servicePrincipal })
    await operations.reportOperation({ id, status: OperationStatus.FAILED, error: "Cancelled before a worker took it" }, { headers: servicePrincipal })
    await db.query(`insert into copier.outbox (subject, msg_id, payload) values ('jobs.copier.copy_table', $1, $2)`, [
      id,
      JSON.stringify({ operation_id: id, org_id: owner.orgId, payload: { source_table: "public.src_ended", target_table: "public.dst_ended" } })
    ])
    await waitFor("the worker to skip the job", async () => copier.output().split("\n").some((line) => line.includes("job stopped: operation already failed") && line.includes(id)))
    expect(await deliveries(id)).toEqual([])
    expect((await db.query(`select to_regclass('public.dst_ended') as target`)).rows[0].target).toBeNull()
    const op = await read(id)
    expect(op.status).toBe("failed")
    expect(op.error).toBe("Cancelled before a worker took it")
  })

  it("fails the operation with the handler's message, without retrying, when the work cannot succeed", async () => {
    const id = await startCopy({ source_table: "public.no_such_table", target_table: "public.dst_missing" })
    const op = await settle(id)
    expect(op.status).toBe("failed")
    expect(op.error).toBe("Source table public.no_such_table does not exist")
    expect(op.result).toBeNull()
    expect(op.completed_at).not.toBeNull()
    expect(await deliveries(id)).toEqual([1])
  })

  it("retries a failing job with backoff, then gives up and fails the operation saying so", async () => {
    await createSource("public.src_misfit", 10)
    // A target whose columns cannot take the source's rows: every attempt fails the same way.
    await db.query(`create table public.dst_misfit (id bigint primary key)`)
    const id = await startCopy({ source_table: "public.src_misfit", target_table: "public.dst_misfit" })
    const op = await settle(id)
    expect(op.status).toBe("failed")
    expect(op.error).toMatch(/^Gave up after 3 attempts: /)
    expect(await deliveries(id)).toEqual([1, 2, 3])
    expect(await count("public.dst_misfit")).toBe(0)
    // The job left the work queue for the dead-letter stream.
    expect((await streamState("DLQ")).messages).toBe(1)
    expect((await streamState("JOBS")).messages).toBe(0)
  })

  it("runs a job once per process even when its ack wait lapses mid-run: the redeliveries wait for the running attempt", async () => {
    // Heartbeats slower than the ack wait: the broker hands the running job out again every second.
    const namespace = { BUS_NAMESPACE: copier.env.BUS_NAMESPACE! }
    await copier.stop()
    copier = startCopier({ ...namespace, WORKER_ACK_WAIT_MS: "1000", WORKER_HEARTBEAT_MS: "60000", WORKER_MAX_ATTEMPTS: "20" })
    try {
      await copierReady(copier)
      const rows = 400_000
      await createSource("public.src_lapsed", rows)
      const id = await startCopy({ source_table: "public.src_lapsed", target_table: "public.dst_lapsed", batch_rows: 2000 })
      const done = await settle(id)
      expect(done.status, JSON.stringify(done)).toBe("completed")
      expect(await count("public.dst_lapsed")).toBe(rows)
      // The broker did redeliver while it ran, and the handler still ran exactly once.
      expect(copier.output()).toContain("job redelivered while it runs here")
      expect(await deliveries(id)).toHaveLength(1)
    } finally {
      await copier.stop()
      copier = startCopier(namespace)
      await copierReady(copier)
    }
  }, 120_000)

  it("resumes a job after its worker is SIGKILLed mid-copy: completed, every row exactly once", async () => {
    const rows = 400_000
    await createSource("public.src_crash", rows)
    const id = await startCopy({ source_table: "public.src_crash", target_table: "public.dst_crash", batch_rows: 2000 })
    let op = await read(id)
    while (!(op.status === "running" && (op.progress ?? 0) >= 5)) {
      expect(op.status, "the copy finished before the worker could be killed").not.toMatch(/completed|failed/)
      op = await read(id)
    }
    copier.child.kill("SIGKILL")
    await copier.stop()
    const atKill = await read(id)
    expect(atKill.status).toBe("running")
    expect(atKill.progress).toBeLessThan(100)
    const copiedAtKill = await count("public.dst_crash")
    expect(copiedAtKill).toBeGreaterThan(0)
    expect(copiedAtKill).toBeLessThan(rows)

    copier = respawn(copier)
    await copierReady(copier)
    const done = await settle(id)
    expect(done.status, JSON.stringify(done)).toBe("completed")
    expect(done.result.rows_copied).toBe(rows)
    expect(done.result.target_rows).toBe(rows)
    expect(await count("public.dst_crash")).toBe(rows)
    const distinct = await db.query<{ n: string }>(`select count(distinct id)::text as n from public.dst_crash`)
    expect(Number(distinct.rows[0]!.n)).toBe(rows)
    const attempts = await deliveries(id)
    // It ran again after the crash. (NATS 2.9 may hand the redelivery over with its count still
    // at 1 when it first tried the dead worker's pull request, so the attempt numbers are not
    // asserted; the rows are what must be exactly once.)
    expect(attempts.length).toBeGreaterThanOrEqual(2)
  })

  it("loses and duplicates nothing when NATS stops while jobs are written", async () => {
    await nats.stop()
    const ids: Array<string> = []
    for (let i = 0; i < 8; i++) {
      await createSource(`public.src_outage_${i}`, 500 + i)
      ids.push(await startCopy({ source_table: `public.src_outage_${i}`, target_table: `public.dst_outage_${i}`, batch_rows: 100 }))
    }
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const waiting = await db.query<{ n: string }>(`select count(*)::text as n from copier.outbox where msg_id = any($1) and published_at is null`, [ids])
    expect(Number(waiting.rows[0]!.n)).toBe(ids.length)
    for (const id of ids) expect((await read(id)).status).toBe("pending")

    await nats.start()
    for (const [i, id] of ids.entries()) {
      const op = await settle(id)
      expect(op.status, JSON.stringify(op)).toBe("completed")
      expect(op.result.rows_copied).toBe(500 + i)
      expect(await count(`public.dst_outage_${i}`)).toBe(500 + i)
      // One message per job: a duplicate publish would show up as a second first delivery.
      expect((await deliveries(id)).filter((a) => a === 1)).toHaveLength(1)
    }
    const published = await db.query<{ n: string }>(`select count(*)::text as n from copier.outbox where msg_id = any($1) and published_at is not null`, [ids])
    expect(Number(published.rows[0]!.n)).toBe(ids.length)
    // Exactly one message per job ever reached the work queue, and all were consumed.
    const jobs = await streamState("JOBS")
    expect(jobs.last_seq).toBe(jobsStarted)
    expect(jobs.messages).toBe(0)
  })

  it("answers a waiting client with a clean error when the operation unit dies, and the state after a retry", async () => {
    const id = newId("wait")
    await operations.createOperation({ id, orgId: owner.orgId, type: OperationType.BRANCH_CREATE, resourceId: "branch_wait" }, { headers: servicePrincipal })
    const started = Date.now()
    const waiting = scion.request("GET", `/v1/operations/${id}?wait=10`, { token: owner.token })
    await new Promise((resolve) => setTimeout(resolve, 500))
    const [unit] = scion.operations
    unit!.child.kill("SIGKILL")
    const answer = await waiting
    // The death ended the wait: answered before its 10 s ran out.
    expect(Date.now() - started, "answered before its wait ran out").toBeLessThan(10_000 - 1000)
    expect(answer.status).toBe(503)
    expect(answer.body).toEqual({ detail: expect.any(String) })

    const revived = respawn(unit!)
    try {
      await waitFor("the operation unit to serve again", () => healthServing(scion.operationUrls[0]!))
      const retried = await scion.request("GET", `/v1/operations/${id}?wait=1`, { token: owner.token })
      expect(retried.status).toBe(200)
      expect(retried.body).toMatchObject({ id, status: "pending", type: "branch_create" })
    } finally {
      await revived.stop()
    }
  })

  it("answers waiting clients with the current state when the operation unit shuts down (SIGTERM), and exits cleanly", async () => {
    const unit = respawn(scion.operations[0]!)
    try {
      await waitFor("the operation unit to serve", () => healthServing(scion.operationUrls[0]!))
      const id = newId("drain")
      await operations.createOperation({ id, orgId: owner.orgId, type: OperationType.BRANCH_CREATE, resourceId: "branch_drain" }, { headers: servicePrincipal })
      const started = Date.now()
      const waiting = scion.request("GET", `/v1/operations/${id}?wait=10`, { token: owner.token })
      await new Promise((resolve) => setTimeout(resolve, 500))
      const exited = unit.stop("SIGTERM")
      const answer = await waiting
      expect(answer.status, scion.explain(answer)).toBe(200)
      expect(answer.body).toMatchObject({ id, status: "pending" })
      // The shutdown answered the wait: before its 10 s ran out.
      expect(Date.now() - started, "answered by the shutdown, before its wait ran out").toBeLessThan(10_000 - 1000)
      expect(await exited).toBe(0)
    } finally {
      await unit.stop()
    }
  })
})
