/**
 * Engine setup through the gateway, with every unit a separate process, the machine's NATS and
 * Postgres, and throwaway source clusters: preflight → create → discover → select → decisions →
 * engine setup → ready, then a change on the source shows up in the mirror; readiness evidence and
 * its filters and limits; index (a rollout of a new selection); quarantine reads; a role that may
 * not replicate fails the setup with a message that says what to do; delete leaves nothing on the
 * source and destroys the engine.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import { GENERATED_PASSWORD_SCRAM_ITERATIONS } from "@scion/kit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryEngine, readyConnector } from "../support/engine.js"
import { queryMetadata, type RoleKey, settleOperation, teamOrg, createPostgresConnector } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { healthServing, respawn, startScion, type UnitProcess, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let source: SourceCluster
let orgId: string
const tokens = {} as Record<RoleKey, string>
let strangerToken: string

beforeAll(async () => {
  // The quarantine monitor checks every second here (30 s by default), a subscription disabled
  // for 3 s (60 s by default) counts as stopped, and 48 MiB of lag (1 GiB) is too much.
  ;[scion, source] = await Promise.all([startScion({ metrics: true, env: { QUARANTINE_MONITOR_INTERVAL: "1 seconds", QUARANTINE_STOPPED_GRACE: "3 seconds", QUARANTINE_MAX_LAG_BYTES: String(48 * 1024 * 1024) } }), startSourceCluster({ logical: true })])
  await source.query(`
    create type public.status as enum ('new', 'paid', 'void');
    create table public.accounts (id int primary key, email text not null unique, created_at timestamptz not null default now());
    create table public.invoices (
      id serial primary key,
      account_id int not null references public.accounts (id),
      status public.status not null default 'new',
      amount numeric(12, 2) check (amount >= 0),
      tags text[]
    );
    create index invoices_account on public.invoices (account_id);
    create table public.events (payload jsonb, at timestamptz default now());
    create table public.notes (body text);
    create table public.scratch (v int);
    create schema audit;
    create table audit.log (id bigint generated always as identity primary key, line text);
    insert into public.accounts (id, email) select g, 'user' || g || '@example.com' from generate_series(1, 2000) g;
    insert into public.invoices (account_id, amount, tags) select 1 + g % 2000, g % 1000, array['t' || (g % 7)] from generate_series(1, 300000) g;
    insert into public.events (payload) select jsonb_build_object('n', g) from generate_series(1, 1000) g;
    insert into public.notes select 'note ' || g from generate_series(1, 100) g;
    insert into audit.log (line) select 'line ' || g from generate_series(1, 50) g;`)
  const org = await teamOrg(scion, "Engine Org")
  orgId = org.orgId
  Object.assign(tokens, org.tokens)
  strangerToken = org.strangerToken
}, 180_000)
afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

const createConnector = (details: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  createPostgresConnector(scion, { token: tokens.member, orgId, details: source.details(details), extra: extra })
const setUp = (id: string, token = tokens.member) => scion.request("POST", `/v1/connectors/${id}/engine-setup`, { token })
const getConnector = (id: string) => scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })
const settle = (operationId: string) => settleOperation(scion, operationId, tokens.member, 300_000)
const discover = async (id: string) => {
  const started = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.member })
  expect(started.status, scion.explain(started)).toBe(202)
  expect((await settle(started.body.operation_id)).status).toBe("completed")
}
const select = (id: string, selected_paths: ReadonlyArray<string>) =>
  scion.request("POST", `/v1/connectors/${id}/selection`, { token: tokens.admin, body: { selected_paths } })
const decide = (id: string, decisions: Record<string, string>) =>
  scion.request("PUT", `/v1/connectors/${id}/replica-identity-decisions`, { token: tokens.admin, body: { decisions } })

/** The probe's first defined answer. */
const eventually = async <A>(what: string, probe: () => Promise<A | undefined>, timeoutMs: number): Promise<A> => {
  let value: A | undefined
  await waitFor(what, async () => {
    value = await probe()
    return value !== undefined
  }, timeoutMs)
  return value as A
}

/** The setup's readiness evidence as first read (the index test reads it again after later attempts). */
let setupEvidence: { readonly attemptId: string; readonly checks: ReadonlyArray<unknown> }
const DECISIONS = { "postgres.public.events": "replica_identity_full", "postgres.public.notes": "add_pk", "postgres.public.scratch": "exclude" }
const MIRRORED = ["postgres.audit.log", "postgres.public.accounts", "postgres.public.events", "postgres.public.invoices", "postgres.public.notes"]

describe("POST /v1/connectors/{id}/engine-setup: refusals", () => {
  it("422 with the failed prerequisite before discovery, nothing selected, and with unresolved decisions; no operation starts", async () => {
    const id = await createConnector()
    const early = await setUp(id)
    expect(early.status, scion.explain(early)).toBe(422)
    expect(early.body.detail).toMatch(/not been discovered/)
    expect(early.body.prerequisites.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([["discovered", "fail"]])

    await discover(id)
    const unselected = await setUp(id)
    expect(unselected.status).toBe(422)
    expect(unselected.body.prerequisites.at(-1)).toMatchObject({ id: "selected", status: "fail" })

    expect((await select(id, ["*"])).status).toBe(200)
    const undecided = await setUp(id)
    expect(undecided.status).toBe(422)
    const last = undecided.body.prerequisites.at(-1)
    expect(last).toMatchObject({ id: "replica_identity_decisions", status: "fail" })
    expect(last.message).toContain("postgres.public.events")
    expect(last.remedy).toContain("replica-identity-decisions")
    expect((await getConnector(id)).body).toMatchObject({ branching_engine_status: "not_set_up" })
    const operations = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.member })
    expect(operations.body).toEqual({ attempts: [] })
  })

  it("400 for a connector that cannot have an engine; 403 without connectors.update; 404 for other orgs and unknown ids", async () => {
    const code = await scion.request("POST", "/v1/connectors", {
      token: tokens.member,
      body: { org_id: orgId, service_name: "github", connection_details: { organization: "scion-dev", access_token: "ghp_engineTestToken" } }
    })
    expect(code.status).toBe(200)
    const refused = await setUp(code.body.connector_id)
    expect(refused.status).toBe(400)
    expect(typeof refused.body.detail).toBe("string")
    expect(refused.body.detail).toMatch(/PostgreSQL/)

    const id = await createConnector()
    expect((await setUp(id, tokens.viewer)).status).toBe(403)
    expect((await setUp(id, strangerToken)).status).toBe(404)
    expect((await setUp("con_does_not_exist")).status).toBe(404)
    expect((await scion.request("POST", `/v1/connectors/${id}/engine-setup`, {})).status).toBe(401)
  })
})

describe("engine setup end to end", () => {
  let id: string
  let operationId: string

  it("202 at once; a second call while it runs is 409; the job sets the engine up and the connector is ready", async () => {
    id = await createConnector()
    await discover(id)
    expect((await select(id, ["*"])).status).toBe(200)
    expect((await decide(id, DECISIONS)).status).toBe(200)

    const started = await setUp(id)
    expect(started.status, scion.explain(started)).toBe(202)
    expect(started.body).toMatchObject({ resource_id: id, type: "connector_engine_setup", status: "pending" })
    operationId = started.body.operation_id
    expect((await getConnector(id)).body.branching_engine_status).toBe("setting_up")
    const again = await setUp(id)
    expect(again.status, scion.explain(again)).toBe(409)

    const operation = await settle(operationId)
    expect(operation, JSON.stringify(operation)).toMatchObject({
      status: "completed",
      type: "connector_engine_setup",
      resource_id: id,
      progress: 100,
      stage_label: "The engine is ready to branch",
      result: { connector_id: id, branching_engine_status: "ready", mirror_database: "mirror", tables: MIRRORED, excluded_tables: ["postgres.public.scratch"], pod_name: `local-engine-${id}` }
    })
    expect(operation.setup_status.current_step).toBe("done")
    expect(operation.setup_status.steps.map((s: { name: string; status: string }) => s.status)).toEqual(Array(10).fill("completed"))
    expect(operation.setup_status.steps.map((s: { name: string }) => s.name)).toEqual([
      "source_checks", "replica_identity", "capture", "publication", "slot", "engine", "schema", "subscription", "initial_copy", "readiness"
    ])

    const connector = (await getConnector(id)).body
    expect(connector).toMatchObject({ branching_engine_status: "ready", indexing_status: "indexed", needs_reindex: false })
    expect(connector.last_indexed_version).toBe(connector.selected_schema_version)
  }, 300_000)

  it("is checkpointed before it is ready: the first branch's copy does not flush the initial copy", async () => {
    const attempts = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.viewer })
    // Whole seconds: a checkpoint's time is kept to the second.
    const checkedAt = Math.floor(Date.parse(attempts.body.attempts[0].latest_checked_at) / 1000)
    // Read as soon as the setup completed, nothing waited for: without the step, the engine's last
    // checkpoint is the one its creation made, before the copy.
    const { rows } = await queryEngine(scion, id, "select extract(epoch from checkpoint_time)::bigint as at from pg_control_checkpoint()", [], "postgres")
    expect(Number(rows[0].at)).toBeGreaterThanOrEqual(checkedAt)
  })

  it("the decisions were applied on the source, and the publication and slot are there", async () => {
    const identity = await source.query(`select relname, relreplident from pg_class where oid in ('public.events'::regclass, 'public.notes'::regclass) order by relname`)
    expect(identity.rows).toEqual([{ relname: "events", relreplident: "f" }, { relname: "notes", relreplident: "d" }])
    const key = await source.query(`select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'public.notes'::regclass and contype = 'p'`)
    expect(key.rows).toEqual([{ def: "PRIMARY KEY (scion_row_id)" }])
    const published = await source.query(`select schemaname || '.' || tablename as t from pg_publication_tables where pubname = $1 order by 1`.replace("$1", `'scion_${id.toLowerCase()}'`))
    // The capture log and heartbeat travel with the tables (the source's role may create event triggers).
    expect(published.rows.map((r) => r.t)).toEqual(["audit.log", "public.accounts", "public.events", "public.invoices", "public.notes", "scion.heartbeat", "scion.schema_log"])
    const slots = await source.query(`select slot_name, plugin, slot_type from pg_replication_slots where slot_name = 'scion_${id.toLowerCase()}'`)
    expect(slots.rows).toEqual([{ slot_name: `scion_${id.toLowerCase()}`, plugin: "pgoutput", slot_type: "logical" }])
  })

  it("the mirror holds the selected tables with their keys, types and rows, over TLS only", async () => {
    const tables = await queryEngine(scion, id, `select table_schema || '.' || table_name as t from information_schema.tables where table_schema in ('public', 'audit') order by 1`)
    expect(tables.rows.map((r) => r.t)).toEqual(["audit.log", "public.accounts", "public.events", "public.invoices", "public.notes"])
    const counts = await queryEngine(
      scion,
      id,
      `select (select count(*) from public.invoices)::int as invoices, (select count(*) from public.accounts)::int as accounts, (select count(*) from public.events)::int as events,
              (select count(*) from public.notes)::int as notes, (select count(*) from audit.log)::int as log`
    )
    expect(counts.rows[0]).toEqual({ invoices: 300000, accounts: 2000, events: 1000, notes: 100, log: 50 })
    const constraints = await queryEngine(
      scion,
      id,
      `select conrelid::regclass::text as t, contype, pg_get_constraintdef(oid) as def from pg_constraint where connamespace in ('public'::regnamespace, 'audit'::regnamespace) and contype in ('p', 'f', 'c', 'u') order by 1, 2, 3`
    )
    expect(constraints.rows).toEqual(
      expect.arrayContaining([
        { t: "invoices", contype: "f", def: "FOREIGN KEY (account_id) REFERENCES accounts(id)" },
        { t: "invoices", contype: "c", def: "CHECK ((amount >= (0)::numeric))" },
        { t: "accounts", contype: "u", def: "UNIQUE (email)" },
        { t: "notes", contype: "p", def: "PRIMARY KEY (scion_row_id)" }
      ])
    )
    const enums = await queryEngine(scion, id, `select enum_range(null::public.status)::text as labels`)
    expect(enums.rows[0].labels).toBe("{new,paid,void}")
    const indexes = await queryEngine(scion, id, `select indexname from pg_indexes where tablename = 'invoices' order by 1`)
    expect(indexes.rows.map((r) => r.indexname)).toContain("invoices_account")
    const record = JSON.parse(await (await import("node:fs/promises")).readFile(join(scion.engineDataDir, id, "engine.json"), "utf8"))
    const pg = (await import("pg")).default
    const plain = new pg.Client({ host: record.host, port: record.port, user: record.username, password: record.password, database: "mirror", ssl: false })
    await expect(plain.connect()).rejects.toThrow(/no encryption|pg_hba/)
    // The superuser's generated password is stored with the rounds Scion chose, not initdb's 4,096.
    const verifier = await queryEngine(scion, id, `select split_part(rolpassword, ':', 1) as v from pg_authid where rolname = current_user`)
    expect(verifier.rows[0].v).toBe(`SCRAM-SHA-256$${GENERATED_PASSWORD_SCRAM_ITERATIONS}`)
  })

  it("a row inserted, updated and deleted on the source shows up in the mirror", async () => {
    await source.query(`insert into public.invoices (account_id, status, amount) values (7, 'paid', 12.50); update public.events set payload = '{"n": -1}' where payload->>'n' = '1'; delete from public.notes where body = 'note 3'`)
    await waitFor("the change to reach the mirror", async () => {
      const rows = await queryEngine(
        scion,
        id,
        `select (select count(*) from public.invoices where status = 'paid' and amount = 12.50)::int as paid,
                (select count(*) from public.events where payload->>'n' = '-1')::int as updated,
                (select count(*) from public.notes)::int as notes`
      )
      return rows.rows[0].paid === 1 && rows.rows[0].updated === 1 && rows.rows[0].notes === 99
    }, 30_000)
  })

  it("engine setup again is 200 with the connector and a message", async () => {
    const again = await setUp(id)
    expect(again.status, scion.explain(again)).toBe(200)
    expect(again.body).toMatchObject({ connector_id: id, branching_engine_status: "ready", message: expect.stringMatching(/already set up/) })
  })

  it("readiness attempts and checks: evidence per table and check, with filters, limits and offsets", async () => {
    const attempts = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.viewer })
    expect(attempts.status).toBe(200)
    expect(attempts.body.attempts).toHaveLength(1)
    const [attempt] = attempts.body.attempts
    expect(attempt).toMatchObject({ total_checks: 20, passed_checks: 20, failed_checks: 0, pod_name: `local-engine-${id}` })
    expect(Date.parse(attempt.latest_checked_at)).not.toBeNaN()

    const all = await scion.request("GET", `/v1/connectors/${id}/readiness-checks`, { token: tokens.viewer })
    expect(all.status).toBe(200)
    expect(all.body.checks).toHaveLength(20)
    setupEvidence = { attemptId: attempt.attempt_id, checks: all.body.checks }
    expect(new Set(all.body.checks.map((c: { check_name: string }) => c.check_name))).toEqual(new Set(["mirror_table_present", "initial_copy_complete", "replica_identity", "row_count_matches"]))
    expect(all.body.checks.every((c: { attempt_id: string; status: string; pod_name: string }) => c.attempt_id === attempt.attempt_id && c.status === "pass" && c.pod_name === `local-engine-${id}`)).toBe(true)
    const rowCount = all.body.checks.find((c: { check_name: string; table_path: string }) => c.check_name === "row_count_matches" && c.table_path === "postgres.public.invoices")
    expect(rowCount.message).toBe("300000 rows on both sides")

    const byName = await scion.request("GET", `/v1/connectors/${id}/readiness-checks?check_name=row_count_matches`, { token: tokens.member })
    expect(byName.body.checks.map((c: { table_path: string }) => c.table_path).sort()).toEqual(MIRRORED)
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-checks?only_failed=true`, { token: tokens.member })).body.checks).toEqual([])
    const page = await scion.request("GET", `/v1/connectors/${id}/readiness-checks?limit=3&offset=3`, { token: tokens.member })
    expect(page.body.checks).toEqual(all.body.checks.slice(3, 6))
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-checks?attempt_id=${attempt.attempt_id}&limit=5000`, { token: tokens.member })).body.checks).toHaveLength(20)
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-checks?attempt_id=att_unknown`, { token: tokens.member })).body.checks).toEqual([])
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-attempts?limit=1`, { token: tokens.member })).body.attempts).toHaveLength(1)
    const widest = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts?limit=5000`, { token: tokens.member })
    expect(widest.status).toBe(200)
    expect(widest.body.attempts.map((a: { attempt_id: string }) => a.attempt_id)).toEqual(attempts.body.attempts.map((a: { attempt_id: string }) => a.attempt_id))

    for (const query of ["limit=0", "limit=5001", "limit=ten", "offset=-1", "only_failed=maybe"]) {
      const invalid = await scion.request("GET", `/v1/connectors/${id}/readiness-checks?${query}`, { token: tokens.member })
      expect(invalid.status, query).toBe(422)
      expect(invalid.body.detail[0].loc[0]).toBe("query")
    }
    for (const query of ["limit=0", "limit=5001"]) {
      expect((await scion.request("GET", `/v1/connectors/${id}/readiness-attempts?${query}`, { token: tokens.member })).status, query).toBe(422)
    }
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-checks`, { token: strangerToken })).status).toBe(404)
    expect((await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: strangerToken })).status).toBe(404)
  })

  it("quarantine: an empty list while replication is healthy; release of an unknown entry is 404, without connectors.update 403", async () => {
    const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({ entries: [] })
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/qua_unknown/release`, { token: tokens.member })).status).toBe(404)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/qua_unknown/release`, { token: tokens.viewer })).status).toBe(403)
    expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: strangerToken })).status).toBe(404)
  })

  it("quarantine: a pause as short as a branch create's is not a stop", async () => {
    await queryEngine(scion, id, `alter subscription "scion_${id.toLowerCase()}" disable`)
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    await queryEngine(scion, id, `alter subscription "scion_${id.toLowerCase()}" enable`)
    // Several monitor rounds later, nothing was quarantined.
    await new Promise((resolve) => setTimeout(resolve, 4_000))
    expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })).body).toEqual({ entries: [] })
  })

  it("quarantine: a stopped subscription is quarantined; release resumes it (the released row not listed) and the monitor deletes the released row", async () => {
    await queryEngine(scion, id, `alter subscription "scion_${id.toLowerCase()}" disable`)
    const entry = await eventually("the monitor to quarantine the stopped subscription", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })
      return list.body.entries.length === 1 ? list.body.entries[0] : undefined
    }, 30_000)
    expect(entry).toMatchObject({ connector_id: id, status: "quarantined", reason: "subscription_stopped", released_at: null })
    expect(entry.quarantine_id).toMatch(/^qua_/)
    // Never ready while quarantined: the engine says degraded and the replication block says why.
    await waitFor("the connector to say its replication is quarantined", async () => {
      const connector = (await getConnector(id)).body
      return connector.branching_engine_status === "degraded" && connector.replication?.status === "quarantined"
    }, 30_000)

    // The monitor held off (its lease taken, as another replica would hold it, and a round in
    // flight let finish): the released row stands, and is not listed.
    await queryMetadata(scion, "update connector.engines set monitor_lease_until = now() + interval '1 hour' where connector_id = $1", [id])
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const released = await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })
    expect(released.status, scion.explain(released)).toBe(200)
    expect(released.body).toMatchObject({ quarantine_id: entry.quarantine_id, status: "released" })
    expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })).body).toEqual({ entries: [] })
    expect(await queryMetadata(scion, "select status from connector.quarantine_entries where id = $1", [entry.quarantine_id])).toEqual([{ status: "released" }])
    await queryMetadata(scion, "update connector.engines set monitor_lease_until = null where connector_id = $1", [id])
    await waitFor("the monitor to resume replication and delete the released row", async () => {
      const rows = await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])
      const subscription = await queryEngine(scion, id, "select subenabled from pg_subscription")
      return rows.length === 0 && subscription.rows[0].subenabled === true
    }, 30_000)
    expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })).body).toEqual({ entries: [] })
    await waitFor("the connector to be ready and streaming again", async () => {
      const connector = (await getConnector(id)).body
      return connector.branching_engine_status === "ready" && connector.replication?.status === "streaming"
    }, 30_000)
  }, 60_000)

  /** Drops the connector's slot on the source as an administrator would: its walsender ended first. */
  const dropSlot = (slot: string) =>
    waitFor("the slot to be dropped on the source", async () => {
      try {
        await source.query(`select pg_terminate_backend(active_pid, 5000) from pg_replication_slots where slot_name = '${slot}' and active_pid is not null`)
        await source.query(`select pg_drop_replication_slot('${slot}')`)
        return true
      } catch {
        return false
      }
    }, 30_000)

  /** A row only the mirror has, written while quarantined: a restore that copies again does not keep it (restoredByCopy counts exactly). */
  const mirrorOnlyRow = (rowId: number) => queryEngine(scion, id, "insert into public.accounts (id, email) values ($1, $2)", [rowId, `mirror-only-${rowId}@example.com`])

  /** A restore that copies again done: the slot there, the mirror copied again (`accounts` rows), ready and streaming. */
  const restoredByCopy = (slot: string, accounts: number) =>
    waitFor("the pipeline to be restored: the slot re-created, the mirror copied again and streaming", async () => {
      const connector = (await getConnector(id)).body
      if (connector.branching_engine_status !== "ready" || connector.replication?.status !== "streaming") return false
      const slots = await source.query(`select count(*)::int as n from pg_replication_slots where slot_name = '${slot}'`)
      const rows = await queryEngine(scion, id, "select (select count(*) from public.accounts)::int as accounts, (select count(*) from public.invoices)::int as invoices")
      return slots.rows[0].n === 1 && rows.rows[0].accounts === accounts && rows.rows[0].invoices === 300001
    }, 120_000)

  it("quarantine: a lost slot is quarantined and the subscription paused; release is idempotent; the monitor re-creates the slot and copies again", async () => {
    const slot = `scion_${id.toLowerCase()}`
    await dropSlot(slot)
    const entry = await eventually("the monitor to quarantine the lost slot", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.find((e: { reason: string }) => e.reason === "slot_lost")
    }, 30_000)
    expect(entry).toMatchObject({ status: "quarantined", detail: expect.stringContaining(slot) })
    await waitFor("the quarantined subscription to be paused", async () => (await queryEngine(scion, id, "select subenabled from pg_subscription")).rows[0].subenabled === false, 30_000)

    await mirrorOnlyRow(777701)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.viewer })).status).toBe(403)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: strangerToken })).status).toBe(404)
    const released = await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })
    const again = await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })
    // The monitor may restore and delete the row between the two calls; otherwise the same answer.
    expect(released.status).toBe(200)
    expect([200, 404]).toContain(again.status)
    if (again.status === 200) expect(again.body).toEqual(released.body)

    await source.query(`insert into public.accounts (id, email) values (900001, 'after-quarantine@example.com')`)
    await restoredByCopy(slot, 2001)
    expect(await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])).toEqual([])
  }, 180_000)

  it("quarantine: an entry opened for an apply error says slot_lost once the slot is gone (same id), and its release re-creates the slot", async () => {
    const slot = `scion_${id.toLowerCase()}`
    // Each termination of the walsender is one apply error on the mirror; terminated again and
    // again, the errors rise round after round and the monitor opens a subscription_error entry.
    const opened = await eventually("the monitor to quarantine the broken stream as an apply error", async () => {
      await source.query(`select pg_terminate_backend(active_pid, 5000) from pg_replication_slots where slot_name = '${slot}' and active_pid is not null`)
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.find((e: { reason: string }) => e.reason === "subscription_error")
    }, 60_000)
    await dropSlot(slot)
    const superseded = await eventually("the entry to say its slot is lost", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.length === 1 && list.body.entries[0].reason === "slot_lost" ? list.body.entries[0] : undefined
    }, 30_000)
    expect(superseded).toMatchObject({ quarantine_id: opened.quarantine_id, status: "quarantined", detail: expect.stringContaining(slot), quarantined_at: opened.quarantined_at })
    expect(superseded.detail).toContain("subscription_error")

    await mirrorOnlyRow(777702)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${opened.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    await source.query(`insert into public.accounts (id, email) values (900004, 'after-superseded@example.com')`)
    await restoredByCopy(slot, 2002)
    expect(await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])).toEqual([])
  }, 180_000)

  it("quarantine: a subscription dropped on the engine is quarantined as stopped; its release makes it again from the kept slot and copies again", async () => {
    const name = `scion_${id.toLowerCase()}`
    await queryEngine(scion, id, `alter subscription ${name} disable`)
    await queryEngine(scion, id, `alter subscription ${name} set (slot_name = none)`)
    await queryEngine(scion, id, `drop subscription ${name}`)
    const entry = await eventually("the monitor to quarantine the missing subscription", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.find((e: { reason: string }) => e.reason === "subscription_stopped")
    }, 30_000)
    expect(entry.detail).toContain("missing")
    // The entry and the degraded status commit together; the replication block follows in the same round.
    expect((await getConnector(id)).body.branching_engine_status).toBe("degraded")
    await waitFor("the connector to say its replication is quarantined", async () => (await getConnector(id)).body.replication?.status === "quarantined", 30_000)

    await mirrorOnlyRow(777703)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    await source.query(`insert into public.accounts (id, email) values (900005, 'after-resubscribe@example.com')`)
    await restoredByCopy(name, 2003)
    expect((await queryEngine(scion, id, "select subenabled from pg_subscription where subname = $1", [name])).rows).toEqual([{ subenabled: true }])
    expect(await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])).toEqual([])
  }, 180_000)

  it("quarantine: a slot the source invalidated (its WAL removed past max_slot_wal_keep_size) is lost: a roll-out meanwhile fails saying how to copy again; the release drops it, makes a new one and copies again", async () => {
    const slot = `scion_${id.toLowerCase()}`
    const walStatus = async () => (await source.query(`select wal_status from pg_replication_slots where slot_name = '${slot}'`)).rows[0]?.wal_status as string | undefined
    await source.query("alter system set max_slot_wal_keep_size = '1MB'")
    await source.query("select pg_reload_conf()")
    let entry: { quarantine_id: string; detail: string }
    try {
      // The subscription paused on the engine: the slot stays behind while the source writes WAL.
      await queryEngine(scion, id, `alter subscription ${slot} disable`)
      await waitFor("the source to invalidate the slot", async () => {
        await source.query("select pg_logical_emit_message(false, 'scion-test', repeat('x', 1024 * 1024)) from generate_series(1, 4)")
        await source.query("select pg_switch_wal()")
        await source.query("checkpoint")
        return (await walStatus()) === "lost"
      }, 60_000)
      // Still listed among the slots, but as lost as a dropped one.
      entry = await eventually("the monitor to quarantine the invalidated slot", async () => {
        const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
        return list.body.entries.find((e: { reason: string }) => e.reason === "slot_lost")
      }, 30_000)
      expect(entry.detail).toContain(slot)
    } finally {
      await source.query("alter system reset max_slot_wal_keep_size")
      await source.query("select pg_reload_conf()")
    }

    // A roll-out meanwhile meets the invalidated slot: setup does not replace it under a mirror
    // that missed changes; it fails, saying how to copy again, and leaves the slot as it was.
    expect((await select(id, ["postgres.public.*"])).status).toBe(200)
    const rollout = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(rollout.status, scion.explain(rollout)).toBe(202)
    const refused = await settle(rollout.body.operation_id)
    expect(refused, JSON.stringify(refused)).toMatchObject({ status: "failed", type: "connector_rollout" })
    expect(refused.error).toMatch(new RegExp(`^slot: the source invalidated the replication slot ${slot} .*/v1/connectors/\\{connector_id\\}/reset`))
    expect(await walStatus()).toBe("lost")
    // The selection back as the mirror has it: the release below restores that mirror.
    expect((await select(id, ["*"])).status).toBe(200)

    await mirrorOnlyRow(777704)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    await source.query(`insert into public.accounts (id, email) values (900006, 'after-invalidation@example.com')`)
    await restoredByCopy(slot, 2004)
    expect(await walStatus()).toBe("reserved")
    expect(await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])).toEqual([])
  }, 180_000)

  it("quarantine: a restart of the source is not a break: the block says stopped while it is down, the subscription reconnects by itself, nothing is quarantined", async () => {
    // The restart ends the walsender mid-stream: the subscription counts one apply error.
    const applyErrors = async () => Number((await queryEngine(scion, id, "select coalesce(sum(apply_error_count), 0)::int as n from pg_stat_subscription_stats")).rows[0].n)
    const before = await applyErrors()
    await source.pause()
    try {
      await waitFor("the replication block to say stopped while the source is down", async () => (await getConnector(id)).body.replication?.status === "stopped", 30_000)
    } finally {
      await source.resume()
    }
    await source.query(`insert into public.accounts (id, email) values (900007, 'after-restart@example.com')`)
    await waitFor("the row written after the restart on the mirror", async () => (await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id = 900007")).rows[0].n === 1, 60_000)
    expect(await applyErrors()).toBeGreaterThan(before)
    // Several monitor rounds later, still nothing quarantined, and the mirror ready and streaming.
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.viewer })).body).toEqual({ entries: [] })
    expect((await getConnector(id)).body).toMatchObject({ branching_engine_status: "ready", replication: { status: "streaming" } })
  }, 120_000)

  it("quarantine: a publication changed on the source (a mirrored table left out, then dropped) is quarantined though the subscription streams on; its release copies the mirror again", async () => {
    const name = `scion_${id.toLowerCase()}`
    const quarantined = () =>
      eventually("the monitor to quarantine the changed publication", async () => {
        const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
        return list.body.entries.find((e: { reason: string }) => e.reason === "publication_changed")
      }, 30_000)
    await source.query(`alter publication ${name} drop table public.accounts`)
    // Postgres 18 skips what the publication no longer publishes: no error anywhere on the mirror.
    await source.query(`insert into public.accounts (id, email) values (900010, 'while-unpublished@example.com')`)
    const entry = await quarantined()
    expect(entry).toMatchObject({ status: "quarantined", detail: expect.stringContaining("no longer publishes public.accounts") })
    expect((await getConnector(id)).body.branching_engine_status).toBe("degraded")
    await waitFor("the quarantined subscription to be paused", async () => (await queryEngine(scion, id, "select subenabled from pg_subscription")).rows[0].subenabled === false, 30_000)
    expect((await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id = 900010")).rows[0].n).toBe(0)

    // Dropped outright while quarantined: still the one entry, still copied again on release.
    await source.query(`drop publication ${name}`)
    await source.query(`insert into public.accounts (id, email) values (900011, 'while-dropped@example.com')`)
    await new Promise((resolve) => setTimeout(resolve, 2_000))
    const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
    expect(list.body.entries).toEqual([expect.objectContaining({ quarantine_id: entry.quarantine_id, reason: "publication_changed" })])

    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    const accounts = (await source.query("select count(*)::int as n from public.accounts")).rows[0].n as number
    await restoredByCopy(name, accounts)
    expect((await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id in (900010, 900011)")).rows[0].n).toBe(2)
    expect((await source.query(`select count(*)::int as n from pg_publication_tables where pubname = '${name}' and schemaname = 'public' and tablename = 'accounts'`)).rows[0].n).toBe(1)
    expect(await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])).toEqual([])
    // And the pipeline streams from the new slot.
    await source.query(`insert into public.accounts (id, email) values (900012, 'after-republish@example.com')`)
    await waitFor("a row written after the restore on the mirror", async () => (await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id = 900012")).rows[0].n === 1, 30_000)
  }, 180_000)

  it("quarantine: a subscription that keeps failing to apply is quarantined; after the conflict is fixed, release resumes it", async () => {
    // A row written on the mirror directly collides with the next one from the source.
    await queryEngine(scion, id, "insert into public.accounts (id, email) values (777777, 'mirror-only@example.com')")
    await source.query("insert into public.accounts (id, email) values (777777, 'source@example.com')")
    const entry = await eventually("the monitor to quarantine the failing subscription", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.find((e: { reason: string }) => e.reason === "subscription_error")
    }, 60_000)
    expect(entry).toMatchObject({ status: "quarantined", detail: expect.stringMatching(/apply error/) })
    // The entry commits first, then the monitor pauses the subscription (under its lock).
    await waitFor("the quarantined subscription to be paused", async () => (await queryEngine(scion, id, "select subenabled from pg_subscription")).rows[0].subenabled === false, 30_000)

    await queryEngine(scion, id, "delete from public.accounts where id = 777777")
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    await waitFor("the source's row to arrive once replication resumed", async () => {
      const rows = await queryEngine(scion, id, "select email from public.accounts where id = 777777")
      const open = await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])
      return rows.rows[0]?.email === "source@example.com" && open.length === 0
    }, 60_000)
  }, 120_000)

  it("quarantine: replication lagging beyond the bound is quarantined; release lets it catch up", async () => {
    // The subscription stops consuming while the source writes 64 MiB of WAL.
    await queryEngine(scion, id, `alter subscription "scion_${id.toLowerCase()}" disable`)
    await source.query("select count(pg_logical_emit_message(false, 'scion-e2e', repeat('x', 1024 * 1024))) from generate_series(1, 64)")
    const entry = await eventually("the monitor to quarantine the lag", async () => {
      const list = await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })
      return list.body.entries.find((e: { reason: string }) => e.reason === "lag_exceeded")
    }, 30_000)
    expect(entry.detail).toMatch(/bytes of WAL behind the source/)
    expect((await scion.request("POST", `/v1/connectors/${id}/quarantine/${entry.quarantine_id}/release`, { token: tokens.member })).status).toBe(200)
    await source.query("insert into public.accounts (id, email) values (900003, 'after-lag@example.com')")
    await waitFor("replication to catch up and the released row to go", async () => {
      const rows = await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id = 900003")
      const open = await queryMetadata(scion, "select 1 from connector.quarantine_entries where connector_id = $1", [id])
      return rows.rows[0].n === 1 && open.length === 0
    }, 60_000)
  }, 120_000)

  it("index: a new selection rolls out to the ready engine (connector_rollout); nothing left to apply is 200", async () => {
    expect((await select(id, ["postgres.public.*"])).status).toBe(200)
    expect((await decide(id, DECISIONS)).status).toBe(200)
    expect((await getConnector(id)).body.needs_reindex).toBe(true)
    expect((await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.viewer })).status).toBe(403)
    const started = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(started.status, scion.explain(started)).toBe(202)
    expect(started.body).toMatchObject({ resource_id: id, type: "connector_rollout" })
    const operation = await settle(started.body.operation_id)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", type: "connector_rollout" })
    const tables = await queryEngine(scion, id, `select to_regclass('audit.log') is null as gone, (select count(*) from public.invoices)::int as invoices`)
    expect(tables.rows[0]).toEqual({ gone: true, invoices: 300001 })
    const connector = (await getConnector(id)).body
    expect(connector).toMatchObject({ branching_engine_status: "ready", needs_reindex: false, indexing_status: "indexed" })
    const published = await source.query(`select count(*)::int as n from pg_publication_tables where pubname = 'scion_${id.toLowerCase()}' and schemaname = 'audit'`)
    expect(published.rows[0].n).toBe(0)

    const nothing = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(nothing.status).toBe(200)
    expect(nothing.body).toMatchObject({ connector_id: id, message: expect.stringMatching(/already mirrors/) })
    const attempts = await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.member })
    // The setup, the restores after the two lost slots, the dropped subscription, the invalidated
    // slot and the changed publication, and this rollout (which left audit.log out of the
    // publication before the mirror dropped it: not a changed publication).
    expect(attempts.body.attempts).toHaveLength(7)
    expect(attempts.body.attempts[0].total_checks).toBe(16)
    // Evidence is append-only: the setup's attempt, the oldest, holds the rows it held then.
    expect(attempts.body.attempts.at(-1).attempt_id).toBe(setupEvidence.attemptId)
    const setupRows = await scion.request("GET", `/v1/connectors/${id}/readiness-checks?attempt_id=${setupEvidence.attemptId}`, { token: tokens.member })
    expect(setupRows.body.checks).toEqual(setupEvidence.checks)
  }, 300_000)

  it("a branch is cut while a roll-out's new table is still copying: the roll-out holds no session on the mirror through its copy", async () => {
    // In a schema the selection does not cover yet: a table created in a selected one would join
    // the mirror on its own (captured DDL), racing the roll-out to it.
    await source.query("create schema extra; create table extra.late (id int primary key, v text); insert into extra.late select g, 'v' || g from generate_series(1, 100) g")
    await discover(id)
    // The decisions made for the last roll-out stand.
    const selected = await select(id, ["postgres.public.*", "postgres.extra.late"])
    expect(selected.status, scion.explain(selected)).toBe(200)
    expect((await getConnector(id)).body.needs_reindex).toBe(true)
    // The new table's copy starts from a slot of its own, which the source makes only once the
    // transactions running then have ended: the roll-out stays in its initial copy for as long as
    // this one stays open.
    const holder = new pg.Client({ host: source.host, port: source.port, user: source.username, password: source.password, database: "postgres" })
    await holder.connect()
    try {
      await holder.query("begin; select pg_current_xact_id()")
      const started = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
      expect(started.status, scion.explain(started)).toBe(202)
      let seen: unknown
      await waitFor("the roll-out to wait in its initial copy", async () => {
        const op = (await scion.request("GET", `/v1/operations/${started.body.operation_id}`, { token: tokens.member })).body
        seen = op
        return op.status === "running" && op.stage === "initial_copy"
      }, 60_000).catch((error: unknown) => {
        throw new Error(`${String(error)}; the roll-out last: ${JSON.stringify(seen)}`)
      })
      const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: id, service_type: "postgres", name: "during-rollout" } })
      expect(created.status, scion.explain(created)).toBe(202)
      const branch = await settle(created.body.operation_id)
      expect(branch.status, JSON.stringify(branch)).toBe("completed")
      const rollout = (await scion.request("GET", `/v1/operations/${started.body.operation_id}`, { token: tokens.member })).body
      expect(rollout).toMatchObject({ status: "running", stage: "initial_copy" })
      await holder.query("rollback")
      const done = await settle(started.body.operation_id)
      expect(done, JSON.stringify(done)).toMatchObject({ status: "completed", type: "connector_rollout" })
      const late = await queryEngine(scion, id, "select count(*)::int as n from extra.late")
      expect(late.rows[0].n).toBe(100)
    } finally {
      await holder.end()
    }
  }, 300_000)

  it("masking rules offer what discovery detected by column name; a rule covering it takes it off the suggestions", async () => {
    const before = await scion.request("GET", `/v1/connectors/${id}/masking-rules`, { token: tokens.viewer })
    expect(before.status, scion.explain(before)).toBe(200)
    expect(before.body).toEqual({ rules: [], policy: "permissive", safe_columns: [], suggested_rules: [{ schema: "public", table: "accounts", column: "email", method: "email" }] })
    // Derived when the selection is written; a row without it is read from its structure.
    const [derived] = await queryMetadata(scion, "select selected_masking_suggestions as s from connector.connectors where id = $1", [id])
    expect(derived.s).toEqual([{ schema: "public", table: "accounts", column: "email", method: "email" }])
    await queryMetadata(scion, "update connector.connectors set selected_masking_suggestions = null where id = $1", [id])
    const older = await scion.request("GET", `/v1/connectors/${id}/masking-rules`, { token: tokens.viewer })
    expect(older.body).toEqual(before.body)
    // The migration that added the column fills it for older rows, in SQL, the same as the unit derives it.
    const migration = readFileSync(new URL("../../services/connector/migrations/0011_selected_masking_suggestions.sql", import.meta.url), "utf8")
    await queryMetadata(scion, `set search_path = connector; ${migration.slice(migration.indexOf("update connectors"))}`)
    const [filled] = await queryMetadata(scion, "select selected_masking_suggestions as s from connector.connectors where id = $1", [id])
    expect(filled.s).toEqual(derived.s)
    const rules = { rules: [{ schema: "public", table: "accounts", column: "email", method: "hash" }] }
    expect((await scion.request("PUT", `/v1/connectors/${id}/masking-rules`, { token: tokens.member, body: rules })).status).toBe(200)
    const after = await scion.request("GET", `/v1/connectors/${id}/masking-rules`, { token: tokens.viewer })
    expect(after.body).toEqual({ ...rules, policy: "permissive", safe_columns: [], suggested_rules: [] })
  })

  it("new connection details (PUT) reach the engine's subscription, and replication goes on with them", async () => {
    await source.query("create role rotated superuser login password 'rotated-pass'")
    const updated = await scion.request("PUT", `/v1/connectors/${id}`, {
      token: tokens.member,
      body: { connection_details: source.details({ username: "rotated", password: "rotated-pass" }) }
    })
    expect(updated.status, scion.explain(updated)).toBe(200)
    const conninfo = (await queryEngine(scion, id, "select subconninfo from pg_subscription")).rows[0].subconninfo as string
    expect(conninfo).toContain("user='rotated'")
    await source.query("insert into public.accounts (id, email) values (900002, 'rotated@example.com')")
    await waitFor("the row written after the rotation in the mirror", async () =>
      (await queryEngine(scion, id, "select count(*)::int as n from public.accounts where id = 900002")).rows[0].n === 1, 30_000)
    const sender = await source.query("select usename from pg_stat_replication where application_name = $1".replace("$1", `'scion_${id.toLowerCase()}'`))
    expect(sender.rows.map((r) => r.usename)).toEqual(["rotated"])
  }, 60_000)

  it("deleting the connector drops the subscription's slot and publication on the source and destroys the engine", async () => {
    // While it replicates, the monitor reports its lag each round; after the delete, the series is gone.
    const lagSeries = `scion_replication_lag_bytes{connector_id="${id}"} `
    const lag = async () => (await (await fetch(scion.metricsUrl("connector"))).text()).split("\n").find((line) => line.startsWith(lagSeries))
    await waitFor("the connector's replication lag in the metrics", async () => (await lag()) !== undefined, 15_000)
    expect((await lag())!.slice(lagSeries.length)).toMatch(/^\d+$/)
    const removed = await scion.request("DELETE", `/v1/connectors/${id}`, { token: tokens.admin })
    expect(removed.status, scion.explain(removed)).toBe(202)
    const operation = await settle(removed.body.operation_id)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed", result: { engine: { status: "destroyed" } } })
    const leftovers = await source.query(
      `select (select count(*) from pg_publication where pubname like 'scion_${id.toLowerCase()}%')::int as publications,
              (select count(*) from pg_replication_slots where slot_name like 'scion_${id.toLowerCase()}%')::int as slots`
    )
    expect(leftovers.rows[0]).toEqual({ publications: 0, slots: 0 })
    expect(existsSync(join(scion.engineDataDir, id))).toBe(false)
    await waitFor("the deleted connector's lag series to leave the metrics", async () => (await lag()) === undefined, 15_000)
  }, 120_000)
})

describe("index before an engine, and a role that may not replicate", () => {
  it("index records the selection for engine setup; with nothing selected it is 400", async () => {
    const id = await createConnector()
    await discover(id)
    const empty = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(empty.status).toBe(400)
    expect(typeof empty.body.detail).toBe("string")
    expect((await select(id, ["postgres.public.accounts"])).status).toBe(200)
    const recorded = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(recorded.status, scion.explain(recorded)).toBe(200)
    expect(recorded.body).toMatchObject({ indexing_status: "indexed", needs_reindex: false, branching_engine_status: "not_set_up", message: expect.stringMatching(/engine setup/) })
  })

  it("a self-managed connector whose role may not replicate fails the setup with what to do, and the connector says failed", async () => {
    await source.query(`create role reader login password 'reader-pass'; grant select on all tables in schema public to reader;`)
    const id = await createConnector({ username: "reader", password: "reader-pass" }, { byoc: "self_managed" })
    await discover(id)
    expect((await select(id, ["postgres.public.accounts"])).status).toBe(200)
    const started = await setUp(id)
    expect(started.status, scion.explain(started)).toBe(202)
    const operation = await settle(started.body.operation_id)
    expect(operation.status).toBe("failed")
    expect(operation.error).toMatch(/^publication: the role reader may not publish the selected tables .*grant script/)
    expect((await getConnector(id)).body).toMatchObject({ branching_engine_status: "failed", indexing_status: "failed" })
    // A failed setup can be started again (and fails the same way until the grants change).
    const retried = await setUp(id)
    expect(retried.status).toBe(202)
    expect((await settle(retried.body.operation_id)).status).toBe("failed")
  }, 120_000)

  it("a role that owns none of the tables: setup fails with what to do; once an administrator has run the grant script, setup succeeds as that role, and a delete drops what the script made", async () => {
    await source.query(`create role least login password 'least-pass'; grant select on all tables in schema public to least;`)
    const id = await createConnector({ username: "least", password: "least-pass" }, { byoc: "self_managed" })
    await discover(id)
    expect((await select(id, ["postgres.public.accounts"])).status).toBe(200)
    const refused = await settle((await setUp(id)).body.operation_id)
    expect(refused.error).toMatch(/^publication: the role least may not publish the selected tables .*grant script/)
    const script = await scion.request("POST", `/v1/connectors/${id}/grant-script`, { token: tokens.viewer })
    expect(script.status, scion.explain(script)).toBe(200)
    // As the source's administrator would: psql, as a superuser, stopping at the first error.
    execFileSync("psql", [`postgresql://postgres:${encodeURIComponent(source.password)}@${source.host}:${source.port}/postgres`, "-v", "ON_ERROR_STOP=1", "-q", "-f", "-"], {
      input: script.body.sql,
      encoding: "utf8",
      timeout: 60_000
    })
    const publication = `scion_${id.toLowerCase()}`
    expect((await source.query(`select pg_get_userbyid(pubowner) as owner, pubviaroot from pg_publication where pubname = '${publication}'`)).rows).toEqual([{ owner: "least", pubviaroot: true }])
    const started = await setUp(id)
    expect(started.status, scion.explain(started)).toBe(202)
    const operation = await settle(started.body.operation_id)
    expect(operation, JSON.stringify(operation)).toMatchObject({ status: "completed" })
    expect((await getConnector(id)).body).toMatchObject({ branching_engine_status: "ready" })
    await source.query("insert into public.accounts (id, email) select max(id) + 1, 'least@example.com' from public.accounts")
    await eventually("the source's row in the mirror", async () => {
      const rows = await queryEngine(scion, id, "select count(*)::int as n from public.accounts where email = 'least@example.com'")
      return rows.rows[0].n === 1 ? true : undefined
    }, 30_000)
    const removed = await scion.request("DELETE", `/v1/connectors/${id}`, { token: tokens.admin })
    expect(removed.status, scion.explain(removed)).toBe(202)
    const deletion = await settle(removed.body.operation_id)
    expect(deletion, JSON.stringify(deletion)).toMatchObject({
      status: "completed",
      result: { source_cleanup: { status: "cleaned", databases: [{ database: "postgres", publications_dropped: [publication], slots_dropped: [publication], capture: "left_installed" }] } }
    })
    // The capture an administrator installed stays for them to remove (event triggers are a superuser's).
    expect((await source.query("select count(*)::int as n from pg_event_trigger where evtname like 'scion_capture_%'")).rows[0].n).toBe(3)
    const leftovers = await source.query(
      `select (select count(*) from pg_publication where pubname like '${publication}%')::int as publications,
              (select count(*) from pg_replication_slots where slot_name like '${publication}%')::int as slots`
    )
    expect(leftovers.rows[0]).toEqual({ publications: 0, slots: 0 })
  }, 300_000)

  it("the ready-connector flow works with a role whose password needs quoting in the subscription's conninfo", async () => {
    // Quotes, a backslash and spaces: the engine's subscription must pass it to libpq intact.
    const password = `it's a \\ "tricky" pass`
    await source.query(`create role tricky superuser login password '${password.replaceAll("'", "''")}'`)
    const tricky = { ...source, details: (overrides: Record<string, unknown> = {}) => source.details({ username: "tricky", password, ...overrides }) }
    const ready = await readyConnector(scion, { orgId, memberToken: tokens.member, adminToken: tokens.admin, source: tricky, selectedPaths: ["postgres.public.accounts", "postgres.public.invoices"] })
    expect(ready.setupOperation.result.tables).toEqual(["postgres.public.accounts", "postgres.public.invoices"])
    const rows = await queryEngine(scion, ready.connectorId, "select count(*)::int as n from public.accounts")
    const onSource = await source.query("select count(*)::int as n from public.accounts")
    expect(rows.rows[0].n).toBe(onSource.rows[0].n)
  }, 300_000)
})

describe("when the work cannot start", () => {
  let respawned: UnitProcess | undefined
  afterAll(async () => {
    await respawned?.stop()
  })

  it("engine setup, discovery and delete answer 503 while the operation unit is down (nothing starts), and work again after", async () => {
    const id = await createConnector()
    await discover(id)
    expect((await select(id, ["postgres.public.accounts"])).status).toBe(200)
    const discoveredBy = await queryMetadata(scion, "select discovery_operation_id from connector.connectors where id = $1", [id])
    const [operationUnit] = scion.operations
    await operationUnit!.stop("SIGKILL")
    try {
      const setup = await setUp(id)
      expect(setup.status, scion.explain(setup)).toBe(503)
      expect(typeof setup.body.detail).toBe("string")
      expect((await scion.request("DELETE", `/v1/connectors/${id}`, { token: tokens.admin })).status).toBe(503)
      const rediscover = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.member })
      expect(rediscover.status, scion.explain(rediscover)).toBe(503)
      expect(typeof rediscover.body.detail).toBe("string")
      // Nothing changed: still not set up, no setup recorded.
      expect((await getConnector(id)).body).toMatchObject({ branching_engine_status: "not_set_up" })
      expect(await queryMetadata(scion, "select setup_operation_id from connector.connectors where id = $1", [id])).toEqual([{ setup_operation_id: null }])
      expect(await queryMetadata(scion, "select discovery_operation_id from connector.connectors where id = $1", [id])).toEqual(discoveredBy)
    } finally {
      respawned = respawn(operationUnit!)
      await waitFor("the operation unit to serve again", () => healthServing(scion.operationUrls[0]!), 60_000)
    }
    const started = await setUp(id)
    expect(started.status, scion.explain(started)).toBe(202)
    // While that setup runs (provisioning alone takes a second), index is 409; another org's caller gets 404.
    const during = await scion.request("POST", `/v1/connectors/${id}/index`, { token: tokens.member })
    expect(during.status, scion.explain(during)).toBe(409)
    expect((await scion.request("POST", `/v1/connectors/${id}/index`, { token: strangerToken })).status).toBe(404)
    expect((await settle(started.body.operation_id)).status).toBe("completed")
  }, 180_000)
})
