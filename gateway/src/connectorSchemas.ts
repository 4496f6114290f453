import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Connectors, served by the connector unit. Bodies the interface leaves open are ours
// (services/connector/README.md, "The REST surface").
// ---------------------------------------------------------------------------------------------

const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({ description: "An opaque id" })
const ShortText = Schema.String.pipe(Schema.maxLength(200))

const detailsText =
  "Validated per service_name by the connector unit (400 with a string detail when invalid; unknown keys are invalid). " +
  "postgresql: {host, port (default 5432), database, username, password, sslmode (disable | prefer | require | verify-ca | verify-full; default prefer), databases? (database names to index; default [database])}. " +
  "github (connector_category code_host): {organization, access_token}; checked by shape only, no call to GitHub is made. " +
  "Stored encrypted; never returned by normal reads."

/** Any JSON at the edge: the unit validates it per service and answers 400, as the interface says. */
const ConnectionDetails = Schema.Unknown.annotations({
  description: detailsText,
  jsonSchema: { type: "object", description: detailsText }
})

export const ConnectorPath = Schema.Struct({ connector_id: Id })

export const ConnectorListQuery = Schema.Struct({
  org_id: Id.annotations({ description: "The org whose connectors to list (required)" }),
  connector_category: Schema.optional(ShortText.annotations({ description: "Only this category: database or code_host" })),
  service_name: Schema.optional(ShortText.annotations({ description: "Only this service: postgresql or github" }))
})

const OrgId = Schema.optional(
  Schema.NullOr(Id).annotations({ description: "The org to act in; an API key may leave it out (its own org) and may name only its own org" })
)

export const PreflightRequest = Schema.Struct({
  org_id: OrgId,
  service_name: ShortText.annotations({ description: "postgresql or github; anything else is 400" }),
  connection_details: ConnectionDetails,
  environment_id: Schema.optional(Schema.NullOr(Id).annotations({ description: "An environment of the org; with an active private link, private_link_id is required (400)" })),
  private_link_id: Schema.optional(Schema.NullOr(ShortText))
}).annotations({ identifier: "PreflightRequest" })

export const CreateConnectorRequest = Schema.Struct({
  org_id: OrgId,
  project_id: Schema.optional(Schema.NullOr(Id).annotations({ description: "A project of the org to group the connector under" })),
  name: Schema.optional(Schema.NullOr(ShortText).annotations({ description: "Defaults to database@host (postgresql) or the organization (github)" })),
  service_name: ShortText.annotations({ description: "postgresql or github; anything else is 400" }),
  connection_details: ConnectionDetails,
  byoc: Schema.optional(
    Schema.NullOr(ShortText).annotations({
      description: "null: Scion hosts the engine (the preflight gate runs); environment: the engine runs in the org's environment (the gate runs); self_managed: the customer runs it (no gate). Other values are 400."
    })
  ),
  use_environment: Schema.optional(Schema.NullOr(Schema.Boolean).annotations({ description: "Place the engine in environment_id (required then)" })),
  private_link_id: Schema.optional(Schema.NullOr(ShortText)),
  environment_id: Schema.optional(Schema.NullOr(Id))
}).annotations({ identifier: "CreateConnectorRequest" })

export const UpdateConnectorRequest = Schema.Struct({
  name: Schema.optional(ShortText.pipe(Schema.minLength(1))),
  connection_details: Schema.optional(ConnectionDetails)
}).annotations({
  identifier: "UpdateConnectorRequest",
  description: "Only the fields given change (400 when none). New connection_details replace the stored ones as a whole; when they differ they are re-tested with the preflight gate (422 with the report when it fails, nothing changed) and indexing_status is reset."
})

export const PreflightCheck = Schema.Struct({
  id: Schema.String.annotations({
    description: "reachable, authentication, server_version, wal_level, replication_slots, wal_senders, replication_privilege, schema_select, publication_rights, replica_identity (postgresql); connection_details (code hosts)"
  }),
  status: Schema.Literal("pass", "warn", "fail"),
  message: Schema.String,
  remedy: Schema.NullOr(Schema.String).annotations({ description: "What to do about a warn or fail; null for a pass" })
}).annotations({ identifier: "PreflightCheck" })

export const PreflightReport = Schema.Struct({
  preflight_pass: Schema.Boolean.annotations({ description: "True when no check failed (warnings do not fail the gate)" }),
  checks: Schema.Array(PreflightCheck).annotations({
    description: "The checks that ran, in order; when the source is unreachable or refuses the login, the later checks are not listed"
  }),
  provider: Schema.String.annotations({ description: "What the server reveals: vanilla, rds, aurora, cloudsql, alloydb, azure, neon, supabase; unknown when not logged in; the service name for code hosts" })
}).annotations({ identifier: "PreflightReport" })

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const Replication = Schema.Struct({
  status: Schema.Literal("streaming", "catching_up", "applying_schema_change", "quarantined", "stopped").annotations({
    description:
      "streaming: the mirror follows the source; catching_up: it is behind by more than the bound; applying_schema_change: a table that joined is being copied; quarantined: paused by the monitor (see quarantine); stopped: the subscription is not running (paused, or the source unreachable)"
  }),
  lag_bytes: Schema.NullOr(Schema.Number).annotations({ description: "Source WAL the mirror had not confirmed when measured; null when the source could not be asked" }),
  last_applied_at: Schema.NullOr(Timestamp).annotations({
    description: "The source commit time of the newest heartbeat the mirror has applied (Scion writes one on the source every few seconds); where the source has none, the subscription's last report"
  }),
  active_pipeline_id: Schema.String.annotations({ description: "The pipeline (publication, slot, subscription) branches are cut from" }),
  schema_follow: Schema.Literal("capture", "reconcile").annotations({
    description: "capture: DDL is recorded on the source and applied in commit order; reconcile: the monitor diffs the catalogs when drift shows"
  }),
  measured_at: Timestamp
}).annotations({ identifier: "Replication", description: "How fresh the mirror is (extension); null until an engine is set up" })

const connectorFields = {
  connector_id: Schema.String,
  org_id: Schema.String,
  project_id: Schema.NullOr(Schema.String),
  name: Schema.String,
  service_name: Schema.String,
  connector_category: Schema.String.annotations({ description: "database (postgresql) or code_host (github)" }),
  schema_version: Schema.Number,
  selection_schema_version: Schema.NullOr(Schema.Number),
  selected_schema_version: Schema.Number,
  last_indexed_version: Schema.Number,
  selected_entity_paths: Schema.Array(Schema.String),
  selected_schema_structure: Schema.NullOr(JsonObject),
  indexing_status: Schema.String.annotations({ description: "not_indexed until the selection is applied; reset when connection_details change" }),
  branching_engine_status: Schema.String.annotations({
    description:
      "not_set_up, setting_up, ready, degraded (set up, but replication is quarantined: branches are refused unless allow_stale), failed_validation (failing checks in readiness-checks), failed"
  }),
  byoc: Schema.NullOr(Schema.Literal("environment", "self_managed")),
  use_environment: Schema.Boolean,
  private_link_id: Schema.NullOr(Schema.String),
  environment_id: Schema.NullOr(Schema.String),
  replica_identity_preflight: Schema.NullOr(JsonObject),
  needs_reselection: Schema.Boolean.annotations({ description: "schema_version > selection_schema_version" }),
  needs_reindex: Schema.Boolean.annotations({ description: "selected_schema_version > last_indexed_version" }),
  source_provider: Schema.NullOr(Schema.String).annotations({ description: "The provider preflight detected (postgresql with the gate); null otherwise" }),
  can_update: Schema.Boolean,
  can_delete: Schema.Boolean,
  deletion_locked: Schema.Boolean.annotations({ description: "While true, DELETE of the connector answers 409 (POST/DELETE …/deletion-lock)" }),
  replication: Schema.NullOr(Replication),
  created_by: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp
}

/** The row right after create: no schema_structure (discovery is a separate call). */
export const CreatedConnector = Schema.Struct(connectorFields).annotations({
  identifier: "CreatedConnector",
  description: "A connector as create answers it: no schema_structure, no connection_details"
})

export const Connector = Schema.Struct({
  ...connectorFields,
  schema_structure: Schema.NullOr(JsonObject).annotations({ description: "The discovered tree; null until discovery" })
}).annotations({ identifier: "Connector", description: "A connector; connection_details are never part of it" })

export const ConnectorList = Schema.Struct({ connectors: Schema.Array(Connector) }).annotations({
  identifier: "ConnectorList",
  description: "The org's connectors the caller can access, oldest first"
})

export const ConnectionDetailsResponse = JsonObject.annotations({
  identifier: "ConnectionDetails",
  description: "The decrypted connection_details, with defaults filled in (postgresql: port, sslmode, databases)"
})

/**
 * 422 when the create-time (or update-time) preflight gate does not pass: `detail` names the
 * failed checks, `preflight` is the full report. Nothing was stored.
 */
export class PreflightNotPassed extends Schema.Class<PreflightNotPassed>("PreflightNotPassed")(
  {
    detail: Schema.String.annotations({ description: "Which checks failed, for humans" }),
    preflight: PreflightReport
  },
  HttpApiSchema.annotations({ status: 422, description: "The preflight gate did not pass: the body carries the full report; nothing was stored" })
) {}

// ---------------------------------------------------------------------------------------------
// Discovery and selection.
// ---------------------------------------------------------------------------------------------

const prerequisitesText = "The checks that gate discovery, in order: service (the connector is postgresql), credentials (the stored connection details decrypt), reachable (the source accepts them)"

export const DiscoveryStarted = Schema.Struct({
  operation_id: Schema.String.annotations({ description: "Poll GET /v1/operations/{operation_id} (type connector_discovery)" }),
  resource_id: Schema.String.annotations({ description: "The connector id" }),
  status: Schema.Literal("pending", "running").annotations({ description: "The operation's status when accepted" }),
  type: Schema.Literal("connector_discovery"),
  joined: Schema.Boolean.annotations({ description: "True when a discovery already pending or running for this connector was joined (same operation_id)" }),
  prerequisites: Schema.Array(PreflightCheck).annotations({ description: `${prerequisitesText}; all passed here` }),
  databases: Schema.Array(Schema.String).annotations({ description: "The databases the job introspects (connection_details.databases, default [database])" })
}).annotations({ identifier: "DiscoveryStarted", description: "The operation handle plus the prerequisite payload" })

/** 422 when a prerequisite of discovery fails: nothing was started, no operation exists. */
export class DiscoveryPrerequisitesNotMet extends Schema.Class<DiscoveryPrerequisitesNotMet>("DiscoveryPrerequisitesNotMet")(
  {
    detail: Schema.String.annotations({ description: "Which prerequisites failed, for humans" }),
    prerequisites: Schema.Array(PreflightCheck).annotations({ description: `${prerequisitesText}; the checks after a failed one do not run` })
  },
  HttpApiSchema.annotations({ status: 422, description: "A discovery prerequisite failed; no operation was started" })
) {}

const SelectedPath = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(400))

export const SelectionRequest = Schema.Struct({
  selected_paths: Schema.Array(SelectedPath).annotations({
    description:
      "[\"*\"] selects everything; otherwise paths of the form database.*, database.schema.* or database.schema.table (names exactly as discovered; a name containing a dot is reachable only through its parent's wildcard). Every path must match something discovered (400 otherwise, and before any discovery). Foreign-key targets are not added. At most 1000 paths."
  })
}).annotations({ identifier: "SelectionRequest" })

// ---------------------------------------------------------------------------------------------
// Replica-identity decisions and the grant script.
// ---------------------------------------------------------------------------------------------

export const ReplicaIdentityDecisionsRequest = Schema.Struct({
  decisions: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    description:
      "database.schema.table → exclude | add_pk | replica_identity_full, for tables of the latest discovery without a replica identity (replica_identity_preflight.tables_without_replica_identity). Replaces the whole set: tables left out are exclude. An unknown key or another value is 400.",
    jsonSchema: { type: "object", additionalProperties: { type: "string", enum: ["exclude", "add_pk", "replica_identity_full"] } }
  })
}).annotations({ identifier: "ReplicaIdentityDecisionsRequest" })

export const GrantScriptResponse = Schema.Struct({
  sql: Schema.String.annotations({
    description:
      "A psql script (\\connect switches database) for an administrator of the source: the role with LOGIN and the provider's replication right, CONNECT and CREATE on each selected database, USAGE, SELECT and default privileges on the selected schemas, REPLICA IDENTITY FULL where decided, and the connector's publication for the selected tables that can replicate. Never a password."
  }),
  source_provider: Schema.String.annotations({ description: "The provider the script is written for (what preflight detected), for example vanilla or rds" }),
  replication_username: Schema.String.annotations({ description: "The username of the connection details" }),
  schemas_per_database: Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }).annotations({ description: "The selected schemas, per database" })
}).annotations({ identifier: "GrantScript" })

/** 422 when there is nothing to write a grant script for yet (string detail). */
export class GrantScriptNotAvailable extends Schema.Class<GrantScriptNotAvailable>("GrantScriptNotAvailable")(
  { detail: Schema.String.annotations({ description: "Why: not postgresql, discovery has not run, no schemas selected, or no username" }) },
  HttpApiSchema.annotations({ status: 422, description: "No grant script yet: the connector is not PostgreSQL, discovery has not run, no schemas are selected, or the username is missing" })
) {}

// ---------------------------------------------------------------------------------------------
// Deletion and the deletion lock.
// ---------------------------------------------------------------------------------------------

export const DeleteConnectorQuery = Schema.Struct({
  force: Schema.optional(
    Schema.Literal("true", "false").annotations({
      description:
        "Default false. true abandons a source that cannot be cleaned up (unreachable, refusing the login): the connector is deleted and the operation's result says the source cleanup was skipped. Without it such a source fails the operation and the connector stays."
    })
  )
})

export const ConnectorDeleteStarted = Schema.Struct({
  operation_id: Schema.String.annotations({ description: "Poll GET /v1/operations/{operation_id} (type connector_delete)" }),
  resource_id: Schema.String.annotations({ description: "The connector id" }),
  status: Schema.Literal("pending").annotations({ description: "The operation's status when accepted" }),
  type: Schema.Literal("connector_delete")
}).annotations({ identifier: "ConnectorDeleteStarted", description: "The connector_delete operation handle" })

// ---------------------------------------------------------------------------------------------
// Engine setup, index, readiness evidence and quarantine.
// ---------------------------------------------------------------------------------------------

export const ConnectorOperationHandle = Schema.Struct({
  operation_id: Schema.String.annotations({ description: "Poll GET /v1/operations/{operation_id}" }),
  resource_id: Schema.String.annotations({ description: "The connector id" }),
  status: Schema.Literal("pending", "running", "completed", "failed").annotations({ description: "The operation's status when accepted" }),
  type: Schema.Literal("connector_engine_setup", "connector_rollout", "connector_reset", "connector_deep_reset", "connector_replication_rollback")
}).annotations({ identifier: "ConnectorOperationHandle", description: "The operation handle (202)" })

/** 200 when there is nothing to start: the connector row plus a message. */
export const ConnectorWithMessage = Schema.Struct({
  ...connectorFields,
  schema_structure: Schema.NullOr(JsonObject),
  message: Schema.String.annotations({ description: "Why nothing was started" })
}).annotations({ identifier: "ConnectorWithMessage", description: "The connector as it is, with a message saying why no work was started" })

const engineSetupPrerequisitesText =
  "The checks that gate engine setup, in order: credentials (the stored details decrypt), discovered, selected, selection_current (no discovery changed the schema since the selection), one_database (an engine mirrors the database of connection_details), replica_identity_decisions (every selected table without a replica identity has a decision; not all excluded)"

/** 422 when a prerequisite of engine setup fails: nothing was started. */
export class EngineSetupPrerequisitesNotMet extends Schema.Class<EngineSetupPrerequisitesNotMet>("EngineSetupPrerequisitesNotMet")(
  {
    detail: Schema.String.annotations({ description: "Which prerequisites failed, for humans" }),
    prerequisites: Schema.Array(PreflightCheck).annotations({ description: `${engineSetupPrerequisitesText}; the checks after a failed one do not run` })
  },
  HttpApiSchema.annotations({ status: 422, description: "An engine setup prerequisite failed (for example unresolved replica-identity decisions); no operation was started" })
) {}

/** 422 when a reset asks for an engine that was never set up. */
export class EngineNotSetUp extends Schema.Class<EngineNotSetUp>("EngineNotSetUp")(
  { detail: Schema.String.annotations({ description: "Why, and what to run first" }) },
  HttpApiSchema.annotations({ status: 422, description: "The connector's engine was never set up: there is no mirror to reset" })
) {}

/** 422 when a rollback has no replaced pipeline to return to. */
export class RollbackUnavailable extends Schema.Class<RollbackUnavailable>("RollbackUnavailable")(
  { detail: Schema.String.annotations({ description: "Why there is nothing to roll back to" }) },
  HttpApiSchema.annotations({ status: 422, description: "No pipeline replaced by a cutover is kept for a rollback (none was, or its grace ended)" })
) {}

const limitParam = (max: number, fallback: number) =>
  Schema.NumberFromString.pipe(
    Schema.filter((n) => Number.isInteger(n) && n >= 1 && n <= max, {
      message: () => `Input should be an integer from 1 to ${max}`,
      jsonSchema: { type: "integer", minimum: 1, maximum: max }
    })
  ).annotations({ description: `1..${max}, default ${fallback}`, jsonSchema: { type: "integer", minimum: 1, maximum: max, default: fallback } })

const OffsetParam = Schema.NumberFromString.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 0, { message: () => "Input should be an integer greater than or equal to 0", jsonSchema: { type: "integer", minimum: 0 } })
).annotations({ description: ">= 0, default 0", jsonSchema: { type: "integer", minimum: 0, default: 0 } })

const BooleanParam = Schema.Literal("true", "false").annotations({ description: "true or false (default false)" })

export const ReadinessChecksQuery = Schema.Struct({
  attempt_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  check_name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  only_failed: Schema.optional(BooleanParam),
  limit: Schema.optional(limitParam(5000, 500)),
  offset: Schema.optional(OffsetParam)
})

export const ReadinessAttemptsQuery = Schema.Struct({ limit: Schema.optional(limitParam(5000, 50)) })

export const ReadinessCheck = Schema.Struct({
  attempt_id: Schema.String,
  check_name: Schema.String.annotations({ description: "mirror_table_present, initial_copy_complete, replica_identity, row_count_matches" }),
  table_path: Schema.String.annotations({ description: "database.schema.table" }),
  status: Schema.Literal("pass", "fail"),
  message: Schema.String,
  pod_name: Schema.String.annotations({ description: "The engine instance that was checked" }),
  checked_at: Timestamp
}).annotations({ identifier: "ReadinessCheck" })

export const ReadinessChecksList = Schema.Struct({ checks: Schema.Array(ReadinessCheck) }).annotations({
  identifier: "ReadinessChecksList",
  description: "Newest attempt first; within an attempt in the order the checks ran"
})

export const ReadinessAttempt = Schema.Struct({
  attempt_id: Schema.String,
  total_checks: Schema.Int,
  passed_checks: Schema.Int,
  failed_checks: Schema.Int,
  latest_checked_at: Timestamp,
  pod_name: Schema.String
}).annotations({ identifier: "ReadinessAttempt" })

export const ReadinessAttemptsList = Schema.Struct({ attempts: Schema.Array(ReadinessAttempt) }).annotations({
  identifier: "ReadinessAttemptsList",
  description: "Most recent first"
})

export const SchemaChangesQuery = Schema.Struct({
  limit: Schema.optional(limitParam(5000, 500)),
  offset: Schema.optional(OffsetParam)
})

export const SchemaChange = Schema.Struct({
  change_id: Schema.String,
  mode: Schema.Literal("captured", "reconciled").annotations({
    description: "captured: recorded on the source by Scion's event trigger and applied by the mirror in commit order; reconciled: found by the monitor's catalog diff"
  }),
  command_tag: Schema.String.annotations({ description: "The source's command tag, e.g. ALTER TABLE" }),
  object_identity: Schema.NullOr(Schema.String).annotations({ description: "The object the command named first, e.g. public.users" }),
  statement: Schema.NullOr(Schema.String).annotations({ description: "The statement as the source ran it (at most 4000 characters)" }),
  status: Schema.Literal("applied", "skipped", "reconciled", "failed").annotations({
    description: "applied: the mirror followed it; skipped: it touched nothing the selection mirrors; reconciled: the monitor aligned the mirror; failed: see error"
  }),
  actions: Schema.Array(Schema.String).annotations({ description: "The statements the mirror ran" }),
  error: Schema.NullOr(Schema.String),
  tables_added: Schema.Array(Schema.String).annotations({ description: "schema.table of tables that joined the mirror (then copied)" }),
  source_committed_at: Schema.NullOr(Timestamp).annotations({ description: "When the change happened on the source (captured changes)" }),
  applied_at: Timestamp
}).annotations({ identifier: "SchemaChange" })

export const SchemaChangesList = Schema.Struct({ changes: Schema.Array(SchemaChange) }).annotations({
  identifier: "SchemaChangesList",
  description: "Newest first"
})

export const QuarantinePath = Schema.Struct({ connector_id: Id, quarantine_id: Id })

export const QuarantineEntry = Schema.Struct({
  quarantine_id: Schema.String,
  connector_id: Schema.String,
  status: Schema.Literal("quarantined", "released"),
  reason: Schema.String.annotations({ description: "slot_lost, publication_changed (the publication on the source dropped or altered: a release copies the mirror again), subscription_error, subscription_stopped, lag_exceeded or schema_drift (a schema change the mirror could not follow)" }),
  detail: Schema.String,
  quarantined_at: Timestamp,
  released_at: Schema.NullOr(Timestamp)
}).annotations({ identifier: "QuarantineEntry" })

export const QuarantineList = Schema.Struct({ entries: Schema.Array(QuarantineEntry) }).annotations({
  identifier: "QuarantineList",
  description: "The connector's entries with status quarantined (released ones are not listed)"
})
