/**
 * The live mirror follows the source's schema (issue 11), end to end: every unit a separate
 * process, the machine's NATS and Postgres, a throwaway source cluster whose role may create
 * event triggers. A migration with every DDL kind runs on the source while a writer inserts and
 * updates continuously; afterwards a new branch's schema and data equal the source's for the
 * selected tables, nothing is quarantined, and GET …/schema-changes lists each statement.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryEngine, readyConnector } from "../support/engine.js"
import { createPostgresConnector, settleOperation, teamOrg } from "../support/flows.js"
import { startPg15SourceCluster, startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { startScion, waitFor, type Scion } from "../support/system.js"

const SOURCE_SCHEMA = `
    create type public.status as enum ('new', 'paid');
    create table public.users (id serial primary key, email text not null unique, name text, created_at timestamptz not null default now());
    create table public.orders (
      id bigint generated always as identity primary key,
      user_id int not null references public.users (id),
      status public.status not null default 'new',
      amount numeric(10, 2) check (amount >= 0),
      note text
    );
    create index orders_user on public.orders (user_id);
    create schema audit;
    create table audit.trail (id bigserial primary key, line text);
    insert into public.users (email, name) select 'user' || g || '@example.com', 'User ' || g from generate_series(1, 200) g;
    insert into public.orders (user_id, amount) select 1 + g % 200, g % 500 from generate_series(1, 1000) g;`

let scion: Scion
let source: SourceCluster
let orgId: string
let tokens: Record<"viewer" | "member" | "admin" | "owner", string>
let strangerToken: string
let connectorId: string

beforeAll(async () => {
  ;[scion, source] = await Promise.all([
    startScion({ env: { QUARANTINE_MONITOR_INTERVAL: "1 seconds", SCHEMA_FOLLOW_INTERVAL: "200 millis", REPLICATION_HEARTBEAT_INTERVAL: "1 seconds" } }),
    startSourceCluster({ logical: true })
  ])
  await source.query(SOURCE_SCHEMA)
  const org = await teamOrg(scion, "Schema Org")
  orgId = org.orgId
  tokens = org.tokens
  strangerToken = org.strangerToken
  // Only the public schema is mirrored (whole): audit is outside the selection.
  connectorId = (await readyConnector(scion, { orgId: org.orgId, memberToken: tokens.member, adminToken: tokens.admin, source, selectedPaths: ["postgres.public.*"] })).connectorId
}, 300_000)

afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

const schemaChanges = (query = "", token = tokens.member, id = connectorId) => scion.request("GET", `/v1/connectors/${id}/schema-changes${query}`, { token })

/** A writer that keeps inserting into and updating the source while the migration runs. */
const startWriter = (client: pg.Client) => {
  let running = true
  let writes = 0
  const done = (async () => {
    while (running) {
      await client.query("insert into public.users (email) values ('w' || gen_random_uuid() || '@example.com')")
      await client.query("update public.orders set note = 'touched ' || now() where id = (select id from public.orders order by random() limit 1)")
      await client.query("insert into public.orders (user_id, amount) values ((select max(id) from public.users), 7)")
      writes++
    }
  })()
  return { stop: async () => ((running = false), await done, writes) }
}

/** The statements of the migration, each run on its own, and what the schema-changes list must show for it. */
const MIGRATION: ReadonlyArray<{ readonly sql: string; readonly status: "applied" | "skipped" }> = [
  { sql: "alter table public.users add column plan text default 'free'", status: "applied" },
  { sql: "alter table public.users add column score int not null default 0", status: "applied" },
  { sql: "alter table public.users add column referrer int", status: "applied" },
  { sql: "alter table public.users drop column referrer", status: "applied" },
  { sql: "alter table public.users rename column name to full_name", status: "applied" },
  { sql: "alter table public.orders alter column amount type numeric(14, 2)", status: "applied" },
  { sql: "alter table public.orders alter column note set default 'none'", status: "applied" },
  { sql: "alter table public.orders alter column note drop default", status: "applied" },
  { sql: "alter table public.users alter column plan set not null", status: "applied" },
  { sql: "alter table public.users alter column plan drop not null", status: "applied" },
  { sql: "create index users_plan on public.users (plan)", status: "applied" },
  { sql: "create index orders_note on public.orders (note)", status: "applied" },
  { sql: "drop index public.orders_note", status: "applied" },
  { sql: "alter table public.orders add constraint orders_amount_cap check (amount < 1000000)", status: "applied" },
  { sql: "alter table public.orders drop constraint orders_amount_cap", status: "applied" },
  { sql: "create table public.invoices (id serial primary key, order_id bigint references public.orders (id), total numeric(12, 2) not null)", status: "applied" },
  { sql: "create table public.coupons (code text primary key, pct int)", status: "applied" },
  { sql: "alter table public.coupons rename to vouchers", status: "applied" },
  { sql: "create table public.scratch (id int primary key)", status: "applied" },
  // Without a replica identity it cannot join the publication (the source would refuse its updates).
  { sql: "create table public.nokey (v int)", status: "skipped" },
  { sql: "drop table public.scratch", status: "applied" },
  { sql: "create type public.tier as enum ('bronze', 'silver')", status: "applied" },
  { sql: "alter type public.status add value 'void'", status: "applied" },
  { sql: "alter table public.users add column tier public.tier", status: "applied" },
  { sql: "alter table public.orders drop constraint orders_user_id_fkey", status: "applied" },
  { sql: "alter table public.orders add constraint orders_user_fk foreign key (user_id) references public.users (id)", status: "applied" },
  { sql: "alter table audit.trail add column at timestamptz", status: "skipped" }
]

/**
 * The migration with every DDL kind, run on `src` while a writer inserts and updates; then the
 * schema-changes list, the connector and a new branch are checked against the source.
 */
const migrateAndCompare = async (src: SourceCluster, id: string) => {
  const writerClient = new pg.Client({ host: src.host, port: src.port, user: src.username, password: src.password, database: "postgres" })
  await writerClient.connect()
  const writer = startWriter(writerClient)
  const migrator = new pg.Client({ host: src.host, port: src.port, user: src.username, password: src.password, database: "postgres" })
  await migrator.connect()
  try {
    for (const step of MIGRATION) {
      await migrator.query(step.sql)
      // Rows that use what the statement made arrive right behind it.
      if (step.sql.includes("add column plan")) await migrator.query("insert into public.users (email, plan) values ('planned@example.com', 'team')")
      if (step.sql.startsWith("create table public.invoices")) await migrator.query("insert into public.invoices (order_id, total) select id, amount from public.orders order by id limit 20")
      if (step.sql.startsWith("create table public.coupons")) await migrator.query("insert into public.coupons values ('WELCOME', 10)")
      if (step.sql.includes("add column tier")) await migrator.query("update public.users set tier = 'silver' where id % 10 = 0")
    }
    // A migration tool that sends DDL and DML as one multi-statement string.
    await migrator.query("alter table public.orders add column currency text not null default 'EUR'; insert into public.orders (user_id, amount, currency) values (1, 3, 'USD');")
    await migrator.query("update public.orders set status = 'void' where id = 1")
    await migrator.query("truncate public.vouchers")
    await migrator.query("insert into public.vouchers values ('SPRING', 15)")
  } finally {
    await migrator.end()
  }
  await new Promise((resolve) => setTimeout(resolve, 500))
  const writes = await writer.stop()
  await writerClient.end()
  expect(writes).toBeGreaterThan(0)

  // Every statement is listed with what the mirror did.
  const expected = MIGRATION.length + 1
  let changes: ReadonlyArray<Record<string, any>> = []
  await waitFor("the schema changes to be listed", async () => {
    changes = (await schemaChanges("?limit=100", tokens.member, id)).body.changes
    return changes.length >= expected
  }, 60_000)
  const chronological = [...changes].reverse()
  for (const step of MIGRATION) {
    const entry = chronological.find((c) => c.statement === step.sql)
    expect(entry, step.sql).toBeDefined()
    expect(entry).toMatchObject({ mode: "captured", status: step.status, error: null })
    if (step.status === "applied") expect(entry!.actions.length, step.sql).toBeGreaterThan(0)
  }
  expect(chronological.find((c) => c.statement?.startsWith("create table public.invoices"))?.tables_added).toEqual(["public.invoices"])
  expect(changes.every((c) => c.status !== "failed")).toBe(true)
  // Newest first.
  expect(Number(changes[0]!.change_id.slice(4))).toBeGreaterThan(Number(changes.at(-1)!.change_id.slice(4)))

  // Nothing was quarantined, and the connector's schema moved with the src.
  expect((await scion.request("GET", `/v1/connectors/${id}/quarantine`, { token: tokens.member })).body).toEqual({ entries: [] })
  const connector = (await scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })).body
  expect(connector.branching_engine_status).toBe("ready")
  expect(connector.needs_reselection).toBe(false)
  const selectedTables = connector.selected_schema_structure.databases[0].schemas[0].tables.map((t: { name: string }) => t.name).sort()
  // The selection (public.*) follows the schema: a new table without a replica identity is
  // selected but waits for a decision before it can be mirrored.
  expect(selectedTables).toEqual(["invoices", "nokey", "orders", "users", "vouchers"])
  expect(connector.replica_identity_preflight.unresolved).toEqual(["postgres.public.nokey"])

  // Once the mirror has caught up with the stopped writer, a branch equals the source:
  // catalog, row counts and checksums.
  const digestOf = (table: string) => `select count(*)::int as n, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as sum from public.${table} t`
  await waitFor("the mirror to catch up", async () => {
    for (const table of ["users", "orders", "invoices", "vouchers"]) {
      const [a, b] = await Promise.all([src.query(digestOf(table)), queryEngine(scion, id, digestOf(table)).catch(() => ({ rows: [] }))])
      if (JSON.stringify(a.rows) !== JSON.stringify(b.rows)) return false
    }
    return true
  }, 60_000)
  const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: id, name: "after-migration", service_type: "postgres" } })
  expect(created.status, JSON.stringify(created.body)).toBe(202)
  const operation = await settleOperation(scion, created.body.operation_id, tokens.member)
  expect(operation.status, JSON.stringify(operation)).toBe("completed")
  const branch = new pg.Client({ connectionString: operation.result.branch_url.replace("sslmode=require", "sslmode=no-verify") })
  await branch.connect()
  try {
    const catalog = `select table_name, column_name, ordinal_position, data_type, udt_name, column_default, is_nullable, numeric_precision, numeric_scale
                     from information_schema.columns where table_schema = 'public' order by table_name, column_name`
    const constraints = `select conrelid::regclass::text as rel, conname, pg_get_constraintdef(oid) as def from pg_constraint
                         where connamespace = 'public'::regnamespace and contype in ('p', 'u', 'c', 'f') order by 1, 2`
    const indexes = "select tablename, indexname, indexdef from pg_indexes where schemaname = 'public' order by 1, 2"
    const enums = "select t.typname, array_agg(e.enumlabel order by e.enumsortorder)::text as labels from pg_enum e join pg_type t on t.oid = e.enumtypid group by 1 order by 1"
    const sourceRows = async (text: string) => (await src.query(text)).rows
    const branchRows = async (text: string) => (await branch.query(text)).rows
    const mirrored = (rows: ReadonlyArray<Record<string, unknown>>) => rows.filter((r) => !["nokey"].includes(String(r.table_name ?? r.tablename ?? "")))
    // Columns compare without ordinal positions: a dropped column leaves a gap on the source only.
    const withoutPosition = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map(({ ordinal_position: _, ...rest }) => rest)
    expect(withoutPosition(await branchRows(catalog))).toEqual(withoutPosition(mirrored(await sourceRows(catalog))))
    expect(await branchRows(constraints)).toEqual(await sourceRows(constraints))
    expect(await branchRows(indexes)).toEqual(await sourceRows(indexes))
    expect(await branchRows(enums)).toEqual(await sourceRows(enums))
    for (const table of ["users", "orders", "invoices", "vouchers"]) expect(await branchRows(digestOf(table)), table).toEqual(await sourceRows(digestOf(table)))
    expect((await branchRows("select plan from public.users where email = 'planned@example.com'"))[0]).toEqual({ plan: "team" })
    expect((await branchRows("select count(*)::int as n from public.vouchers"))[0]).toEqual({ n: 1 })
  } finally {
    await branch.end()
  }
}

describe("captured schema changes", () => {
  it("engine setup installs capture on the source when its role may create event triggers", async () => {
    const triggers = await source.query("select evtname from pg_event_trigger order by 1")
    expect(triggers.rows.map((r) => r.evtname)).toEqual(["scion_capture_ddl", "scion_capture_drop"])
    const published = await source.query("select schemaname || '.' || tablename as t from pg_publication_tables order by 1")
    expect(published.rows.map((r) => r.t)).toEqual(expect.arrayContaining(["scion.heartbeat", "scion.schema_log", "public.orders", "public.users"]))
    expect(published.rows.map((r) => r.t)).not.toContain("audit.trail")
    const listed = await schemaChanges()
    expect(listed.status).toBe(200)
    expect(listed.body).toEqual({ changes: [] })
  })

  it("the connector states its replication: streaming, capturing, with the source time of the last heartbeat applied", async () => {
    const before = Date.now()
    await waitFor("a heartbeat applied after now", async () => {
      const replication = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.viewer })).body.replication
      return replication?.last_applied_at !== null && replication?.last_applied_at !== undefined && Date.parse(replication.last_applied_at) >= before - 1000
    }, 30_000)
    const connector = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.viewer })).body
    expect(connector.replication).toMatchObject({ status: "streaming", schema_follow: "capture", active_pipeline_id: `scion_${connectorId.toLowerCase()}` })
    expect(connector.replication.lag_bytes).toBeGreaterThanOrEqual(0)
    expect(Date.parse(connector.replication.measured_at)).toBeGreaterThan(before - 5000)
  })

  it("a migration with every DDL kind, run under continuous writes, is followed: a new branch equals the source", () => migrateAndCompare(source, connectorId))

  it("schema-changes: limit and offset, 422 outside their bounds, 404 for other orgs, readable by viewers", async () => {
    const all = (await schemaChanges("?limit=5000")).body.changes
    expect(all.length).toBeGreaterThan(3)
    const page = await schemaChanges("?limit=2&offset=1")
    expect(page.status).toBe(200)
    expect(page.body.changes.map((c: { change_id: string }) => c.change_id)).toEqual(all.slice(1, 3).map((c: { change_id: string }) => c.change_id))
    for (const query of ["?limit=0", "?limit=5001", "?offset=-1", "?limit=abc"]) {
      const refused = await schemaChanges(query)
      expect(refused.status, query).toBe(422)
      expect(refused.body.detail[0].loc[0]).toBe("query")
    }
    expect((await schemaChanges("", tokens.viewer)).status).toBe(200)
    expect((await schemaChanges("", strangerToken)).status).toBe(404)
    expect((await scion.request("GET", "/v1/connectors/con_unknown/schema-changes", { token: tokens.member })).status).toBe(404)
    expect((await scion.request("GET", `/v1/connectors/${connectorId}/schema-changes`)).status).toBe(401)
  })
})

const createBranch = (body: Record<string, unknown>) =>
  scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: connectorId, service_type: "postgres", ...body } })
const branchRows = async (url: string, text: string) => {
  const client = new pg.Client({ connectionString: url.replace("sslmode=require", "sslmode=no-verify") })
  await client.connect()
  try {
    return (await client.query(text)).rows
  } finally {
    await client.end()
  }
}
const subscription = () => `"scion_${connectorId.toLowerCase()}"`

describe("freshness of branches", () => {
  it("a branch carries data_as_of and source_lsn; GET answers them too", async () => {
    const before = Date.now()
    await waitFor("a heartbeat newer than now in the mirror", async () => {
      const rows = (await queryEngine(scion, connectorId, "select max(at) as at from scion.heartbeat")).rows
      return rows[0]?.at !== null && new Date(rows[0].at).getTime() >= before - 1000
    }, 30_000)
    const created = await createBranch({ name: "fresh" })
    expect(created.status, JSON.stringify(created.body)).toBe(202)
    const operation = await settleOperation(scion, created.body.operation_id, tokens.member)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(operation.result.source_lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/)
    expect(Date.parse(operation.result.data_as_of)).toBeGreaterThanOrEqual(before - 1000)
    expect(Date.parse(operation.result.data_as_of)).toBeLessThanOrEqual(Date.now())
    const read = await scion.request("GET", `/v1/branches/${operation.result.branch_id}`, { token: tokens.member })
    expect(read.body).toMatchObject({ data_as_of: operation.result.data_as_of, source_lsn: operation.result.source_lsn })
    // Scion's own schema stays out of the branch.
    expect(await branchRows(operation.result.branch_url, "select count(*)::int as n from pg_namespace where nspname = 'scion'")).toEqual([{ n: 0 }])
  })

  it("consistent_with_source copies only once the mirror has what the source had written; without it the copy does not wait", async () => {
    await queryEngine(scion, connectorId, `alter subscription ${subscription()} disable`)
    await source.query("insert into public.vouchers values ('LATE-1', 1)")
    const plain = await createBranch({ name: "not-waiting" })
    expect(plain.status, JSON.stringify(plain.body)).toBe(202)
    const plainDone = await settleOperation(scion, plain.body.operation_id, tokens.member)
    expect(plainDone.status).toBe("completed")
    expect(await branchRows(plainDone.result.branch_url, "select count(*)::int as n from public.vouchers where code = 'LATE-1'")).toEqual([{ n: 0 }])

    await queryEngine(scion, connectorId, `alter subscription ${subscription()} disable`)
    await source.query("insert into public.vouchers values ('LATE-2', 2)")
    const [{ lsn }] = (await source.query("select pg_current_wal_lsn()::text as lsn")).rows
    const consistent = await createBranch({ name: "read-your-writes", consistent_with_source: true })
    expect(consistent.status, JSON.stringify(consistent.body)).toBe(202)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const waiting = (await scion.request("GET", `/v1/operations/${consistent.body.operation_id}`, { token: tokens.member })).body
    expect(waiting).toMatchObject({ status: "running", stage: "catch_up" })
    await queryEngine(scion, connectorId, `alter subscription ${subscription()} enable`)
    const done = await settleOperation(scion, consistent.body.operation_id, tokens.member)
    expect(done.status, JSON.stringify(done)).toBe("completed")
    expect(await branchRows(done.result.branch_url, "select code from public.vouchers where code like 'LATE-%' order by code")).toEqual([{ code: "LATE-1" }, { code: "LATE-2" }])
    const [{ ahead }] = (await source.query(`select '${done.result.source_lsn}'::pg_lsn >= '${lsn}'::pg_lsn as ahead`)).rows
    expect(ahead).toBe(true)

    const badLsn = await createBranch({ name: "bad-lsn", min_source_lsn: "yesterday" })
    expect(badLsn.status).toBe(400)
    expect(badLsn.body.detail).toMatch(/min_source_lsn/)
  }, 120_000)

  it("a quarantined mirror is degraded: creates are 422 naming the quarantine, unless allow_stale; after the release it is ready again", async () => {
    // A row the mirror has and the source then inserts too: applying it fails, again and again.
    await queryEngine(scion, connectorId, "insert into public.vouchers values ('CLASH', 1)")
    await source.query("insert into public.vouchers values ('CLASH', 2)")
    let quarantineId = ""
    await waitFor("the monitor to quarantine the failing apply", async () => {
      const connector = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body
      const entries = (await scion.request("GET", `/v1/connectors/${connectorId}/quarantine`, { token: tokens.member })).body.entries
      quarantineId = entries[0]?.quarantine_id ?? ""
      return connector.branching_engine_status === "degraded" && quarantineId !== ""
    }, 60_000)
    const refused = await createBranch({ name: "refused" })
    expect(refused.status, JSON.stringify(refused.body)).toBe(422)
    expect(typeof refused.body.detail).toBe("string")
    expect(refused.body.detail).toContain(quarantineId)
    expect(refused.body.detail).toContain("allow_stale")

    const stale = await createBranch({ name: "stale-ok", allow_stale: true })
    expect(stale.status, JSON.stringify(stale.body)).toBe(202)
    const staleDone = await settleOperation(scion, stale.body.operation_id, tokens.member)
    expect(staleDone.status, JSON.stringify(staleDone)).toBe("completed")
    expect(await branchRows(staleDone.result.branch_url, "select pct from public.vouchers where code = 'CLASH'")).toEqual([{ pct: 1 }])
    // The quarantine still holds the subscription: the stale create did not resume it.
    expect((await queryEngine(scion, connectorId, "select subenabled from pg_subscription")).rows[0].subenabled).toBe(false)

    await queryEngine(scion, connectorId, "delete from public.vouchers where code = 'CLASH'")
    expect((await scion.request("POST", `/v1/connectors/${connectorId}/quarantine/${quarantineId}/release`, { token: tokens.member })).status).toBe(200)
    await waitFor("the engine to be ready and streaming again", async () => {
      const connector = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body
      return connector.branching_engine_status === "ready" && connector.replication.status === "streaming"
    }, 60_000)
    await waitFor("the source's row in the mirror", async () => (await queryEngine(scion, connectorId, "select pct from public.vouchers where code = 'CLASH'")).rows[0]?.pct === 2, 30_000)
  }, 180_000)
})

describe("POST /v1/connectors/{id}/reset", () => {
  it("re-copies the mirror from a fresh slot, schema kept: 202, 409 while it runs, then ready with the source's rows", async () => {
    const slotBefore = (await source.query(`select restart_lsn::text as lsn from pg_replication_slots where slot_name = 'scion_${connectorId.toLowerCase()}'`)).rows[0]
    // The table captured without a replica identity needs a decision before any setup step runs.
    expect((await scion.request("PUT", `/v1/connectors/${connectorId}/replica-identity-decisions`, { token: tokens.admin, body: { decisions: { "postgres.public.nokey": "exclude" } } })).status).toBe(200)
    // Drift only a re-copy repairs: a row the source does not have.
    await queryEngine(scion, connectorId, "insert into public.vouchers values ('MIRROR-ONLY', 9)")
    const started = await scion.request("POST", `/v1/connectors/${connectorId}/reset`, { token: tokens.member })
    expect(started.status, JSON.stringify(started.body)).toBe(202)
    expect(started.body).toMatchObject({ resource_id: connectorId, type: "connector_reset", status: "pending" })
    const again = await scion.request("POST", `/v1/connectors/${connectorId}/reset`, { token: tokens.member })
    expect(again.status).toBe(409)
    const operation = await settleOperation(scion, started.body.operation_id, tokens.member, 120_000)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(operation.type).toBe("connector_reset")
    const connector = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body
    expect(connector.branching_engine_status).toBe("ready")
    expect(await queryEngine(scion, connectorId, "select count(*)::int as n from public.vouchers where code = 'MIRROR-ONLY'").then((r) => r.rows)).toEqual([{ n: 0 }])
    for (const table of ["users", "orders", "vouchers"]) {
      const count = `select count(*)::int as n from public.${table}`
      expect((await queryEngine(scion, connectorId, count)).rows, table).toEqual((await source.query(count)).rows)
    }
    // One slot for the connector, made afresh; the schema followed by the capture is still there.
    const slots = (await source.query(`select restart_lsn::text as lsn from pg_replication_slots where slot_name like 'scion_${connectorId.toLowerCase()}%'`)).rows
    expect(slots).toHaveLength(1)
    expect(slots[0].lsn).not.toBe(slotBefore?.lsn)
    expect((await queryEngine(scion, connectorId, "select count(*)::int as n from information_schema.columns where table_name = 'orders' and column_name = 'currency'")).rows).toEqual([{ n: 1 }])
    // Capture goes on after the reset.
    await source.query("alter table public.vouchers add column note text")
    await waitFor("the captured change after the reset", async () => (await queryEngine(scion, connectorId, "select 1 from information_schema.columns where table_name = 'vouchers' and column_name = 'note'")).rows.length === 1, 30_000)
  }, 180_000)

  it("403 for a viewer, 404 for other orgs, 422 when the engine was never set up", async () => {
    expect((await scion.request("POST", `/v1/connectors/${connectorId}/reset`, { token: tokens.viewer })).status).toBe(403)
    expect((await scion.request("POST", `/v1/connectors/${connectorId}/reset`, { token: strangerToken })).status).toBe(404)
    const idle = await createPostgresConnector(scion, { token: tokens.member, orgId, details: source.details(), extra: { name: "never set up" } })
    const refused = await scion.request("POST", `/v1/connectors/${idle}/reset`, { token: tokens.member })
    expect(refused.status, JSON.stringify(refused.body)).toBe(422)
    expect(refused.body.detail).toMatch(/never set up/)
  })
})

describe("deleting the last capturing connector", () => {
  it("leaves no capture objects on the source", async () => {
    const removed = await scion.request("DELETE", `/v1/connectors/${connectorId}`, { token: tokens.admin })
    expect(removed.status, JSON.stringify(removed.body)).toBe(202)
    expect((await settleOperation(scion, removed.body.operation_id, tokens.admin)).status).toBe("completed")
    const left = await source.query(
      "select (select count(*) from pg_event_trigger)::int as triggers, (select count(*) from pg_namespace where nspname = 'scion')::int as schemas, (select count(*) from pg_publication)::int as publications"
    )
    expect(left.rows[0]).toEqual({ triggers: 0, schemas: 0, publications: 0 })
  }, 120_000)
})

describe("the same migration on a PostgreSQL 15 source", () => {
  let source15: SourceCluster | undefined
  let connector15 = ""
  beforeAll(async () => {
    source15 = await startPg15SourceCluster({ logical: true })
    expect((await source15.query("select current_setting('server_version_num')::int / 10000 as major")).rows[0].major).toBe(15)
    await source15.query(SOURCE_SCHEMA)
    connector15 = (await readyConnector(scion, { orgId, memberToken: tokens.member, adminToken: tokens.admin, source: source15, selectedPaths: ["postgres.public.*"], name: "pg15 source" })).connectorId
  }, 300_000)
  afterAll(async () => {
    await source15?.stop()
  })
  it("is followed just the same: a new branch equals the source", () => migrateAndCompare(source15!, connector15), 180_000)
})
