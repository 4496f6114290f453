/**
 * Discovery and selection through the gateway, with identity, the operation unit, billing, the
 * connector unit (its outbox relay and discovery worker on the machine's NATS, in a namespace of
 * its own) and the gateway as separate processes, against one throwaway source cluster:
 * discover → 202 → the operation completes → schema_structure and schema_version on the
 * connector; versions move only on real changes; concurrent discovers share one operation;
 * failing prerequisites start nothing; 403/404; selection rules and counters.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import pg from "pg"
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
  await source.query(`
    create type public.status as enum ('new', 'paid');
    create table public.accounts (id int primary key, email text not null unique);
    create table public.invoices (id int primary key, account_id int not null references public.accounts (id), status public.status not null default 'new');
    create table public.events (payload jsonb);
    create schema audit;
    create table audit.log (id bigint generated always as identity primary key, line text);`)
  const org = await teamOrg(scion, "Discovery Org")
  orgId = org.orgId
  Object.assign(tokens, org.tokens)
  strangerToken = org.strangerToken
}, 180_000)
afterAll(async () => {
  await Promise.all([scion?.stop(), source?.stop()])
})

const createConnector = (extra: Record<string, unknown> = {}, details: Record<string, unknown> = {}) =>
  createPostgresConnector(scion, { token: tokens.member, orgId, details: source.details(details), extra: extra })
const discover = (id: string, token = tokens.member) => scion.request("POST", `/v1/connectors/${id}/discover`, { token })
const select = (id: string, selected_paths: unknown, token = tokens.admin) => scion.request("POST", `/v1/connectors/${id}/selection`, { token, body: { selected_paths } })
const getConnector = (id: string) => scion.request("GET", `/v1/connectors/${id}`, { token: tokens.member })

const settle = (operationId: string) => settleOperation(scion, operationId, tokens.member)

const operationRows = (connectorId: string) => queryMetadata(scion, "select id, status from operation.operations where resource_id = $1", [connectorId])

describe("POST /v1/connectors/{id}/discover", () => {
  it("202 with the handle and the prerequisites; the job completes and the connector carries the structure at version 1", async () => {
    const id = await createConnector()
    const started = await discover(id)
    expect(started.status, scion.explain(started)).toBe(202)
    expect(started.body).toMatchObject({ resource_id: id, type: "connector_discovery", joined: false, databases: ["postgres"] })
    expect(["pending", "running"]).toContain(started.body.status)
    expect(started.body.prerequisites.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([
      ["service", "pass"],
      ["credentials", "pass"],
      ["reachable", "pass"]
    ])
    expect(JSON.stringify(started.body)).not.toContain(source.password)

    const operation = await settle(started.body.operation_id)
    expect(operation, JSON.stringify(operation)).toMatchObject({
      status: "completed",
      type: "connector_discovery",
      resource_id: id,
      progress: 100,
      result: { connector_id: id, schema_version: 1, changed: true, databases: 1, schemas: 2, tables: 4, tables_without_replica_identity: 1 }
    })
    expect(operation.started_at).not.toBeNull()

    const connector = await getConnector(id)
    expect(connector.body).toMatchObject({ schema_version: 1, needs_reselection: false })
    const schemas = connector.body.schema_structure.databases[0].schemas
    expect(schemas.map((s: { name: string }) => s.name)).toEqual(["audit", "public"])
    const invoices = schemas[1].tables.find((t: { name: string }) => t.name === "invoices")
    expect(invoices).toMatchObject({
      path: "postgres.public.invoices",
      primary_key: ["id"],
      foreign_keys: [{ columns: ["account_id"], references: { schema: "public", table: "accounts", columns: ["id"] } }],
      replica_identity: "default",
      has_replica_identity: true
    })
    expect(invoices.columns.find((c: { name: string }) => c.name === "status")).toMatchObject({ type: "status", nullable: false, default: "'new'::status", enum_values: ["new", "paid"] })
    expect(schemas[1].tables.find((t: { name: string }) => t.name === "events")).toMatchObject({ primary_key: null, has_replica_identity: false })

    // Nothing changed: the version stays. A new column: version 2.
    const again = await discover(id)
    expect(again.status).toBe(202)
    expect(again.body.operation_id).not.toBe(started.body.operation_id)
    expect((await settle(again.body.operation_id)).result).toMatchObject({ schema_version: 1, changed: false })
    await source.query("alter table public.accounts add column nickname text")
    const changed = await discover(id)
    expect((await settle(changed.body.operation_id)).result).toMatchObject({ schema_version: 2, changed: true })
    expect((await getConnector(id)).body.schema_version).toBe(2)
  })

  it("concurrent discovers share one operation", async () => {
    const id = await createConnector()
    const answers = await Promise.all([discover(id), discover(id), discover(id)])
    for (const answer of answers) expect(answer.status, scion.explain(answer)).toBe(202)
    const ids = new Set(answers.map((a) => a.body.operation_id))
    expect(ids.size).toBe(1)
    expect(answers.filter((a) => a.body.joined === false)).toHaveLength(1)
    expect(await operationRows(id)).toHaveLength(1)
    expect((await settle(answers[0]!.body.operation_id)).status).toBe("completed")
  })

  it("422 with the failing prerequisite and no operation when the source refuses the stored credentials or the connector is not PostgreSQL", async () => {
    const wrong = await createConnector({ byoc: "self_managed" }, { password: "definitely-wrong" })
    const refused = await discover(wrong)
    expect(refused.status, scion.explain(refused)).toBe(422)
    expect(typeof refused.body.detail).toBe("string")
    expect(refused.body.prerequisites.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([
      ["service", "pass"],
      ["credentials", "pass"],
      ["reachable", "fail"]
    ])
    expect(JSON.stringify(refused.body)).not.toContain("definitely-wrong")
    expect(await operationRows(wrong)).toEqual([])

    const github = await scion.request("POST", "/v1/connectors", {
      token: tokens.member,
      body: { org_id: orgId, service_name: "github", connection_details: { organization: "scion-dev", access_token: "ghp_e2e" } }
    })
    const notPostgres = await discover(github.body.connector_id)
    expect(notPostgres.status).toBe(422)
    expect(notPostgres.body.prerequisites).toMatchObject([{ id: "service", status: "fail" }])
    expect(await operationRows(github.body.connector_id)).toEqual([])
    // Nor has it a grant script.
    const noScript = await scion.request("POST", `/v1/connectors/${github.body.connector_id}/grant-script`, { token: tokens.member })
    expect(noScript.status).toBe(422)
    expect(noScript.body.detail).toMatch(/not postgresql/)
  })

  it("a database the job cannot read: retried, then the operation fails with the reason", async () => {
    const id = await createConnector({}, { databases: ["postgres", "missing_db"] })
    const started = await discover(id)
    expect(started.status).toBe(202)
    expect(started.body.databases).toEqual(["postgres", "missing_db"])
    const operation = await settle(started.body.operation_id)
    expect(operation.status).toBe("failed")
    expect(operation.error).toMatch(/^Gave up after 3 attempts: Database missing_db could not be read: /)
    expect(operation.error).not.toContain(source.password)
    expect((await getConnector(id)).body).toMatchObject({ schema_version: 0, schema_structure: null })
  }, 60_000)

  it("403 for a viewer, 404 for another org and for unknown connectors", async () => {
    const id = await createConnector()
    expect((await discover(id, tokens.viewer)).status).toBe(403)
    expect((await discover(id, strangerToken)).status).toBe(404)
    expect((await discover("con_missing", tokens.owner)).status).toBe(404)
    expect(await operationRows(id)).toEqual([])
  })
})

describe("POST /v1/connectors/{id}/selection", () => {
  it("400 before discovery; admins only; paths resolved, FK targets not added, counters as the Connector table says", async () => {
    const id = await createConnector()
    const early = await select(id, ["*"])
    expect(early.status).toBe(400)
    expect(early.body.detail).toMatch(/Nothing was discovered/)

    const started = await discover(id)
    expect((await settle(started.body.operation_id)).status).toBe("completed")

    expect((await select(id, ["*"], tokens.member)).status).toBe(403)
    expect((await select(id, ["*"], strangerToken)).status).toBe(404)
    expect((await select(id, ["postgres.public.nope"])).status).toBe(400)
    expect((await select(id, ["postgres.public"])).body.detail).toMatch(/is invalid/)
    expect((await select(id, "*")).status).toBe(422)

    const all = await select(id, ["*"])
    expect(all.status, scion.explain(all)).toBe(200)
    expect(all.body).toMatchObject({ selected_entity_paths: ["*"], selection_schema_version: 1, selected_schema_version: 1, last_indexed_version: 0, needs_reselection: false, needs_reindex: true })
    expect(all.body.selected_schema_structure).toEqual(all.body.schema_structure)

    const some = await select(id, ["postgres.public.invoices", "postgres.audit.*"], tokens.owner)
    expect(some.status).toBe(200)
    expect(some.body).toMatchObject({ selected_entity_paths: ["postgres.public.invoices", "postgres.audit.*"], selected_schema_version: 2 })
    const tables = some.body.selected_schema_structure.databases.flatMap((d: any) => d.schemas.flatMap((s: any) => s.tables.map((t: any) => t.path)))
    expect(tables).toEqual(["postgres.audit.log", "postgres.public.invoices"])

    // The schema moves on: needs_reselection until the next selection.
    await source.query("create table audit.extra (id int primary key)")
    const rediscovered = await discover(id)
    expect((await settle(rediscovered.body.operation_id)).result).toMatchObject({ changed: true })
    const stale = await getConnector(id)
    expect(stale.body).toMatchObject({ needs_reselection: true, selection_schema_version: stale.body.schema_version - 1 })
    const reselected = await select(id, ["postgres.audit.*"])
    expect(reselected.body).toMatchObject({ needs_reselection: false, selected_schema_version: 3, selection_schema_version: stale.body.schema_version })
  })
})

describe("PUT /v1/connectors/{id}/replica-identity-decisions and POST /v1/connectors/{id}/grant-script", () => {
  it("decisions: 400 before discovery and for unknown keys or values, 403 for members, 404 for other orgs, 200 with the refreshed preflight, 409 for a write that lost a race; the grant script follows the selection", async () => {
    const id = await createConnector()
    const decide = (decisions: unknown, token = tokens.admin) => scion.request("PUT", `/v1/connectors/${id}/replica-identity-decisions`, { token, body: { decisions } })
    const script = (token = tokens.viewer, connectorId = id) => scion.request("POST", `/v1/connectors/${connectorId}/grant-script`, { token })

    expect((await decide({})).status).toBe(400)
    const early = await script()
    expect(early.status).toBe(422)
    expect(early.body.detail).toMatch(/discovery has not run/)

    const started = await discover(id)
    expect((await settle(started.body.operation_id)).status).toBe("completed")
    expect((await getConnector(id)).body.replica_identity_preflight).toMatchObject({ tables_without_replica_identity: ["postgres.public.events"], unresolved: ["postgres.public.events"], pass: false })

    expect((await decide({ "postgres.public.events": "exclude" }, tokens.member)).status).toBe(403)
    expect((await decide({ "postgres.public.events": "exclude" }, strangerToken)).status).toBe(404)
    const unknown = await decide({ "postgres.public.accounts": "exclude" })
    expect(unknown.status).toBe(400)
    expect(typeof unknown.body.detail).toBe("string")
    expect((await decide({ "postgres.public.events": "maybe" })).status).toBe(400)
    expect((await decide({ "postgres.public.events": 1 })).status).toBe(400)
    // Not an object at all: the body's shape, the edge's 422.
    const notAnObject = await decide("exclude")
    expect(notAnObject.status).toBe(422)
    expect(notAnObject.body.detail[0]).toMatchObject({ loc: ["body", "decisions"], msg: expect.any(String), type: expect.any(String) })

    const decided = await decide({ "postgres.public.events": "replica_identity_full" })
    expect(decided.status, scion.explain(decided)).toBe(200)
    expect(decided.body.replica_identity_preflight).toEqual({
      tables_without_replica_identity: ["postgres.public.events"],
      decisions: { "postgres.public.events": "replica_identity_full" },
      unresolved: [],
      pass: true,
      decisions_version: 1
    })
    expect((await decide({})).body.replica_identity_preflight).toMatchObject({ decisions: { "postgres.public.events": "exclude" }, decisions_version: 2 })

    // Writes that read the same version race: the first to write wins, the others are 409 (retry)
    // and change nothing — never a merge.
    const holder = new pg.Client({ connectionString: scion.databaseUrl })
    await holder.connect()
    try {
      await holder.query("begin")
      await holder.query("select 1 from connector.connectors where id = $1 for update", [id])
      const racing = ["exclude", "add_pk", "replica_identity_full"].map((choice) => decide({ "postgres.public.events": choice }))
      // All three waiting on the held row with their writes (each read version 2 before it).
      await waitFor("the three writes waiting on the held row", async () =>
        (await queryMetadata(scion, "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%replica_identity_decisions_version =%'"))[0].n === 3
      )
      await holder.query("rollback")
      const answers = await Promise.all(racing)
      expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409])
      for (const refused of answers.filter((a) => a.status === 409)) expect(typeof refused.body.detail).toBe("string")
      const winner = answers.find((a) => a.status === 200)!
      expect(winner.body.replica_identity_preflight.decisions_version).toBe(3)
      expect((await getConnector(id)).body.replica_identity_preflight).toEqual(winner.body.replica_identity_preflight)
    } finally {
      await holder.end()
    }
    expect((await decide({})).status).toBe(200)

    const unselected = await script()
    expect(unselected.status).toBe(422)
    expect(unselected.body.detail).toMatch(/no schemas are selected/)
    expect((await select(id, ["postgres.public.*"])).status).toBe(200)
    const written = await script()
    expect(written.status, scion.explain(written)).toBe(200)
    expect(written.body).toMatchObject({ source_provider: "vanilla", replication_username: "postgres", schemas_per_database: { postgres: ["public"] } })
    expect(written.body.sql).toContain('GRANT USAGE ON SCHEMA "public" TO "postgres";')
    // events is excluded: it stays out of the publication.
    // The capture log and heartbeat travel with the selected tables.
    expect(written.body.sql).toMatch(/CREATE PUBLICATION "scion_[a-z0-9_]+" FOR TABLE ONLY "public"."accounts", ONLY "public"."invoices", ONLY scion.schema_log, ONLY scion.heartbeat WITH \(publish_via_partition_root = true\);/)
    expect(written.body.sql).toMatch(/ALTER PUBLICATION "scion_[a-z0-9_]+" OWNER TO "postgres";/)
    expect(written.body.sql).not.toContain(source.password)
    expect((await script(strangerToken)).status).toBe(404)

    // Credentials that no longer decrypt (the envelope's tag damaged at rest): the interface's 500,
    // saying what failed and nothing of the secret; the script again once the envelope is whole.
    const [{ envelope }] = await queryMetadata(scion, "select envelope::text as envelope from connector.secrets where owner_id = $1 and name = 'connection_details'", [id])
    await queryMetadata(scion, "update connector.secrets set envelope = jsonb_set(envelope::jsonb, '{tag}', to_jsonb('AAAAAAAAAAAAAAAAAAAAAA=='::text)) where owner_id = $1 and name = 'connection_details'", [id])
    try {
      const undecryptable = await script()
      expect(undecryptable.status, scion.explain(undecryptable)).toBe(500)
      expect(typeof undecryptable.body.detail).toBe("string")
      expect(JSON.stringify(undecryptable.body)).not.toContain(source.password)
    } finally {
      await queryMetadata(scion, "update connector.secrets set envelope = $2::jsonb where owner_id = $1 and name = 'connection_details'", [id, envelope])
    }
    expect((await script()).status).toBe(200)
  })
})
