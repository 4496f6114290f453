/**
 * Engine setup survives its worker dying: the connector unit is SIGKILLed while the initial copy
 * runs, a new one takes the redelivered job (ENGINE_SETUP_ACK_WAIT is short here), re-runs the
 * idempotent steps and completes; the mirror matches the source, with one slot and one
 * subscription, and replication keeps streaming.
 */
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { queryEngine } from "../support/engine.js"
import { type RoleKey, settleOperation, teamOrg } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { healthServing, respawn, startScion, type Scion, type UnitProcess, waitFor } from "../support/system.js"

let scion: Scion
let source: SourceCluster
let orgId: string
let tokens: Record<RoleKey, string>
let respawned: UnitProcess | undefined

beforeAll(async () => {
  ;[scion, source] = await Promise.all([startScion({ env: { ENGINE_SETUP_ACK_WAIT: "6 seconds" } }), startSourceCluster({ logical: true })])
  // Enough rows that the initial copy takes a few seconds.
  await source.query(`
    create table public.readings (id bigint primary key, sensor int not null, value double precision, note text);
    insert into public.readings select g, g % 500, random(), repeat('x', 80) from generate_series(1, 1500000) g;`)
  const org = await teamOrg(scion, "Crash Org")
  orgId = org.orgId
  tokens = org.tokens
}, 240_000)

afterAll(async () => {
  await respawned?.stop()
  await Promise.all([scion?.stop(), source?.stop()])
})

it("SIGKILL of the connector unit during the initial copy: the redelivered setup resumes and completes", async () => {
  const created = await scion.request("POST", "/v1/connectors", {
    token: tokens.member,
    body: { org_id: orgId, service_name: "postgresql", connection_details: source.details() }
  })
  expect(created.status, scion.explain(created)).toBe(200)
  const id = created.body.connector_id as string
  const discovered = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.member })
  expect((await settleOperation(scion, discovered.body.operation_id, tokens.member)).status).toBe("completed")
  expect((await scion.request("POST", `/v1/connectors/${id}/selection`, { token: tokens.admin, body: { selected_paths: ["*"] } })).status).toBe(200)

  const started = await scion.request("POST", `/v1/connectors/${id}/engine-setup`, { token: tokens.member })
  expect(started.status, scion.explain(started)).toBe(202)
  const operationId = started.body.operation_id as string
  await waitFor("the setup to reach the initial copy", async () => {
    const operation = await scion.request("GET", `/v1/operations/${operationId}`, { token: tokens.member })
    return operation.body.stage === "initial_copy"
  }, 60_000)

  await scion.connector.stop("SIGKILL")
  respawned = respawn(scion.connector)
  await waitFor("the connector unit again", () => healthServing(scion.connectorUrl), 60_000)

  const operation = await settleOperation(scion, operationId, tokens.member, 240_000)
  expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", result: { branching_engine_status: "ready", tables: ["postgres.public.readings"] } })
  const connector = await scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })
  expect(connector.body).toMatchObject({ branching_engine_status: "ready" })

  const mirrored = await queryEngine(scion, id, "select count(*)::int as n, (select count(*)::int from pg_subscription) as subscriptions from public.readings")
  expect(mirrored.rows[0]).toEqual({ n: 1500000, subscriptions: 1 })
  const slots = await source.query("select count(*)::int as n from pg_replication_slots where slot_type = 'logical'")
  expect(slots.rows[0].n).toBe(1)
  // Every readiness check of the completing attempt passed.
  const attempts = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.member })
  expect(attempts.body.attempts[0]).toMatchObject({ failed_checks: 0, total_checks: 4 })

  await source.query("insert into public.readings values (1500001, 1, 0.5, 'after the crash')")
  await waitFor("the new row in the mirror", async () => (await queryEngine(scion, id, "select count(*)::int as n from public.readings where id = 1500001")).rows[0].n === 1, 30_000)
}, 360_000)

it("a source written to all through the setup still validates: the row counts are bracketed, not compared at one instant", async () => {
  await source.query("create table public.busy (id bigserial primary key, at timestamptz not null default now())")
  const created = await scion.request("POST", "/v1/connectors", {
    token: tokens.member,
    body: { org_id: orgId, service_name: "postgresql", name: "busy", connection_details: source.details() }
  })
  const id = created.body.connector_id as string
  const discovered = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.member })
  expect((await settleOperation(scion, discovered.body.operation_id, tokens.member)).status).toBe("completed")
  expect((await scion.request("POST", `/v1/connectors/${id}/selection`, { token: tokens.admin, body: { selected_paths: ["postgres.public.busy"] } })).status).toBe(200)

  // A writer inserting all the time, from before the setup until after it.
  const writer = new pg.Client({ host: source.host, port: source.port, user: source.username, password: source.password, database: "postgres" })
  await writer.connect()
  let writing = true
  const writes = (async () => {
    while (writing) await writer.query("insert into public.busy default values")
  })()
  try {
    const started = await scion.request("POST", `/v1/connectors/${id}/engine-setup`, { token: tokens.member })
    expect(started.status, scion.explain(started)).toBe(202)
    const operation = await settleOperation(scion, started.body.operation_id, tokens.member, 240_000)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", result: { branching_engine_status: "ready" } })
    const checks = await scion.request("GET", `/v1/connectors/${id}/readiness-checks?check_name=row_count_matches`, { token: tokens.member })
    expect(checks.body.checks).toHaveLength(1)
    expect(checks.body.checks[0]).toMatchObject({ table_path: "postgres.public.busy", status: "pass" })
  } finally {
    writing = false
    await writes
    await writer.end()
  }
}, 300_000)
