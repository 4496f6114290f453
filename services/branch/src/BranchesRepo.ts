import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Branch, BranchStatus, ColumnRef, MaskingConfig, MaskingPolicy, MaskingRule } from "./domain/models.js"
import { PasswordEnvelope } from "./Passwords.js"
import { LIVE_SNAPSHOT_STATUSES } from "./SnapshotsRepo.js"
import type { PasswordEnvelope as Envelope } from "./Passwords.js"

/** A branch row as a create inserts it (status creating). */
export interface NewBranchRow {
  readonly id: string
  readonly org_id: string
  readonly connector_id: string
  readonly name: string
  readonly service_type: string
  readonly database_name: string
  readonly role_name: string
  readonly engine_host: string
  readonly engine_port: number
  readonly pooler_host: string | null
  readonly pooler_port: number | null
  readonly create_operation_id: string
  readonly allow_stale: boolean
  readonly consistent_with_source: boolean
  readonly min_source_lsn: string | null
  readonly expires_at: Date | null
  readonly snapshot_id: string | null
}

interface Row {
  readonly id: string
  readonly org_id: string
  readonly connector_id: string
  readonly name: string
  readonly status: BranchStatus
  readonly database_name: string
  readonly role_name: string
  readonly password_envelope: unknown
  readonly engine_host: string | null
  readonly engine_port: number | null
  readonly pooler_host: string | null
  readonly pooler_port: number | null
  readonly create_operation_id: string
  readonly delete_operation_id: string | null
  readonly reset_operation_id: string | null
  readonly copied_at: Date | null
  readonly role_created_at: Date | null
  readonly read_ready_at: Date | null
  readonly write_ready_at: Date | null
  readonly masked_ready_at: Date | null
  readonly sequences_aligned_at: Date | null
  readonly error: string | null
  readonly allow_stale: boolean
  readonly consistent_with_source: boolean
  readonly min_source_lsn: string | null
  readonly source_lsn: string | null
  readonly data_as_of: Date | null
  readonly protected: boolean
  readonly expires_at: Date | null
  readonly snapshot_id: string | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly deleted_at: Date | null
}

/** The columns an update may set (updated_at is set by it). */
export type BranchUpdate = Partial<Omit<Row, "id" | "org_id" | "connector_id" | "created_at" | "updated_at">>

const toBranch = (r: Row): Branch => ({
  id: r.id,
  orgId: r.org_id,
  connectorId: r.connector_id,
  name: r.name,
  serviceType: "postgres",
  status: r.status,
  databaseName: r.database_name,
  roleName: r.role_name,
  engineHost: r.engine_host,
  enginePort: r.engine_port,
  poolerHost: r.pooler_host,
  poolerPort: r.pooler_port,
  createOperationId: r.create_operation_id,
  deleteOperationId: r.delete_operation_id,
  resetOperationId: r.reset_operation_id,
  copiedAt: r.copied_at,
  roleCreatedAt: r.role_created_at,
  readReadyAt: r.read_ready_at,
  writeReadyAt: r.write_ready_at,
  maskedReadyAt: r.masked_ready_at,
  sequencesAlignedAt: r.sequences_aligned_at,
  error: r.error,
  allowStale: r.allow_stale,
  consistentWithSource: r.consistent_with_source,
  minSourceLsn: r.min_source_lsn,
  sourceLsn: r.source_lsn,
  dataAsOf: r.data_as_of,
  protected: r.protected,
  expiresAt: r.expires_at,
  snapshotId: r.snapshot_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at
})

const decodeEnvelope = Schema.decodeUnknownOption(PasswordEnvelope)

/** The branch unit's tables. SQL failures are infrastructure: defects at this edge. */
export class BranchesRepo extends Effect.Service<BranchesRepo>()("@scion/branch/BranchesRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const find = (id: string) =>
      Effect.map(sql<Row>`select * from branches where id = ${id}`, (rows) => Option.map(Option.fromNullable(rows[0]), toBranch)).pipe(Effect.orDie)

    const findWithEnvelope = (id: string) =>
      Effect.map(sql<Row>`select * from branches where id = ${id}`, (rows) =>
        Option.map(Option.fromNullable(rows[0]), (r) => ({ branch: toBranch(r), envelope: r.password_envelope === null ? Option.none() : decodeEnvelope(r.password_envelope) }))
      ).pipe(Effect.orDie)

    /** The connector's branches that are not deleted, newest first, with their password envelopes. */
    const listByConnector = (connectorId: string) =>
      Effect.map(
        sql<Row>`select * from branches where connector_id = ${connectorId} and status <> 'deleted' order by created_at desc, id desc`,
        (rows) => rows.map((r) => ({ branch: toBranch(r), envelope: r.password_envelope === null ? Option.none<Envelope>() : decodeEnvelope(r.password_envelope) }))
      ).pipe(Effect.orDie)

    /** creating → failed with the error (a branch deleted meanwhile stays deleted). */
    const markFailed = (id: string, error: string) =>
      sql`update branches set status = 'failed', error = ${error}, password_envelope = null, updated_at = now() where id = ${id} and status = 'creating'`.pipe(Effect.asVoid, Effect.orDie)

    /**
     * creating → active, with the create's last records, in one statement; none when the branch
     * left creating meanwhile (deleted with its connector).
     */
    const activate = (id: string, fields: BranchUpdate) =>
      Effect.map(
        sql<Row>`update branches set ${sql.update({ ...fields, status: "active", error: null, updated_at: new Date() })} where id = ${id} and status = 'creating' returning *`,
        (rows) => Option.map(Option.fromNullable(rows[0]), toBranch)
      ).pipe(Effect.orDie)

    /** Every branch of the connector that may still have something on the engine. */
    const liveOnConnector = (connectorId: string) =>
      Effect.map(sql<Row>`select * from branches where connector_id = ${connectorId} and status not in ('deleted')`, (rows) => rows.map(toBranch)).pipe(Effect.orDie)

    /**
     * Stores the branch's sealed password unless one is stored already, and answers the stored one:
     * two attempts of one create (a redelivery while the first still runs) end up with one password.
     * None when the branch is gone.
     */
    const claimEnvelope = (id: string, envelope: Envelope) =>
      sql<{ readonly password_envelope: unknown }>`
        update branches set password_envelope = coalesce(password_envelope, ${JSON.stringify(envelope)}::jsonb), updated_at = now()
        where id = ${id} returning password_envelope`.pipe(
        Effect.map((rows) => Option.flatMap(Option.fromNullable(rows[0]?.password_envelope), decodeEnvelope)),
        Effect.orDie
      )

    const update = (id: string, fields: BranchUpdate) =>
      sql`update branches set ${sql.update({ ...fields, updated_at: new Date() })} where id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

    const maskingRules = (connectorId: string) =>
      Effect.map(
        sql<{ schema_name: string; table_name: string; column_name: string; method: MaskingRule["method"] }>`
          select schema_name, table_name, column_name, method from masking_rules where connector_id = ${connectorId} order by position`,
        (rows) => rows.map((r): MaskingRule => ({ schema: r.schema_name, table: r.table_name, column: r.column_name, method: r.method }))
      ).pipe(Effect.orDie)

    const replaceMaskingRules = (connectorId: string, orgId: string, rules: ReadonlyArray<MaskingRule>) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* sql`delete from masking_rules where connector_id = ${connectorId}`
            if (rules.length > 0) {
              yield* sql`insert into masking_rules ${sql.insert(
                rules.map((r, i) => ({ connector_id: connectorId, org_id: orgId, schema_name: r.schema, table_name: r.table, column_name: r.column, method: r.method, position: i }))
              )}`
            }
          })
        )
        .pipe(Effect.orDie)

    /** The rules in order, the policy and the safe columns (permissive and none without a policy row), in one statement. */
    const maskingConfig = (connectorId: string) =>
      Effect.map(
        sql<{ rules: ReadonlyArray<MaskingRule>; policy: MaskingPolicy | null; safe_columns: ReadonlyArray<ColumnRef> | null }>`
          select coalesce(
                   (select json_agg(json_build_object('schema', schema_name, 'table', table_name, 'column', column_name, 'method', method) order by position)
                    from masking_rules where connector_id = ${connectorId}),
                   '[]'::json) as rules,
                 p.policy, p.safe_columns
          from (select 1) one left join masking_policies p on p.connector_id = ${connectorId}`,
        ([row]): MaskingConfig => ({ rules: row?.rules ?? [], policy: row?.policy ?? "permissive", safeColumns: row?.safe_columns ?? [] })
      ).pipe(Effect.orDie)

    /** Rules, policy and safe columns replaced together. */
    const replaceMaskingConfig = (connectorId: string, orgId: string, config: MaskingConfig) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* replaceMaskingRules(connectorId, orgId, config.rules)
            yield* sql`
              insert into masking_policies (connector_id, org_id, policy, safe_columns) values (${connectorId}, ${orgId}, ${config.policy}, ${JSON.stringify(config.safeColumns)}::jsonb)
              on conflict (connector_id) do update set policy = excluded.policy, safe_columns = excluded.safe_columns, updated_at = now()`
          })
        )
        .pipe(Effect.orDie)

    /** Expired branches the sweeper deletes: active or failed, not protected, oldest expiry first. */
    const expired = (limit: number) =>
      Effect.map(
        sql<{ id: string }>`
          select id from branches
          where expires_at is not null and expires_at <= now() and status in ('active', 'failed') and not protected
          order by expires_at limit ${limit}`,
        (rows) => rows.map((row) => row.id)
      ).pipe(Effect.orDie)

    /** The state decisions about a row need, locked for the rest of the transaction. */
    const lock = (id: string) =>
      Effect.map(
        sql<{ status: BranchStatus; delete_operation_id: string | null; create_operation_id: string; reset_operation_id: string | null; protected: boolean }>`
          select status, delete_operation_id, create_operation_id, reset_operation_id, protected from branches where id = ${id} for update`,
        (rows) => Option.fromNullable(rows[0])
      ).pipe(Effect.orDie)

    /**
     * Serialises, until the transaction ends, everyone counting the org's branches and snapshots
     * against its plan: two creates at the last place cannot both see it free.
     */
    const lockOrgLimit = (orgId: string) =>
      sql`select pg_advisory_xact_lock(hashtext(${`scion-branch-limit:${orgId}`}))`.pipe(Effect.asVoid, Effect.orDie)

    /** Serialises, until the transaction ends, everyone deciding whether a name is free on a connector (create, rename). */
    const lockName = (connectorId: string, name: string) =>
      sql`select pg_advisory_xact_lock(hashtext(${`scion-branch-name:${connectorId}:${name}`}))`.pipe(Effect.asVoid, Effect.orDie)

    /** A live branch of the connector with this name other than `exceptId` (names are unique among live branches). */
    const nameTaken = (connectorId: string, name: string, exceptId: string) =>
      Effect.map(
        sql<{ id: string }>`
          select id from branches where connector_id = ${connectorId} and name = ${name} and id <> ${exceptId} and status in ('creating', 'active', 'deleting')`,
        (rows) => rows.length > 0
      ).pipe(Effect.orDie)

    /** How many branches there are in each state but deleted (the metrics' scion_branches). */
    const countsByStatus = sql<{ status: string; n: number }>`select status, count(*)::int as n from branches where status <> 'deleted' group by status`.pipe(
      Effect.map((rows) => rows.map((row) => ({ labels: { status: row.status }, count: row.n }))),
      Effect.orDie
    )

    /**
     * What the plan's branch limit counts in the org: its live branches (creating, active,
     * deleting) and its live snapshots (creating, ready, deleting), in one statement. Read under
     * lockOrgLimit by branch and snapshot creates alike.
     */
    const liveAgainstPlan = (orgId: string) =>
      Effect.map(
        sql<{ n: number }>`
          select ((select count(*) from branches where org_id = ${orgId} and status in ('creating', 'active', 'deleting'))
                + (select count(*) from snapshots where org_id = ${orgId} and status in ${sql.in(LIVE_SNAPSHOT_STATUSES)}))::int as n`,
        (rows) => rows[0]?.n ?? 0
      ).pipe(Effect.orDie)

    /** Serialises creates that carry the same idempotency key in an org (for the transaction). */
    const lockIdempotencyKey = (orgId: string, key: string) =>
      sql`select pg_advisory_xact_lock(hashtext(${`scion-branch-key:${orgId}:${key}`}))`.pipe(Effect.asVoid, Effect.orDie)

    /** The org's expired keys go, so a key can be used again after its window. */
    const purgeExpiredKeys = (orgId: string) => sql`delete from idempotency_keys where org_id = ${orgId} and expires_at <= now()`.pipe(Effect.asVoid, Effect.orDie)

    const findKey = (orgId: string, key: string) =>
      Effect.map(
        sql<{ readonly fingerprint: string; readonly branch_id: string; readonly operation_id: string }>`
          select fingerprint, branch_id, operation_id from idempotency_keys where org_id = ${orgId} and key = ${key}`,
        (rows) => Option.fromNullable(rows[0])
      ).pipe(Effect.orDie)

    const insertKey = (row: { readonly org_id: string; readonly key: string; readonly fingerprint: string; readonly branch_id: string; readonly operation_id: string; readonly expires_at: Date }) =>
      sql`insert into idempotency_keys ${sql.insert(row)}`.pipe(Effect.asVoid, Effect.orDie)

    /** The connector's live branch of this name, if any: its status and the create that made it. */
    const liveByName = (connectorId: string, name: string) =>
      Effect.map(
        sql<{ readonly status: string; readonly create_operation_id: string }>`
          select status, create_operation_id from branches
          where connector_id = ${connectorId} and name = ${name} and status in ('creating', 'active', 'deleting')`,
        (rows) => Option.fromNullable(rows[0])
      ).pipe(Effect.orDie)

    const insert = (row: NewBranchRow) => sql`insert into branches ${sql.insert({ ...row, status: "creating" })}`.pipe(Effect.asVoid, Effect.orDie)

    return { lockIdempotencyKey, lockOrgLimit, purgeExpiredKeys, findKey, insertKey, liveByName, insert, countsByStatus, liveAgainstPlan, find, findWithEnvelope, claimEnvelope, listByConnector, activate, markFailed, liveOnConnector, update, expired, lock, lockName, nameTaken, maskingRules, replaceMaskingRules, maskingConfig, replaceMaskingConfig } as const
  })
}) {}
