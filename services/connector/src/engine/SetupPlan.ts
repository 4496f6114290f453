/**
 * What engine setup needs before it may start and what it mirrors: the job's subject and payload,
 * the prerequisites (the 422's checks) and the plan they yield — shared by the service that
 * starts setups and the job that runs them.
 */
import { JobFailed } from "@scion/kit"
import { Option, Schema } from "effect"
import type { PreflightCheck } from "../connectors/Preflight.js"
import type { Decision } from "../connectors/ReplicaIdentity.js"
import { type DiscoveredTable, isStructure, tablesOf } from "../connectors/SchemaIntrospection.js"
import type { Connector } from "../domain/models.js"
import type { UnsupportedDdl } from "./MirrorSchema.js"
import type { PgStepFailed } from "./PgSession.js"

/** Subject `jobs.connector.engine_setup`, durable `connector-engine_setup`: setups and rollouts. */
export const ENGINE_SETUP_JOB = { unit: "connector", type: "engine_setup" } as const


export type { BranchingEngineStatus } from "../domain/models.js"

export const EngineSetupPayload = Schema.Struct({
  connector_id: Schema.String,
  /**
   * setup: POST …/engine-setup; rollout: POST …/index on a ready engine (the same steps, re-run);
   * reset: POST …/reset (the subscription and slot dropped, the mirror emptied, then the same steps);
   * deep_reset: POST …/deep-reset (the same steps for a new pipeline beside the active one, then a cutover).
   */
  mode: Schema.Literal("setup", "rollout", "reset", "deep_reset")
})
export type EngineSetupPayload = typeof EngineSetupPayload.Type

export const pass = (id: string, message: string): PreflightCheck => ({ id, status: "pass", message, remedy: null })
export const fail = (id: string, message: string, remedy: string): PreflightCheck => ({ id, status: "fail", message, remedy })



/** The selected tables of the connector's database, and what was decided for each. */
export interface MirrorPlan {
  readonly database: string
  /** Tables to mirror, with the decision that lets each replicate (none when it already can). */
  readonly tables: ReadonlyArray<{ readonly table: DiscoveredTable; readonly decision: Decision | null }>
  /** Selected tables left out by an `exclude` decision. */
  readonly excluded: ReadonlyArray<string>
}

/**
 * Engine setup's prerequisites, in order (services/connector/README.md, "Engine setup"): a
 * discovery, a selection taken from the current schema, every selected table in the database of
 * the connection details, and a decision for every selected table without a replica identity.
 */
export const setupPrerequisites = (connector: Connector, database: string): { readonly checks: ReadonlyArray<PreflightCheck>; readonly plan: Option.Option<MirrorPlan> } => {
  const checks: Array<PreflightCheck> = []
  if (!isStructure(connector.schemaStructure)) {
    checks.push(fail("discovered", "The source has not been discovered", "Run POST /v1/connectors/{connector_id}/discover and wait for it to complete."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("discovered", `Schema version ${connector.schemaVersion} discovered`))
  const selected = isStructure(connector.selectedSchemaStructure) ? tablesOf(connector.selectedSchemaStructure) : []
  if (selected.length === 0) {
    checks.push(fail("selected", "No table is selected", "Choose tables with POST /v1/connectors/{connector_id}/selection."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("selected", `${selected.length} table(s) selected`))
  if (connector.selectionSchemaVersion !== null && connector.schemaVersion > connector.selectionSchemaVersion) {
    checks.push(fail("selection_current", `The source's schema changed since the selection (schema_version ${connector.schemaVersion}, selected at ${connector.selectionSchemaVersion})`, "Select again with POST /v1/connectors/{connector_id}/selection."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("selection_current", "The selection was taken from the current schema"))
  const elsewhere = selected.filter((t) => t.path.split(".")[0] !== database)
  if (elsewhere.length > 0) {
    checks.push(
      fail(
        "one_database",
        `An engine mirrors one database (${database}); selected tables of other databases: ${elsewhere.map((t) => t.path).join(", ")}`,
        `Select tables of ${database} only, or create one connector per database.`
      )
    )
    return { checks, plan: Option.none() }
  }
  checks.push(pass("one_database", `Every selected table is in ${database}`))
  const decisions = ((connector.replicaIdentityPreflight as { decisions?: Record<string, Decision> } | null)?.decisions ?? {}) as Readonly<Record<string, Decision>>
  const unresolved = selected.filter((t) => !t.has_replica_identity && decisions[t.path] === undefined).map((t) => t.path)
  if (unresolved.length > 0) {
    checks.push(
      fail(
        "replica_identity_decisions",
        `Selected tables without a replica identity have no decision: ${unresolved.join(", ")}`,
        "Decide exclude, add_pk or replica_identity_full for each with PUT /v1/connectors/{connector_id}/replica-identity-decisions."
      )
    )
    return { checks, plan: Option.none() }
  }
  const tables = selected.flatMap((table): Array<MirrorPlan["tables"][number]> => {
    if (table.has_replica_identity) return [{ table, decision: null }]
    const decision = decisions[table.path]!
    return decision === "exclude" ? [] : [{ table, decision }]
  })
  const excluded = selected.filter((t) => !t.has_replica_identity && decisions[t.path] === "exclude").map((t) => t.path)
  if (tables.length === 0) {
    checks.push(fail("replica_identity_decisions", "Every selected table is excluded", "Select tables that can replicate, or decide add_pk or replica_identity_full for some."))
    return { checks, plan: Option.none() }
  }
  checks.push(pass("replica_identity_decisions", excluded.length === 0 ? "Every selected table can replicate" : `Excluded by decision: ${excluded.join(", ")}`))
  return { checks, plan: Option.some({ database, tables, excluded }) }
}




/** A failure of a step a human can act on: the operation fails with it. */
export const stepFailed = (step: string, error: PgStepFailed | UnsupportedDdl | string) =>
  new JobFailed({ message: `${step}: ${typeof error === "string" ? error : error.message}` })
