/**
 * Discovery and selection on a fresh metadata database (the real identity, operation and
 * billing units, a real secret store) against one real throwaway source cluster with two databases, a few
 * schemas, a table without a primary key, foreign keys, an enum and a replica identity index.
 * The job handler runs as the worker runs it, with a recording report.
 */
import type { JsonObject } from "@bufbuild/protobuf"
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import type { ProgressUpdate } from "@scion/kit"
import { Deferred, Effect, Fiber, Redacted } from "effect"
import { startSourceCluster, type SourceCluster } from "../../../test/support/sourceCluster.js"
import {
  Connectors,
  Discovery,
  discoveryJob,
  grantScript,
  type ReplicaIdentityPreflight,
  reportOf,
  type SchemaStructure,
  SourceIntrospector,
  SourceProbe,
  structureHash,
  tablesOf,
  validateDetails
} from "../src/index.js"
import { connectorTestLayer, moveOperation, newOrgId, operationOf, operationsOf, session } from "./support.js"

let source: SourceCluster

beforeAll(async () => {
  source = await startSourceCluster({ logical: true })
  await source.query(`
    create type public.mood as enum ('happy', 'sad');
    create table public.customers (id bigint generated always as identity primary key, email text not null unique, mood public.mood default 'happy');
    create table public.orders (id bigint primary key, customer_id bigint not null references public.customers (id), total numeric(10, 2));
    create table public.events (at timestamptz not null default now(), payload jsonb);
    create schema sales;
    create table sales.invoices (number text not null, amount numeric);
    create unique index invoices_number on sales.invoices (number);
    alter table sales.invoices alter column number set not null;
    alter table sales.invoices replica identity using index invoices_number;
    create table sales.notes (body text);
    alter table sales.notes replica identity full;
    create schema empty_one;
    insert into public.customers (email) select 'c' || g || '@example.com' from generate_series(1, 500) g;
    analyze public.customers;`)
  await source.query("create database analytics")
  await source.query(`create table public.daily (day date primary key, visits int not null)`, "analytics")
}, 120_000)
afterAll(async () => {
  await source?.stop()
})

const details = (value: unknown) => Redacted.make<unknown>(value)

/** Runs the job for an operation as the worker would, recording its reports. */
const runJob = (operationId: string, connectorId: string) =>
  Effect.gen(function* () {
    const reports: Array<ProgressUpdate> = []
    const result = yield* discoveryJob.run({
      operationId,
      orgId: "org_x",
      payload: { connector_id: connectorId },
      attempt: 1,
      maxAttempts: 3,
      started: Effect.void,
      report: (update) => Effect.sync(() => void reports.push(update))
    })
    // What the worker runtime does next: the operation completes.
    yield* moveOperation(operationId, "completed")
    return { result, reports }
  }).pipe(Effect.provideService(SourceIntrospector, SourceIntrospector.make({ connectTimeout: "2 seconds", queryTimeout: "10 seconds" })))

describe("discovery and selection", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("discover starts one operation with its job in the outbox, joins it while it runs, and checks prerequisites first", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const viewer = yield* session({ [orgId]: "viewer" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        const created = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(source.details()), useEnvironment: false })
        const id = created.connector.id

        expect(yield* Effect.flip(discovery.discover(viewer, id))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(discovery.discover(stranger, id))).toMatchObject({ _tag: "ConnectorNotFound" })

        const first = yield* discovery.discover(owner, id)
        expect(first).toMatchObject({ connectorId: id, status: "pending", joined: false, databases: ["postgres"] })
        expect(first.operationId).toMatch(/^op_/)
        expect(first.prerequisites.map((c) => [c.id, c.status])).toEqual([["service", "pass"], ["credentials", "pass"], ["reachable", "pass"]])
        expect(yield* operationOf(first.operationId)).toEqual({ orgId, connectorId: id, status: "pending" })
        const outbox = yield* sql<{ subject: string; payload: { operation_id: string; org_id: string; payload: unknown } }>`
          select subject, payload from outbox where msg_id = ${first.operationId}`
        expect(outbox).toEqual([{ subject: "jobs.connector.discovery", payload: { operation_id: first.operationId, org_id: orgId, payload: { connector_id: id }, traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/) } }])

        // Concurrent calls agree on the running operation.
        const joined = yield* Effect.all([discovery.discover(owner, id), discovery.discover(owner, id)], { concurrency: 2 })
        expect(joined.map((j) => [j.operationId, j.joined])).toEqual([[first.operationId, true], [first.operationId, true]])
        yield* moveOperation(first.operationId, "running")
        expect((yield* discovery.discover(owner, id)).operationId).toBe(first.operationId)
        // Once it ended, a discover starts a new one.
        yield* moveOperation(first.operationId, "completed")
        const second = yield* discovery.discover(owner, id)
        expect(second.joined).toBe(false)
        expect(second.operationId).not.toBe(first.operationId)
      })
    )

    it.effect("failing prerequisites start nothing: a code host, unusable credentials, a source that refuses them", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const outboxCount = Effect.map(sql<{ n: number }>`select count(*)::int as n from outbox`, (rows) => rows[0]!.n)
        const outboxBefore = yield* outboxCount

        const github = yield* connectors.create(owner, { orgId, serviceName: "github", connectionDetails: details({ organization: "scion-dev", access_token: "ghp_x" }), useEnvironment: false })
        const notPostgres = yield* Effect.flip(discovery.discover(owner, github.connector.id))
        expect(notPostgres).toMatchObject({ _tag: "DiscoveryPrerequisitesFailed" })
        if (notPostgres._tag !== "DiscoveryPrerequisitesFailed") throw new Error("unexpected")
        expect(notPostgres.checks.map((c) => [c.id, c.status])).toEqual([["service", "fail"]])

        // self_managed skips the create gate, so a wrong password is stored as given.
        const wrong = yield* connectors.create(owner, {
          orgId,
          serviceName: "postgresql",
          connectionDetails: details(source.details({ password: "not-the-password" })),
          byoc: "self_managed",
          useEnvironment: false
        })
        const refused = yield* Effect.flip(discovery.discover(owner, wrong.connector.id))
        if (refused._tag !== "DiscoveryPrerequisitesFailed") throw new Error(`unexpected ${refused._tag}`)
        expect(refused.checks.map((c) => [c.id, c.status])).toEqual([["service", "pass"], ["credentials", "pass"], ["reachable", "fail"]])
        expect(refused.message).not.toContain("not-the-password")
        expect(JSON.stringify(refused.checks)).not.toContain("not-the-password")

        // An envelope bound to another connector does not decrypt here.
        const good = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(source.details()), useEnvironment: false })
        yield* sql`update secrets set envelope = (select envelope from secrets where owner_id = ${wrong.connector.id}) where owner_id = ${good.connector.id}`
        const undecryptable = yield* Effect.flip(discovery.discover(owner, good.connector.id))
        if (undecryptable._tag !== "DiscoveryPrerequisitesFailed") throw new Error(`unexpected ${undecryptable._tag}`)
        expect(undecryptable.checks.map((c) => [c.id, c.status])).toEqual([["service", "pass"], ["credentials", "fail"]])

        // No operation was started for any of them.
        for (const connector of [github, wrong, good]) expect(yield* operationsOf(orgId, connector.connector.id)).toEqual([])
        expect(yield* outboxCount).toBe(outboxBefore)
      })
    )

    it.effect("the job writes the structure of every database, reports per schema, and versions only real changes", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const created = yield* connectors.create(owner, {
          orgId,
          serviceName: "postgresql",
          connectionDetails: details(source.details({ databases: ["postgres", "analytics"] })),
          useEnvironment: false
        })
        const id = created.connector.id
        const started = yield* discovery.discover(owner, id)
        expect(started.databases).toEqual(["postgres", "analytics"])

        const { result, reports } = yield* runJob(started.operationId, id)
        expect(result).toMatchObject({ connector_id: id, schema_version: 1, changed: true, databases: 2, schemas: 4, tables: 6 })
        // One report per schema (public, sales, empty_one in postgres; public in analytics), increasing.
        const perSchema = reports.filter((r) => r.stage === "introspect")
        expect(perSchema.map((r) => r.stageLabel?.split(" (")[0])).toEqual([
          "Discovered postgres.empty_one",
          "Discovered postgres.public",
          "Discovered postgres.sales",
          "Discovered analytics.public"
        ])
        const progress = perSchema.map((r) => r.progress ?? 0)
        expect([...progress].sort((a, b) => a - b)).toEqual(progress)

        const connector = (yield* connectors.get(owner, id)).connector
        expect(connector.schemaVersion).toBe(1)
        const structure = connector.schemaStructure as unknown as SchemaStructure
        expect(structure.totals).toEqual({ databases: 2, schemas: 4, tables: 6, columns: 13 })
        const byPath = new Map(tablesOf(structure).map((t) => [t.path, t]))
        expect([...byPath.keys()]).toEqual([
          "postgres.public.customers",
          "postgres.public.events",
          "postgres.public.orders",
          "postgres.sales.invoices",
          "postgres.sales.notes",
          "analytics.public.daily"
        ])
        const customers = byPath.get("postgres.public.customers")!
        expect(customers).toMatchObject({ kind: "table", primary_key: ["id"], replica_identity: "default", has_replica_identity: true, estimated_rows: 500 })
        expect(customers.size_bytes).toBeGreaterThan(8192)
        expect(customers.unique_keys).toEqual([{ name: "customers_email_key", columns: ["email"] }])
        expect(customers.columns).toEqual([
          { name: "id", type: "bigint", nullable: false, default: null, identity: "always", enum_values: null, masking_suggestion: null },
          { name: "email", type: "text", nullable: false, default: null, identity: null, enum_values: null, masking_suggestion: "email" },
          { name: "mood", type: "mood", nullable: true, default: "'happy'::mood", identity: null, enum_values: ["happy", "sad"], masking_suggestion: null }
        ])
        expect(byPath.get("postgres.public.orders")!.foreign_keys).toEqual([
          { name: "orders_customer_id_fkey", columns: ["customer_id"], references: { schema: "public", table: "customers", columns: ["id"] } }
        ])
        expect(byPath.get("postgres.public.events")).toMatchObject({ primary_key: null, replica_identity: "default", has_replica_identity: false })
        expect(byPath.get("postgres.sales.invoices")).toMatchObject({ replica_identity: "index", replica_identity_index: "invoices_number", has_replica_identity: true })
        expect(byPath.get("postgres.sales.notes")).toMatchObject({ replica_identity: "full", has_replica_identity: true })
        expect(structure.databases[0]!.schemas.find((s) => s.name === "empty_one")!.tables).toEqual([])
        expect(connector.replicaIdentityPreflight).toMatchObject({ tables_without_replica_identity: ["postgres.public.events"], pass: false })

        // A redelivery of the same operation answers the recorded result.
        expect((yield* runJob(started.operationId, id)).result).toEqual(result)
        // Another discovery with nothing changed (row counts do not count) keeps the version.
        yield* Effect.promise(() => source.query("insert into public.events (payload) select '{}'::jsonb from generate_series(1, 100); analyze public.events"))
        const unchanged = (yield* runJob((yield* discovery.discover(owner, id)).operationId, id)).result as JsonObject
        expect(unchanged).toMatchObject({ schema_version: 1, changed: false })
        const again = (yield* connectors.get(owner, id)).connector
        expect(tablesOf(again.schemaStructure as unknown as SchemaStructure).find((t) => t.path === "postgres.public.events")!.estimated_rows).toBe(100)
        expect(structureHash(again.schemaStructure as unknown as SchemaStructure)).toBe(structureHash(structure))

        // A new column is a new version.
        yield* Effect.promise(() => source.query("alter table public.daily add column bounces int", "analytics"))
        expect((yield* runJob((yield* discovery.discover(owner, id)).operationId, id)).result).toMatchObject({ schema_version: 2, changed: true })
        yield* Effect.promise(() => source.query("alter table public.daily drop column bounces", "analytics"))
      })
    )

    it.effect("a database the job cannot read fails the attempt with the reason, never a credential (the runtime retries it)", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const created = yield* connectors.create(owner, {
          orgId,
          serviceName: "postgresql",
          connectionDetails: details(source.details({ databases: ["postgres", "missing_db"] })),
          useEnvironment: false
        })
        // Prerequisites probe the primary database only: the start succeeds.
        const started = yield* discovery.discover(owner, created.connector.id)
        const failure = yield* Effect.flip(runJob(started.operationId, created.connector.id))
        expect(failure).toMatchObject({ _tag: "SourceUnavailable", database: "missing_db" })
        expect(failure.message).toMatch(/missing_db/)
        expect(failure.message).not.toContain(source.password)
        expect((yield* connectors.get(owner, created.connector.id)).connector.schemaVersion).toBe(0)
      })
    )

    it.effect("selection: admins only, after discovery, valid and known paths, counters and flags as the Connector table says", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const admin = yield* session({ [orgId]: "admin" })
        const member = yield* session({ [orgId]: "member" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        const created = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(source.details()), useEnvironment: false })
        const id = created.connector.id

        const early = yield* Effect.flip(discovery.select(admin, { connectorId: id, selectedPaths: ["*"] }))
        expect(early).toMatchObject({ _tag: "InvalidArgument", field: "selected_paths" })
        expect(early.message).toMatch(/Nothing was discovered/)

        const started = yield* discovery.discover(owner, id)
        yield* runJob(started.operationId, id)

        expect(yield* Effect.flip(discovery.select(member, { connectorId: id, selectedPaths: ["*"] }))).toMatchObject({ _tag: "PermissionDenied", permission: "connectors.admin" })
        expect(yield* Effect.flip(discovery.select(stranger, { connectorId: id, selectedPaths: ["*"] }))).toMatchObject({ _tag: "ConnectorNotFound" })

        const all = yield* discovery.select(admin, { connectorId: id, selectedPaths: ["*"] })
        expect(all.connector).toMatchObject({ selectedEntityPaths: ["*"], selectionSchemaVersion: 1, selectedSchemaVersion: 1, lastIndexedVersion: 0, schemaVersion: 1 })
        expect(all.connector.selectedSchemaStructure).toEqual(all.connector.schemaStructure)

        // FK targets are not added: orders alone is orders alone.
        const some = yield* discovery.select(owner, { connectorId: id, selectedPaths: [" postgres.public.orders ", "postgres.sales.*", "postgres.public.orders"] })
        expect(some.connector).toMatchObject({ selectedEntityPaths: ["postgres.public.orders", "postgres.sales.*"], selectionSchemaVersion: 1, selectedSchemaVersion: 2 })
        const selected = some.connector.selectedSchemaStructure as unknown as SchemaStructure
        expect(tablesOf(selected).map((t) => t.path)).toEqual(["postgres.public.orders", "postgres.sales.invoices", "postgres.sales.notes"])
        expect(selected.totals).toMatchObject({ databases: 1, schemas: 2, tables: 3 })

        const db = yield* discovery.select(owner, { connectorId: id, selectedPaths: ["postgres.*"] })
        expect(tablesOf(db.connector.selectedSchemaStructure as unknown as SchemaStructure)).toHaveLength(5)

        for (const [paths, pattern] of [
          [[], /must not be empty/],
          [["*", "postgres.*"], /must be the only path/],
          [["postgres"], /is invalid/],
          [["postgres.public.orders.id"], /is invalid/],
          [["postgres.*.orders"], /is invalid/],
          [["postgres..orders"], /is invalid/],
          [["nope.*"], /database "nope"/],
          [["postgres.nope.*"], /schema "postgres.nope"/],
          [["postgres.public.nope"], /table discovery did not find/]
        ] as const) {
          const error = yield* Effect.flip(discovery.select(owner, { connectorId: id, selectedPaths: paths }))
          expect(error, JSON.stringify(paths)).toMatchObject({ _tag: "InvalidArgument" })
          expect(error.message).toMatch(pattern)
        }
        // Refusals changed nothing.
        expect((yield* connectors.get(owner, id)).connector.selectedSchemaVersion).toBe(3)

        // A structural change after the selection: needs_reselection (schema_version > selection_schema_version).
        yield* Effect.promise(() => source.query("create table public.later (id int primary key)"))
        const rediscovered = yield* discovery.discover(owner, id)
        expect(rediscovered.joined).toBe(false)
        yield* runJob(rediscovered.operationId, id)
        const after = (yield* connectors.get(owner, id)).connector
        expect(after).toMatchObject({ schemaVersion: 2, selectionSchemaVersion: 1 })
        expect(after.schemaVersion > after.selectionSchemaVersion!).toBe(true)
        yield* Effect.promise(() => source.query("drop table public.later"))
      })
    )

    it.effect("replica-identity decisions: admins only, known keys and values, the whole set replaced, kept across discoveries, 409 on a concurrent write", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const member = yield* session({ [orgId]: "member" })
        const created = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(source.details()), useEnvironment: false })
        const id = created.connector.id
        expect(yield* Effect.flip(discovery.decide(owner, { connectorId: id, decisions: {} }))).toMatchObject({ _tag: "InvalidArgument", field: "decisions" })
        const started = yield* discovery.discover(owner, id)
        yield* runJob(started.operationId, id)
        const before = (yield* connectors.get(owner, id)).connector.replicaIdentityPreflight as unknown as ReplicaIdentityPreflight
        expect(before).toEqual({ tables_without_replica_identity: ["postgres.public.events"], decisions: {}, unresolved: ["postgres.public.events"], pass: false, decisions_version: 0 })

        expect(yield* Effect.flip(discovery.decide(member, { connectorId: id, decisions: {} }))).toMatchObject({ _tag: "PermissionDenied", permission: "connectors.admin" })
        const unknown = yield* Effect.flip(discovery.decide(owner, { connectorId: id, decisions: { "postgres.public.customers": "exclude" } }))
        expect(unknown).toMatchObject({ _tag: "InvalidArgument" })
        expect(unknown.message).toMatch(/not a discovered table without a replica identity/)
        const invalid = yield* Effect.flip(discovery.decide(owner, { connectorId: id, decisions: { "postgres.public.events": "drop_it" } }))
        expect(invalid.message).toMatch(/must be one of exclude, add_pk, replica_identity_full/)

        const full = yield* discovery.decide(owner, { connectorId: id, decisions: { "postgres.public.events": "replica_identity_full" } })
        expect(full.connector.replicaIdentityPreflight).toEqual({
          tables_without_replica_identity: ["postgres.public.events"],
          decisions: { "postgres.public.events": "replica_identity_full" },
          unresolved: [],
          pass: true,
          decisions_version: 1
        })
        // Omitted tables revert to exclude.
        const reverted = yield* discovery.decide(owner, { connectorId: id, decisions: {} })
        expect(reverted.connector.replicaIdentityPreflight).toMatchObject({ decisions: { "postgres.public.events": "exclude" }, unresolved: [], decisions_version: 2 })

        // A new table without a key is unresolved after the next discovery; made decisions stay.
        yield* Effect.promise(() => source.query("create table public.loose (v text)"))
        const again = yield* discovery.discover(owner, id)
        yield* runJob(again.operationId, id)
        expect((yield* connectors.get(owner, id)).connector.replicaIdentityPreflight).toEqual({
          tables_without_replica_identity: ["postgres.public.events", "postgres.public.loose"],
          decisions: { "postgres.public.events": "exclude" },
          unresolved: ["postgres.public.loose"],
          pass: false,
          decisions_version: 2
        })
        yield* Effect.promise(() => source.query("drop table public.loose"))

        // Another writer holds the row and moves the version on: this write, made against the
        // version it read, is a conflict and changes nothing.
        const release = yield* Deferred.make<void>()
        const locked = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`update connectors set replica_identity_decisions_version = replica_identity_decisions_version + 1 where id = ${id}`
              yield* Deferred.succeed(locked, undefined)
              yield* Deferred.await(release)
            })
          )
        )
        yield* Deferred.await(locked)
        const attempt = yield* Effect.fork(Effect.flip(discovery.decide(owner, { connectorId: id, decisions: { "postgres.public.events": "add_pk" } })))
        yield* Effect.sleep("500 millis")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        expect(yield* Fiber.join(attempt)).toMatchObject({ _tag: "DecisionsConflict" })
        expect((yield* connectors.get(owner, id)).connector.replicaIdentityPreflight).toMatchObject({ decisions: { "postgres.public.events": "exclude" } })
      })
    )

    it("grant scripts per provider: the provider's replication right, quoted names, only tables that can replicate published", () => {
      const table = (schema: string, name: string, ready: boolean) => ({
        name,
        path: `app.${schema}.${name}`,
        kind: "table" as const,
        columns: [],
        primary_key: ready ? ["id"] : null,
        unique_keys: [],
        foreign_keys: [],
        replica_identity: "default" as const,
        replica_identity_index: null,
        has_replica_identity: ready,
        estimated_rows: null,
        size_bytes: 0
      })
      const selected: SchemaStructure = {
        format: 1,
        databases: [{ name: "app", schemas: [{ name: "Odd\"Schema", tables: [table("Odd\"Schema", "a", true), table("Odd\"Schema", "b", false), table("Odd\"Schema", "c", false), table("Odd\"Schema", "d", false)] }] }],
        totals: { databases: 1, schemas: 1, tables: 4, columns: 0 }
      }
      const decisions = { 'app.Odd"Schema.b': "replica_identity_full", 'app.Odd"Schema.c': "exclude", 'app.Odd"Schema.d': "add_pk" } as const
      const vanilla = grantScript({ connectorId: "con_X1", provider: "vanilla", username: "repl", selected, decisions })
      expect(vanilla.sql).toContain('ALTER ROLE "repl" WITH REPLICATION;')
      expect(vanilla.sql).toContain('GRANT USAGE ON SCHEMA "Odd""Schema" TO "repl";')
      expect(vanilla.sql).toContain('ALTER TABLE "Odd""Schema"."b" REPLICA IDENTITY FULL;')
      expect(vanilla.sql).toContain('CREATE PUBLICATION "scion_con_x1" FOR TABLE ONLY "Odd""Schema"."a", ONLY "Odd""Schema"."b", ONLY scion.schema_log, ONLY scion.heartbeat WITH (publish_via_partition_root = true);')
      // The role owns it, so setup leaves it alone and a delete may drop it.
      expect(vanilla.sql).toContain('ALTER PUBLICATION "scion_con_x1" OWNER TO "repl";')
      expect(vanilla.schemasPerDatabase).toEqual({ app: ['Odd"Schema'] })
      const rds = grantScript({ connectorId: "con_X1", provider: "rds", username: "repl", selected, decisions })
      expect(rds.sql).toContain('GRANT rds_replication TO "repl";')
      expect(rds.sql).not.toContain("WITH REPLICATION")
      expect(rds.sourceProvider).toBe("rds")
    })

    it.effect("grant script: 422 cases, then the script run on the real source lets a bare role pass preflight", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const discovery = yield* Discovery
        const probe = yield* SourceProbe
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const viewer = yield* session({ [orgId]: "viewer" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        yield* Effect.promise(() => source.query("create role scion_repl login password 'repl-pw'"))
        const replDetails = source.details({ username: "scion_repl", password: "repl-pw" })
        // self_managed: a role without grants cannot pass the create gate, which is the point.
        const created = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(replDetails), byoc: "self_managed", useEnvironment: false })
        const id = created.connector.id
        const github = yield* connectors.create(owner, { orgId, serviceName: "github", connectionDetails: details({ organization: "scion-dev", access_token: "ghp_x" }), useEnvironment: false })
        expect(yield* Effect.flip(discovery.grantScript(owner, github.connector.id))).toMatchObject({ _tag: "GrantScriptUnavailable" })
        expect((yield* Effect.flip(discovery.grantScript(owner, id))).message).toMatch(/discovery has not run/)
        expect(yield* Effect.flip(discovery.grantScript(stranger, id))).toMatchObject({ _tag: "ConnectorNotFound" })

        const valid = yield* validateDetails("postgresql", replDetails)
        if (valid.serviceName !== "postgresql") throw new Error("unexpected")
        const before = yield* probe.probe(valid.details, "repl-pw")
        if (before._tag !== "Connected") throw new Error(`unexpected ${before._tag}`)

        const started = yield* discovery.discover(owner, id)
        yield* runJob(started.operationId, id)
        expect((yield* Effect.flip(discovery.grantScript(owner, id))).message).toMatch(/no schemas are selected/)
        yield* discovery.select(owner, { connectorId: id, selectedPaths: ["*"] })
        yield* discovery.decide(owner, { connectorId: id, decisions: { "postgres.public.events": "replica_identity_full" } })

        const script = yield* discovery.grantScript(viewer, id)
        expect(script).toMatchObject({ sourceProvider: "vanilla", replicationUsername: "scion_repl", schemasPerDatabase: { postgres: ["empty_one", "public", "sales"] } })
        expect(script.sql).not.toContain("repl-pw")
        // What psql does with it: each \connect section runs in its database.
        const sections = script.sql.split(/^\\connect "([^"]+)"$/m)
        yield* Effect.promise(async () => {
          await source.query(sections[0]!)
          for (let i = 1; i < sections.length; i += 2) await source.query(sections[i + 1]!, sections[i]!)
        })

        const after = yield* probe.probe(valid.details, "repl-pw")
        if (after._tag !== "Connected") throw new Error(`unexpected ${after._tag}`)
        const report = reportOf(after, valid.details)
        expect(report.preflight_pass, JSON.stringify(report.checks)).toBe(true)
        expect(Object.fromEntries(report.checks.map((c) => [c.id, c.status]))).toMatchObject({
          replication_privilege: "pass",
          schema_select: "pass",
          publication_rights: "pass",
          replica_identity: "pass",
          ddl_capture: "pass"
        })
        const published = yield* Effect.promise(() => source.query(`select tablename from pg_publication_tables where pubname = 'scion_${id.toLowerCase()}' order by 1`))
        expect(published.rows.map((r) => r.tablename)).toEqual(["customers", "events", "heartbeat", "invoices", "notes", "orders", "schema_log"])
        const triggers = yield* Effect.promise(() => source.query("select evtname from pg_event_trigger order by 1"))
        expect(triggers.rows.map((r) => r.evtname)).toEqual(["scion_capture_ddl", "scion_capture_drop", "scion_capture_rewrite"])
      })
    )
  })
})
