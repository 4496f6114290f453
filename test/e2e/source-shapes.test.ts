/**
 * A source that uses table inheritance (the partitioning of Postgres before 10, still common): a
 * parent and a child are two tables to logical replication — the parent publishes its own rows
 * only, the child its own — and the mirror holds them as two tables. Readiness compares each
 * table's own rows; a count of the parent that took in the child's rows failed every such setup
 * as failed_validation. A declaratively partitioned table, beside it, is one table to the mirror
 * (published via its root): its count is every partition's rows. And a source table that lost its
 * key after discovery: setup fails validation, and the evidence says which check.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { queryEngine, readyConnector } from "../support/engine.js"
import { settleOperation, teamOrg } from "../support/flows.js"
import { startSourceCluster, type SourceCluster } from "../support/sourceCluster.js"
import { psql, startScion, waitFor, type Scion } from "../support/system.js"

let scion: Scion
let source: SourceCluster
let tokens: Record<"viewer" | "member" | "admin" | "owner", string>
let connectorId: string
let orgId: string

beforeAll(async () => {
  ;[scion, source] = await Promise.all([startScion(), startSourceCluster({ logical: true })])
  await source.query(`
    create table public.events (id bigint primary key, kind text not null);
    create table public.events_archive () inherits (public.events);
    alter table public.events_archive add primary key (id);
    insert into public.events select g, 'live' from generate_series(1, 10) g;
    insert into public.events_archive select g, 'archived' from generate_series(101, 105) g;
    create table public.readings (id bigint, taken date, primary key (id, taken)) partition by range (taken);
    create table public.readings_2026 partition of public.readings for values from ('2026-01-01') to ('2027-01-01');
    create table public.readings_2027 partition of public.readings for values from ('2027-01-01') to ('2028-01-01');
    insert into public.readings select g, date '2026-10-01' + g * 30 from generate_series(1, 7) g;`)
  const org = await teamOrg(scion, "Source Shapes Org")
  tokens = org.tokens
  orgId = org.orgId
  connectorId = (await readyConnector(scion, { orgId: org.orgId, memberToken: tokens.member, adminToken: tokens.admin, source })).connectorId
}, 300_000)

afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

describe("a source with table inheritance", () => {
  it("sets up ready: readiness counts each table's own rows, as the mirror holds them", async () => {
    const connector = (await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body
    expect(connector.branching_engine_status).toBe("ready")
    const checks = (await scion.request("GET", `/v1/connectors/${connectorId}/readiness-checks?check_name=row_count_matches`, { token: tokens.member })).body.checks
    expect(checks.map((c: Record<string, string>) => [c.table_path, c.status, c.message]).sort()).toEqual([
      ["postgres.public.events", "pass", "10 rows on both sides"],
      ["postgres.public.events_archive", "pass", "5 rows on both sides"],
      ["postgres.public.readings", "pass", "7 rows on both sides"]
    ])
    const counts = "select (select count(*) from public.events)::int as events, (select count(*) from public.events_archive)::int as archive, (select count(*) from public.readings)::int as readings"
    expect((await queryEngine(scion, connectorId, counts)).rows).toEqual([{ events: 10, archive: 5, readings: 7 }])
  })

  it("a row written into the child reaches the mirror's child, not its parent", async () => {
    await source.query("insert into public.events_archive values (106, 'archived')")
    await waitFor("the child's row on the mirror", async () =>
      (await queryEngine(scion, connectorId, "select count(*)::int as n from public.events_archive where id = 106")).rows[0].n === 1
    )
    expect((await queryEngine(scion, connectorId, "select count(*)::int as n from public.events where id = 106")).rows[0].n).toBe(0)
  })

  it("the parent selected without its child: the child's rows are not published, and the mirror streams on", async () => {
    const selected = await scion.request("POST", `/v1/connectors/${connectorId}/selection`, {
      token: tokens.admin,
      body: { selected_paths: ["postgres.public.events", "postgres.public.readings"] }
    })
    expect(selected.status, scion.explain(selected)).toBe(200)
    const started = await scion.request("POST", `/v1/connectors/${connectorId}/index`, { token: tokens.member })
    expect(started.status, scion.explain(started)).toBe(202)
    expect(await settleOperation(scion, started.body.operation_id, tokens.member, 120_000)).toMatchObject({ status: "completed", type: "connector_rollout" })
    // The publication names the parent alone (a table added without ONLY brings its children).
    const published = await source.query("select tablename from pg_publication_tables where schemaname = 'public' order by 1")
    expect(published.rows.map((r) => r.tablename)).toEqual(["events", "readings"])
    // A child's row, then a parent's: the mirror has no table for the first, and takes the second.
    await source.query("insert into public.events_archive values (107, 'archived')")
    await source.query("insert into public.events values (11, 'live')")
    await waitFor("the parent's row on the mirror", async () =>
      (await queryEngine(scion, connectorId, "select count(*)::int as n from public.events where id = 11")).rows[0].n === 1
    )
    expect((await queryEngine(scion, connectorId, "select to_regclass('public.events_archive') is null as gone")).rows).toEqual([{ gone: true }])
    expect((await scion.request("GET", `/v1/connectors/${connectorId}/quarantine`, { token: tokens.member })).body).toEqual({ entries: [] })
    expect((await scion.request("GET", `/v1/connectors/${connectorId}`, { token: tokens.member })).body.branching_engine_status).toBe("ready")
  }, 180_000)
})

describe("a table that lost its key after discovery", () => {
  it("fails validation: the operation fails naming the check, the engine says failed_validation, only_failed lists the failing evidence", async () => {
    await source.query("create database shifting")
    await source.query("create table public.ledger (id bigint primary key, note text); insert into public.ledger select g, 'n' from generate_series(1, 20) g;", "shifting")
    const created = await scion.request("POST", "/v1/connectors", {
      token: tokens.member,
      body: { org_id: orgId, service_name: "postgresql", name: "shifting", connection_details: source.details({ database: "shifting" }) }
    })
    expect(created.status, scion.explain(created)).toBe(200)
    const id = created.body.connector_id as string
    const discovered = await scion.request("POST", `/v1/connectors/${id}/discover`, { token: tokens.member })
    expect((await settleOperation(scion, discovered.body.operation_id, tokens.member)).status).toBe("completed")
    expect((await scion.request("POST", `/v1/connectors/${id}/selection`, { token: tokens.admin, body: { selected_paths: ["*"] } })).status).toBe(200)
    // Discovered with its primary key, so no decision was asked for; dropped before the setup.
    await source.query("alter table public.ledger drop constraint ledger_pkey", "shifting")
    const started = await scion.request("POST", `/v1/connectors/${id}/engine-setup`, { token: tokens.member })
    expect(started.status, scion.explain(started)).toBe(202)
    const operation = await settleOperation(scion, started.body.operation_id, tokens.member, 120_000)
    expect(operation).toMatchObject({ status: "failed", stage: "readiness" })
    expect(operation.error).toMatch(/^Engine validation failed: 1 of \d+ readiness checks failed \(attempt att_\w+: replica_identity on shifting\.public\.ledger\)/)
    expect((await scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })).body.branching_engine_status).toBe("failed_validation")
    const failing = (await scion.request("GET", `/v1/connectors/${id}/readiness-checks?only_failed=true`, { token: tokens.viewer })).body.checks
    expect(failing).toEqual([expect.objectContaining({ check_name: "replica_identity", table_path: "shifting.public.ledger", status: "fail" })])
    const [attempt] = (await scion.request("GET", `/v1/connectors/${id}/readiness-attempts`, { token: tokens.viewer })).body.attempts
    expect(attempt).toMatchObject({ failed_checks: 1, passed_checks: attempt.total_checks - 1 })
  }, 180_000)
})

describe("a source whose tables use extensions", () => {
  it("sets up: the mirror makes the source's extensions, in their schemas; a branch's insert takes the defaults they provide", async () => {
    await source.query("create database extended")
    await source.query(
      `create extension "uuid-ossp"; create extension citext; create extension pg_trgm;
       create schema extensions; create extension pgcrypto with schema extensions;
       create table public.members (
         id uuid primary key default uuid_generate_v4(),
         email citext not null unique,
         token text not null default encode(extensions.gen_random_bytes(8), 'hex'));
       create index members_email_trgm on public.members using gin ((email::text) gin_trgm_ops);
       insert into public.members (email) values ('Ada@Example.com'), ('grace@example.com');`,
      "extended"
    )
    const { connectorId: id } = await readyConnector(scion, { orgId, memberToken: tokens.member, adminToken: tokens.admin, source, database: "extended", name: "extended" })
    const made = await queryEngine(scion, id, "select e.extname as name, n.nspname as schema from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname <> 'plpgsql' order by 1")
    expect(made.rows).toEqual([
      { name: "citext", schema: "public" },
      { name: "pg_trgm", schema: "public" },
      { name: "pgcrypto", schema: "extensions" },
      { name: "uuid-ossp", schema: "public" }
    ])
    // citext compares as the source does.
    expect((await queryEngine(scion, id, "select count(*)::int as n from public.members where email = 'ADA@example.com'")).rows).toEqual([{ n: 1 }])
    // A branch writes with the defaults the extensions give.
    const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: id, name: "extended-branch", service_type: "postgres" } })
    expect(created.status, scion.explain(created)).toBe(202)
    const operation = await settleOperation(scion, created.body.operation_id, tokens.member, 120_000)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(psql(operation.result.branch_url, "insert into public.members (email) values ('new@example.com') returning id is not null and length(token) = 16")).toBe("t\nINSERT 0 1")
  }, 180_000)
})

describe("a source whose tables call functions of its own", () => {
  it("sets up: defaults, checks, generated columns and indexes that call the source's functions work on the mirror and in branches", async () => {
    await source.query("create database functional")
    await source.query(
      `create schema util;
       create function util.slugify(value text) returns text language sql immutable as $$ select lower(regexp_replace(value, '[^a-zA-Z0-9]+', '-', 'g')) $$;
       create function public.next_code() returns text language plpgsql as $$ begin return 'C-' || floor(random() * 1000000)::int; end $$;
       create function public.is_code(value text) returns boolean language sql immutable as $$ select value like 'C-%' $$;
       create table public.articles (
         id bigint generated always as identity primary key,
         title text not null,
         slug text generated always as (util.slugify(title)) stored,
         code text not null default public.next_code() check (public.is_code(code)));
       create index articles_title_slug on public.articles (util.slugify(title));
       insert into public.articles (title) values ('Hello World'), ('Second Post');`,
      "functional"
    )
    const { connectorId: id } = await readyConnector(scion, { orgId, memberToken: tokens.member, adminToken: tokens.admin, source, database: "functional", name: "functional" })
    await source.query("insert into public.articles (title) values ('Third One')", "functional")
    const rows = "select title, slug, code from public.articles order by id"
    await waitFor("the third row on the mirror", async () => (await queryEngine(scion, id, rows)).rows.length === 3)
    expect((await queryEngine(scion, id, rows)).rows).toEqual((await source.query(rows, "functional")).rows)
    const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: id, name: "functional-branch", service_type: "postgres" } })
    expect(created.status, scion.explain(created)).toBe(202)
    const operation = await settleOperation(scion, created.body.operation_id, tokens.member, 120_000)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    // A branch computes, defaults and checks with the same functions, and its role owns them.
    expect(psql(operation.result.branch_url, "insert into public.articles (title) values ('Branch Work!') returning slug, code like 'C-%'").split("\n")[0]).toBe("branch-work-|t")
    expect(() => psql(operation.result.branch_url, "insert into public.articles (title, code) values ('x', 'nope')")).toThrow(/articles_code_check/)
    expect(psql(operation.result.branch_url, "create or replace function public.is_code(value text) returns boolean language sql immutable as $$ select true $$; select 'replaced'")).toContain("replaced")
  }, 180_000)
})

describe("a source with computed and typed columns", () => {
  it("mirrors identity, stored and virtual generated columns, an enum array, a domain, a composite, a range and jsonb; rows stream, a branch computes as the source does", async () => {
    await source.query("create database typed")
    await source.query(
      `create type mood as enum ('low', 'mid', 'high');
       create domain positive_cents as bigint check (value > 0);
       create schema kinds;
       create domain kinds.unit_code as text check (value ~ '^[A-Z]+$');
       create type dimensions as (width int, height int, unit kinds.unit_code);
       create type price_band as range (subtype = numeric);
       create table public.orders (
         id bigint generated always as identity primary key,
         price positive_cents not null,
         quantity int not null,
         total bigint generated always as (price * quantity) stored,
         doubled bigint generated always as (quantity * 2) virtual,
         moods mood[] not null default '{}',
         attrs jsonb,
         size dimensions,
         band price_band);
       insert into public.orders (price, quantity, moods, attrs, size, band) values (250, 3, '{low,high}', '{"gift": true}', row(20, 30, 'CM'), '[100,200)');`,
      "typed"
    )
    const { connectorId: id } = await readyConnector(scion, { orgId, memberToken: tokens.member, adminToken: tokens.admin, source, database: "typed", name: "typed" })
    await source.query("insert into public.orders (price, quantity, moods) values (100, 5, '{mid}')", "typed")
    const rows = "select id::int, total::int, doubled::int, moods::text, attrs->>'gift' as gift, size::text, band::text from public.orders order by id"
    await waitFor("the second row on the mirror", async () => (await queryEngine(scion, id, rows)).rows.length === 2)
    expect((await queryEngine(scion, id, rows)).rows).toEqual((await source.query(rows, "typed")).rows)
    const created = await scion.request("POST", "/v1/branch/create", { token: tokens.member, body: { connector_id: id, name: "typed-branch", service_type: "postgres" } })
    expect(created.status, scion.explain(created)).toBe(202)
    const operation = await settleOperation(scion, created.body.operation_id, tokens.member, 120_000)
    expect(operation.status, JSON.stringify(operation)).toBe("completed")
    expect(psql(operation.result.branch_url, "insert into public.orders (price, quantity) values (7, 6) returning id, total, doubled").split("\n")[0]).toBe("3|42|12")
    expect(() => psql(operation.result.branch_url, "insert into public.orders (price, quantity) values (-1, 1)")).toThrow(/positive_cents_check/)
    // The composite's domain (in a schema the selection does not hold) checks as on the source.
    expect(psql(operation.result.branch_url, "insert into public.orders (price, quantity, size, band) values (1, 1, row(1, 2, 'MM'), '[1,2]') returning (size).unit, band").split("\n")[0]).toBe("MM|[1,2]")
    expect(() => psql(operation.result.branch_url, "insert into public.orders (price, quantity, size) values (1, 1, row(1, 2, 'mm'))")).toThrow(/unit_code_check/)
    // The branch's role owns the types, so a migration can change them.
    expect(psql(operation.result.branch_url, "alter type public.dimensions add attribute depth int; alter type public.price_band rename to band_range; select 'migrated'")).toContain("migrated")
  }, 180_000)
})
