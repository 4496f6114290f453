import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import type { BranchJson, SnapshotJson } from "@scion/kit"
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Branches, served by the branch unit (services/branch/README.md, "The REST surface").
// ---------------------------------------------------------------------------------------------

const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })
const NullableTimestamp = Schema.NullOr(Timestamp)
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({ description: "An opaque id" })

/**
 * The create body. Fields are optional here so that a missing one is the interface's 400 with a
 * string detail (the branch unit says which); a field of the wrong type is 422.
 */
export const CreateBranchRequest = Schema.Struct({
  connector_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: "The connector whose engine to branch (required; 400 when missing)" }),
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({
    description: "1..63 of lowercase letters, digits, - and _, starting with a letter or digit; unique among the connector's live branches (required)"
  }),
  service_type: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: 'Must be "postgres" ("postgresql" is a 400 that says so; required)' }),
  allow_stale: Schema.optional(Schema.Boolean).annotations({
    description:
      "Extension. Branch even while the connector's replication is quarantined (branching_engine_status degraded): the copy may be stale, and data_as_of says how stale. Without it such a create is 422 naming the quarantine and the remedy."
  }),
  consistent_with_source: Schema.optional(Schema.Boolean).annotations({
    description:
      "Extension, read-your-writes: the job reads the source's current WAL position and copies only once the mirror has applied up to it, so rows a CI job just wrote to the source are in the branch. The operation fails if the mirror cannot get there within the catch-up bound."
  }),
  min_source_lsn: Schema.optional(Schema.String.pipe(Schema.maxLength(40))).annotations({
    description: "Extension: copy only once the mirror has applied the source up to this WAL position (pg_current_wal_lsn() on the source, e.g. 0/16B3748); 400 when not a WAL position."
  }),
  expires_at: Schema.optional(Schema.DateTimeUtc).annotations({
    description: "Extension: when the branch expires; an expiry sweeper then deletes it through a branch_delete operation. In the future, within a year (400 otherwise). At most one of expires_at and ttl_seconds."
  }),
  ttl_seconds: Schema.optional(Schema.Int).annotations({ description: "Extension: the branch expires this many seconds after the create is accepted (1..31622400)." }),
  snapshot_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({
    description:
      "Extension: cut the branch from this ready snapshot of the connector (POST /v1/connectors/{connector_id}/snapshots) instead of the live mirror, without pausing replication: every branch of it starts from the same data. 404 for an unknown snapshot or another connector's, 409 while it is not ready; not with consistent_with_source or min_source_lsn (400)."
  })
}).annotations({ identifier: "CreateBranchRequest" })

/** PATCH /v1/branches/{id}: what to change; absent fields stay. */
export const UpdateBranchRequest = Schema.Struct({
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: "A new name, unique among the connector's live branches (409 otherwise); the URL does not change" }),
  protected: Schema.optional(Schema.Boolean).annotations({ description: "While true, delete answers 409 and the expiry sweeper passes the branch by" }),
  expires_at: Schema.optional(Schema.NullOr(Schema.DateTimeUtc)).annotations({ description: "A new expiry (in the future, within a year), or null to keep the branch" })
}).annotations({ identifier: "UpdateBranchRequest" })

export const IdempotencyHeaders = Schema.Struct({
  "x-idempotency-key": Schema.optional(Schema.String).annotations({
    description: "Idempotency key (1..255 printable ASCII, per org, kept 24 hours): the same connector, service type and name again answers the first handle with X-Idempotency-Replay: true; another request with it is 409"
  }),
  "idempotency-key": Schema.optional(Schema.String).annotations({ description: "The standard header name, accepted as X-Idempotency-Key (X-Idempotency-Key wins when both are sent)" })
})

export const BranchOperationHandle = Schema.Struct({
  operation_id: Schema.String.annotations({ description: "Poll GET /v1/operations/{operation_id}" }),
  resource_id: Schema.String.annotations({ description: "The branch id" }),
  status: Schema.Literal("pending", "running", "completed", "failed").annotations({ description: "The operation's status (at acceptance, or now for a replay)" }),
  type: Schema.Literal("branch_create")
}).annotations({ identifier: "BranchCreateHandle", description: "The branch_create operation handle" })

/** The handle of an operation a branch or snapshot endpoint started (delete, reset, snapshot create/delete). */
const operationHandle = <T extends "branch_delete" | "branch_reset" | "snapshot_create" | "snapshot_delete">(type: T, resource: "branch" | "snapshot", identifier: string, description: string) =>
  Schema.Struct({
    operation_id: Schema.String.annotations({ description: "Poll GET /v1/operations/{operation_id}" }),
    resource_id: Schema.String.annotations({ description: `The ${resource} id` }),
    status: Schema.Literal("pending", "running", "completed", "failed"),
    type: Schema.Literal(type)
  }).annotations({ identifier, description })

export const BranchDeleteHandle = operationHandle("branch_delete", "branch", "BranchDeleteHandle", "The branch_delete operation handle")

export const BranchResetHandle = operationHandle("branch_reset", "branch", "BranchResetHandle", "The branch_reset operation handle (our extension of the operation types)")

export const SchemaDiffChange = Schema.Struct({
  kind: Schema.Literal(
    "create_enum", "add_enum_value", "replace_enum", "create_table", "add_column", "alter_column_type", "set_default", "drop_default",
    "set_not_null", "drop_not_null", "drop_constraint", "add_constraint", "drop_index", "create_index", "drop_column", "drop_table", "drop_enum"
  ),
  schema: Schema.String,
  table: Schema.NullOr(Schema.String).annotations({ description: "null for enums" }),
  name: Schema.String.annotations({ description: "The table, column, constraint, index or enum changed" }),
  sql: Schema.String.annotations({ description: "The statement that makes the change" })
}).annotations({ identifier: "SchemaDiffChange" })

export const SchemaDiff = Schema.Struct({
  branch_id: Schema.String,
  sql: Schema.String.annotations({ description: "Every statement, in the order to run them, one per line; empty when the schemas are the same" }),
  changes: Schema.Array(SchemaDiffChange)
}).annotations({ identifier: "SchemaDiff" })

export const Branch = Schema.Struct({
  branch_id: Schema.String,
  name: Schema.String,
  connector_id: Schema.String,
  service_type: Schema.Literal("postgres"),
  status: Schema.Literal("creating", "active", "deleting", "deleted", "failed").annotations({ description: "active when ready" }),
  branch_url: Schema.NullOr(Schema.String).annotations({
    description:
      "Sensitive: postgresql://<role>:<password>@<host>:<port>/<db>?sslmode=require&channel_binding=disable; use as returned. Null unless the branch is active and the caller holds branches.create (viewers see null)."
  }),
  pooled_branch_url: Schema.NullOr(Schema.String).annotations({ description: "Through the engine's PgBouncer when one is configured; null otherwise" }),
  pooled_branch_prisma_url: Schema.NullOr(Schema.String).annotations({ description: "The pooled URL with pgbouncer=true&connection_limit=1 for Prisma; null without a PgBouncer" }),
  created_at: Timestamp,
  read_ready_at: NullableTimestamp,
  write_ready_at: NullableTimestamp,
  masked_ready_at: NullableTimestamp.annotations({ description: "Set when the connector's masking rules were applied; null when it has none" }),
  error: Schema.NullOr(Schema.String).annotations({ description: "Why the create failed (status failed)" }),
  data_as_of: NullableTimestamp.annotations({
    description: "Extension: the source commit time the branch's data is at least as fresh as (the newest heartbeat the mirror had applied when the branch was cut); null until copied"
  }),
  source_lsn: Schema.NullOr(Schema.String).annotations({ description: "Extension: the source WAL position the mirror had applied when the branch was cut; null until copied" }),
  protected: Schema.Boolean.annotations({ description: "Extension: delete answers 409 while true (PATCH to unset)" }),
  expires_at: NullableTimestamp.annotations({ description: "Extension: when the expiry sweeper deletes the branch; null keeps it" }),
  snapshot_id: Schema.NullOr(Schema.String).annotations({ description: "Extension: the snapshot the branch was cut from; null for a branch of the live mirror" })
}).annotations({ identifier: "Branch" })

/** The schema and the kit's presenter describe one shape: a field added to one alone fails to compile. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const branchShapeAgrees: Same<typeof Branch.Type, BranchJson> = true
void branchShapeAgrees

export const BranchList = Schema.Struct({ branches: Schema.Array(Branch) }).annotations({ identifier: "BranchList" })

export const BranchPath = Schema.Struct({ branch_id: Id })
export const BranchListQuery = Schema.Struct({ connector_id: Id.annotations({ description: "The connector whose branches to list (required)" }) })
export const MaskingConnectorPath = Schema.Struct({ connector_id: Id })

export const MaskingRule = Schema.Struct({
  schema: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  table: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  column: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  method: Schema.Literal("hash", "email", "null", "redact").annotations({
    description:
      "hash: 'h' || md5(value) (deterministic, so joins on the column still match); email: u<12 hex of md5(lower(value))>@example.invalid; null; redact: 'REDACTED'. hash, email and redact need a text column."
  })
}).annotations({ identifier: "MaskingRule" })

export const ColumnRef = Schema.Struct({
  schema: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  table: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63)),
  column: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(63))
}).annotations({ identifier: "ColumnRef" })

const MaskingPolicy = Schema.Literal("permissive", "strict").annotations({
  description:
    "Extension. permissive (the default): discovery's detections are suggestions. strict: branch creates answer 422 naming the columns while a column discovery flags as personal or secret (new ones included, as the source's schema changes) has neither a rule nor a place in safe_columns."
})

/** PUT replaces the whole configuration: rules, policy (permissive when left out) and safe columns. */
export const MaskingRules = Schema.Struct({
  rules: Schema.Array(MaskingRule).pipe(Schema.maxItems(1000)),
  policy: Schema.optional(MaskingPolicy),
  safe_columns: Schema.optional(Schema.Array(ColumnRef).pipe(Schema.maxItems(1000))).annotations({ description: "Extension: columns marked as needing no masking" })
}).annotations({ identifier: "MaskingRules" })

export const MaskingConfiguration = Schema.Struct({
  rules: Schema.Array(MaskingRule),
  policy: MaskingPolicy,
  safe_columns: Schema.Array(ColumnRef)
}).annotations({ identifier: "MaskingConfiguration" })

/** A strict masking policy refuses the branch: the columns to cover first. */
export class MaskingIncomplete extends Schema.Class<MaskingIncomplete>("MaskingIncomplete")(
  {
    detail: Schema.String.annotations({ description: "Which columns, and what to do" }),
    columns: Schema.Array(Schema.String).annotations({ description: "schema.table.column of each flagged column with neither a rule nor a mark as safe" })
  },
  HttpApiSchema.annotations({ status: 422, description: "The connector's masking policy is strict and columns flagged as personal or secret are not covered" })
) {}

export const MaskingRulesWithSuggestions = Schema.Struct({
  rules: Schema.Array(MaskingRule),
  policy: MaskingPolicy,
  safe_columns: Schema.Array(ColumnRef),
  suggested_rules: Schema.Array(MaskingRule).annotations({
    description:
      "What discovery detected by column name (email, phone, names, addresses, secrets, …) in the selected tables that no rule covers yet. Not applied: PUT them as rules to mask them in new branches."
  })
}).annotations({ identifier: "MaskingRulesWithSuggestions" })

/** The connector's engine cannot be branched yet: the interface's 422 with a string detail. */
export class EngineNotReady extends Schema.Class<EngineNotReady>("EngineNotReady")(
  { detail: Schema.String.annotations({ description: "The engine's branching_engine_status and what to do" }) },
  HttpApiSchema.annotations({ status: 422, description: "The connector's engine is not ready to branch (branching_engine_status is not ready)" })
) {}

// ---------------------------------------------------------------------------------------------
// Snapshots (our extension): named, immutable copies of a connector's mirror.
// ---------------------------------------------------------------------------------------------

export const Snapshot = Schema.Struct({
  snapshot_id: Schema.String,
  connector_id: Schema.String,
  name: Schema.String,
  status: Schema.Literal("creating", "ready", "deleting", "deleted", "failed").annotations({ description: "ready once branches can be cut from it" }),
  data_as_of: NullableTimestamp.annotations({ description: "The source commit time the snapshot's data is at least as fresh as; null until made" }),
  source_lsn: Schema.NullOr(Schema.String).annotations({ description: "The source WAL position the mirror had applied when the snapshot was taken; null until made" }),
  error: Schema.NullOr(Schema.String).annotations({ description: "Why it could not be made (status failed)" }),
  created_at: Timestamp
}).annotations({ identifier: "Snapshot" })

const snapshotShapeAgrees: Same<typeof Snapshot.Type, SnapshotJson> = true
void snapshotShapeAgrees

export const SnapshotList = Schema.Struct({ snapshots: Schema.Array(Snapshot) }).annotations({ identifier: "SnapshotList" })

export const CreateSnapshotRequest = Schema.Struct({
  name: Schema.String.pipe(Schema.maxLength(200)).annotations({ description: "1..63 of lowercase letters, digits, - and _, starting with a letter or digit; unique among the connector's live snapshots" })
}).annotations({ identifier: "CreateSnapshotRequest" })

export const SnapshotPath = Schema.Struct({ snapshot_id: Id })
export const SnapshotConnectorPath = Schema.Struct({ connector_id: Id })

export const SnapshotCreateHandle = operationHandle("snapshot_create", "snapshot", "SnapshotCreateHandle", "The snapshot_create operation handle (our extension of the operation types)")
export const SnapshotDeleteHandle = operationHandle("snapshot_delete", "snapshot", "SnapshotDeleteHandle", "The snapshot_delete operation handle (our extension of the operation types)")

