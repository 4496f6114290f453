/**
 * Connectors on a fresh metadata database (the real identity and billing units, a real secret store) against
 * real throwaway source clusters: one with wal_level=logical, one with replica. Preflight checks,
 * the create gate (nothing stored when it fails), self_managed and code-host skips, reads,
 * updates that re-test, decrypted details, and only ciphertext at rest.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { startSourceCluster, type SourceCluster } from "../../../test/support/sourceCluster.js"
import { Connectors, detectProvider, validateDetails } from "../src/index.js"
import { apiKey, connectorTestLayer, newOrgId, session } from "./support.js"

let logical: SourceCluster
let replica: SourceCluster

beforeAll(async () => {
  ;[logical, replica] = await Promise.all([startSourceCluster({ logical: true }), startSourceCluster({ logical: false })])
  await logical.query(`
    create table public.with_pk (id int primary key, v text);
    create table public.no_pk (v text);
    create schema sales;
    create table sales.orders (id bigint generated always as identity primary key, total numeric);
    create role reader login password 'reader-pw';
    grant usage on schema public to reader;
    grant select on public.with_pk to reader;`)
}, 120_000)
afterAll(async () => {
  await Promise.all([logical?.stop(), replica?.stop()])
})

const details = (value: unknown) => Redacted.make<unknown>(value)
const statusOf = (report: { checks: ReadonlyArray<{ id: string; status: string }> }) => Object.fromEntries(report.checks.map((c) => [c.id, c.status]))

describe("connection details", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("postgresql: defaults, unknown keys and bad values are refused without echoing values", () =>
      Effect.gen(function* () {
        const valid = yield* validateDetails("postgresql", { host: "db.example.com", database: "app", username: "u", password: "p" })
        expect(valid).toEqual({
          serviceName: "postgresql",
          category: "database",
          details: { host: "db.example.com", port: 5432, database: "app", username: "u", password: "p", sslmode: "prefer", databases: ["app"] }
        })
        const unknown = yield* Effect.flip(validateDetails("postgresql", { host: "h", database: "d", username: "u", password: "p", extra: 1 }))
        expect(unknown).toMatchObject({ _tag: "InvalidConnectionDetails" })
        expect(unknown.message).toContain("extra is not a field")
        const bad = yield* Effect.flip(validateDetails("postgresql", { host: "h", database: "d", username: "u", password: 12345678, port: 70000, sslmode: "maybe" }))
        expect(bad.message).toMatch(/password must be/)
        expect(bad.message).toMatch(/port must be an integer 1..65535/)
        expect(bad.message).toMatch(/sslmode must be one of/)
        expect(bad.message).not.toContain("12345678")
        expect(yield* Effect.flip(validateDetails("postgresql", { host: "h" }))).toMatchObject({ _tag: "InvalidConnectionDetails" })
        expect(yield* Effect.flip(validateDetails("postgresql", "not an object"))).toMatchObject({ _tag: "InvalidConnectionDetails" })
        expect(yield* Effect.flip(validateDetails("mysql", {}))).toMatchObject({ _tag: "UnsupportedService", serviceName: "mysql" })
        expect(yield* validateDetails("github", { organization: "scion-dev", access_token: "ghp_x" })).toMatchObject({ category: "code_host" })
        expect(yield* Effect.flip(validateDetails("github", { organization: "-bad-", access_token: "t" }))).toMatchObject({ _tag: "InvalidConnectionDetails" })
      })
    )

    it("provider detection from what the server reveals", () => {
      const none = { rds: false, aurora: false, cloudsql: false, alloydb: false, azure: false, neon: false, supabase: false, version: "PostgreSQL 16.2 on x86_64-pc-linux-gnu" }
      expect(detectProvider(none)).toBe("vanilla")
      expect(detectProvider({ ...none, rds: true })).toBe("rds")
      expect(detectProvider({ ...none, rds: true, aurora: true })).toBe("aurora")
      expect(detectProvider({ ...none, cloudsql: true })).toBe("cloudsql")
      expect(detectProvider({ ...none, cloudsql: true, alloydb: true })).toBe("alloydb")
      expect(detectProvider({ ...none, azure: true })).toBe("azure")
      expect(detectProvider({ ...none, neon: true })).toBe("neon")
      expect(detectProvider({ ...none, supabase: true })).toBe("supabase")
    })
  })
})

describe("preflight and connectors", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("a logical source passes every check as superuser; a table without a key is a warning", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const orgId = (yield* newOrgId())
        const report = yield* connectors.preflight(yield* session({ [orgId]: "member" }), { orgId, serviceName: "postgresql", connectionDetails: details(logical.details()) })
        expect(report.preflight_pass).toBe(true)
        expect(report.provider).toBe("vanilla")
        expect(statusOf(report)).toEqual({
          reachable: "pass",
          authentication: "pass",
          server_version: "pass",
          wal_level: "pass",
          replication_slots: "pass",
          wal_senders: "pass",
          replication_privilege: "pass",
          schema_select: "pass",
          publication_rights: "pass",
          replica_identity: "warn",
          ddl_capture: "pass"
        })
        const identity = report.checks.find((c) => c.id === "replica_identity")!
        expect(identity.message).toContain("postgres.public.no_pk")
        expect(identity.remedy).not.toBeNull()
      })
    )

    it.effect("wal_level=replica fails the wal_level check with a remedy", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const orgId = (yield* newOrgId())
        const report = yield* connectors.preflight(yield* session({ [orgId]: "member" }), { orgId, serviceName: "postgresql", connectionDetails: details(replica.details()) })
        expect(report.preflight_pass).toBe(false)
        const wal = report.checks.find((c) => c.id === "wal_level")!
        expect(wal).toMatchObject({ status: "fail", message: "wal_level is replica; logical replication needs logical" })
        expect(wal.remedy).toContain("wal_level = logical")
      })
    )

    it.effect("wrong password fails authentication; a closed port fails reachable; the password is never in the report", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const wrong = yield* connectors.preflight(member, { orgId, serviceName: "postgresql", connectionDetails: details(logical.details({ password: "not-the-password" })) })
        expect(wrong.preflight_pass).toBe(false)
        expect(statusOf(wrong)).toEqual({ reachable: "pass", authentication: "fail" })
        expect(JSON.stringify(wrong)).not.toContain("not-the-password")
        const closed = yield* connectors.preflight(member, { orgId, serviceName: "postgresql", connectionDetails: details(logical.details({ port: 1 })) })
        expect(statusOf(closed)).toEqual({ reachable: "fail" })
        expect(closed.checks[0]!.remedy).toContain("firewalls")
      })
    )

    it.effect("a role without replication or full SELECT fails those checks", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const orgId = (yield* newOrgId())
        const report = yield* connectors.preflight(yield* session({ [orgId]: "member" }), {
          orgId,
          serviceName: "postgresql",
          connectionDetails: details(logical.details({ username: "reader", password: "reader-pw" }))
        })
        expect(report.preflight_pass).toBe(false)
        expect(statusOf(report)).toMatchObject({ replication_privilege: "fail", schema_select: "fail", wal_level: "pass", ddl_capture: "warn" })
        expect(report.checks.find((c) => c.id === "ddl_capture")!.remedy).toContain("grant-script")
        expect(report.checks.find((c) => c.id === "replication_privilege")!.remedy).toContain("REPLICATION")
        expect(report.checks.find((c) => c.id === "schema_select")!.message).toMatch(/public/)
      })
    )

    it.effect("create: the gate refuses a failing source and stores nothing; a passing one stores only ciphertext", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const refused = yield* Effect.flip(connectors.create(member, { orgId, serviceName: "postgresql", connectionDetails: details(replica.details()), useEnvironment: false }))
        expect(refused).toMatchObject({ _tag: "PreflightFailed" })
        if (refused._tag !== "PreflightFailed") throw new Error("unexpected")
        expect(refused.report.checks.find((c) => c.id === "wal_level")!.status).toBe("fail")
        expect(yield* connectors.list(member, { orgId })).toEqual([])
        expect((yield* sql`select count(*)::int as n from secrets where owner_id like 'con_%'`)[0]!.n).toBe(0)

        const created = yield* connectors.create(member, { orgId, serviceName: "postgresql", connectionDetails: details(logical.details()), useEnvironment: false })
        expect(created.connector).toMatchObject({ orgId, name: "postgres@127.0.0.1", serviceName: "postgresql", connectorCategory: "database", byoc: null, sourceProvider: "vanilla", schemaStructure: null, indexingStatus: "not_indexed" })
        expect(created.access).toEqual({ canUpdate: true, canDelete: false })
        const rows = yield* sql<{ envelope: unknown; fingerprint: string; last4: string }>`select envelope, fingerprint, last4 from secrets where owner_id = ${created.connector.id}`
        expect(rows).toHaveLength(1)
        const stored = JSON.stringify(rows[0])
        expect(stored).not.toContain(logical.password)
        expect(stored).not.toContain("127.0.0.1")
        expect(rows[0]).toMatchObject({ fingerprint: "", last4: "" })
        expect(JSON.stringify(yield* sql`select * from connectors`)).not.toContain(logical.password)
        expect(yield* connectors.connectionDetails(member, created.connector.id)).toEqual({ ...logical.details(), databases: ["postgres"] })
      })
    )

    it.effect("self_managed skips the gate; a code host skips it too; the plan limit refuses the next create", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        // On billing's free plan: three connectors.
        const orgId = yield* newOrgId("free")
        const owner = yield* session({ [orgId]: "owner" })
        const self = yield* connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(replica.details()), byoc: "self_managed", useEnvironment: false })
        expect(self.connector).toMatchObject({ byoc: "self_managed", sourceProvider: null })
        expect(self.access).toEqual({ canUpdate: true, canDelete: true })
        const github = yield* connectors.create(owner, { orgId, serviceName: "github", connectionDetails: details({ organization: "scion-dev", access_token: "ghp_secret" }), useEnvironment: false })
        expect(github.connector).toMatchObject({ name: "scion-dev", serviceName: "github", connectorCategory: "code_host" })
        expect((yield* connectors.list(owner, { orgId, connectorCategory: "code_host" })).map((v) => v.connector.id)).toEqual([github.connector.id])
        expect((yield* connectors.list(owner, { orgId, serviceName: "postgresql" })).map((v) => v.connector.id)).toEqual([self.connector.id])
        expect(yield* Effect.flip(connectors.create(owner, { orgId, serviceName: "postgresql", connectionDetails: details(replica.details()), byoc: "cloud", useEnvironment: false }))).toMatchObject({ _tag: "InvalidArgument", field: "byoc" })
        yield* connectors.create(owner, { orgId, serviceName: "github", connectionDetails: details({ organization: "third", access_token: "t" }), useEnvironment: false })
        expect(yield* Effect.flip(connectors.create(owner, { orgId, serviceName: "github", connectionDetails: details({ organization: "x", access_token: "t" }), useEnvironment: false }))).toMatchObject({
          _tag: "PlanLimitReached",
          resource: "connectors",
          limit: 3,
          planId: "free"
        })
      })
    )

    it.effect("permissions and visibility: viewers read, members create and update, other orgs see nothing", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const viewer = yield* session({ [orgId]: "viewer" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        const github = { organization: "scion-dev", access_token: "ghp_secret" }
        expect(yield* Effect.flip(connectors.preflight(viewer, { orgId, serviceName: "github", connectionDetails: details(github) }))).toMatchObject({ _tag: "PermissionDenied", permission: "connectors.create" })
        const created = yield* connectors.create(member, { orgId, serviceName: "github", connectionDetails: details(github), useEnvironment: false })
        const id = created.connector.id
        expect((yield* connectors.get(viewer, id)).access).toEqual({ canUpdate: false, canDelete: false })
        expect(yield* Effect.flip(connectors.connectionDetails(viewer, id))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(connectors.update(viewer, { connectorId: id, name: "x" }))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(connectors.get(stranger, id))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect(yield* Effect.flip(connectors.connectionDetails(stranger, id))).toMatchObject({ _tag: "ConnectorNotFound" })
        expect(yield* Effect.flip(connectors.list(stranger, { orgId }))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(connectors.get(yield* apiKey((yield* newOrgId()), ["connectors.read"]), id))).toMatchObject({ _tag: "ConnectorNotFound" })
        // An API key acts in its own org without naming it.
        expect((yield* connectors.list(yield* apiKey(orgId, ["connectors.read"]), { orgId: "" })).map((v) => v.connector.id)).toEqual([id])
      })
    )

    it.effect("update: new details are re-tested (a failing gate changes nothing) and reset indexing; same details change nothing", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const created = yield* connectors.create(member, { orgId, serviceName: "postgresql", connectionDetails: details(logical.details()), useEnvironment: false })
        const id = created.connector.id
        yield* sql`update connectors set indexing_status = 'indexed' where id = ${id}`
        const same = yield* connectors.update(member, { connectorId: id, connectionDetails: details(logical.details()) })
        expect(same.connector.indexingStatus).toBe("indexed")
        const refused = yield* Effect.flip(connectors.update(member, { connectorId: id, connectionDetails: details(replica.details()) }))
        expect(refused).toMatchObject({ _tag: "PreflightFailed" })
        expect(yield* connectors.connectionDetails(member, id)).toMatchObject({ port: logical.port })
        const moved = yield* connectors.update(member, { connectorId: id, name: "renamed", connectionDetails: details(logical.details({ sslmode: "prefer" })) })
        expect(moved.connector).toMatchObject({ name: "renamed", indexingStatus: "not_indexed", sourceProvider: "vanilla" })
        expect(yield* connectors.connectionDetails(member, id)).toMatchObject({ sslmode: "prefer" })
        expect(yield* Effect.flip(connectors.update(member, { connectorId: id }))).toMatchObject({ _tag: "InvalidArgument" })
        expect(yield* Effect.flip(connectors.update(member, { connectorId: id, connectionDetails: details({ host: "h" }) }))).toMatchObject({ _tag: "InvalidConnectionDetails" })
      })
    )
    it.effect("a tampered or moved envelope is a secret-store failure, never plaintext", () =>
      Effect.gen(function* () {
        const connectors = yield* Connectors
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const github = (organization: string) => details({ organization, access_token: "ghp_tamper" })
        const a = yield* connectors.create(member, { orgId, serviceName: "github", connectionDetails: github("a-org"), useEnvironment: false })
        const b = yield* connectors.create(member, { orgId, serviceName: "github", connectionDetails: github("b-org"), useEnvironment: false })
        // B's envelope copied onto A: bound to B's id, it does not decrypt as A's.
        yield* sql`update secrets set envelope = (select envelope from secrets where owner_id = ${b.connector.id}) where owner_id = ${a.connector.id}`
        expect(yield* Effect.flip(connectors.connectionDetails(member, a.connector.id))).toMatchObject({ _tag: "SecretStoreFailure" })
        expect(yield* connectors.connectionDetails(member, b.connector.id)).toEqual({ organization: "b-org", access_token: "ghp_tamper" })
      })
    )
  })
})
