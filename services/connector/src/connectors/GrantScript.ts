import { CAPTURE_PUBLISHED_TABLES, sourceCaptureInstall } from "../replication/SourceCaptureSql.js"
import type { Decision } from "./ReplicaIdentity.js"
import type { SchemaStructure } from "./SchemaIntrospection.js"

import { quoteIdent, quoteLiteral } from "@scion/kit"

/** The publication the engine replicates from: one per connector and database. */
export const publicationName = (connectorId: string) => `scion_${connectorId.toLowerCase().replace(/[^a-z0-9_]/g, "_")}`.slice(0, 63)

export interface GrantScriptInput {
  readonly connectorId: string
  /** preflight's provider: vanilla, rds, aurora, cloudsql, alloydb, azure, neon, supabase, … */
  readonly provider: string
  readonly username: string
  /** The selection's pruned structure. */
  readonly selected: SchemaStructure
  /** Decisions for selected tables; replica_identity_full ones are applied by the script. */
  readonly decisions: Readonly<Record<string, Decision>>
}

export interface GrantScript {
  readonly sql: string
  readonly sourceProvider: string
  readonly replicationUsername: string
  readonly schemasPerDatabase: Readonly<Record<string, ReadonlyArray<string>>>
}

/** How the provider gives a role the right to replicate (ARCHITECTURE.md's provider list). */
const replicationGrant = (provider: string, role: string): ReadonlyArray<string> => {
  switch (provider) {
    case "rds":
    case "aurora":
      // RDS and Aurora have no REPLICATION attribute for customers: the rds_replication role is it.
      return [`GRANT rds_replication TO ${role};`]
    case "cloudsql":
    case "alloydb":
      // cloudsqlsuperuser / alloydbsuperuser may grant the attribute (flag cloudsql.logical_decoding / alloydb.logical_decoding must be on).
      return [`ALTER ROLE ${role} WITH REPLICATION;`]
    case "azure":
      // azure_pg_admin may grant the attribute on Flexible Server.
      return [`ALTER ROLE ${role} WITH REPLICATION;`]
    default:
      return [`ALTER ROLE ${role} WITH REPLICATION;`]
  }
}

/**
 * A psql script (`\connect` switches database) an administrator runs on the source: the role
 * with LOGIN and the provider's replication right, then per selected database CONNECT and CREATE,
 * USAGE and SELECT on the selected schemas with default privileges for future tables, REPLICA
 * IDENTITY FULL where it was decided, and the connector's publication for the selected tables
 * (created or reset to them), and Scion's schema-change capture (the log in the publication). It never carries a password: the role's own is kept, a new role
 * gets one in the commented line. Pure.
 */
export const grantScript = (input: GrantScriptInput): GrantScript => {
  const role = quoteIdent(input.username)
  const publication = quoteIdent(publicationName(input.connectorId))
  const lines: Array<string> = [
    `-- Scion grant script for connector ${input.connectorId} (source provider: ${input.provider}).`,
    "-- Run with psql as an administrator of the source (a superuser, or the provider's admin role).",
    "",
    `DO $$ BEGIN`,
    `  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = ${quoteLiteral(input.username)}) THEN`,
    `    CREATE ROLE ${role} LOGIN;`,
    `  ELSE`,
    `    ALTER ROLE ${role} LOGIN;`,
    `  END IF;`,
    `END $$;`,
    `-- A new role needs a password: ALTER ROLE ${role} PASSWORD '<choose one>';`,
    ...replicationGrant(input.provider, role)
  ]
  const schemasPerDatabase: Record<string, ReadonlyArray<string>> = {}
  for (const database of input.selected.databases) {
    schemasPerDatabase[database.name] = database.schemas.map((s) => s.name)
    const db = quoteIdent(database.name)
    lines.push("", `\\connect ${db}`, `GRANT CONNECT, CREATE ON DATABASE ${db} TO ${role};`)
    for (const schema of database.schemas) {
      const s = quoteIdent(schema.name)
      lines.push(
        `GRANT USAGE ON SCHEMA ${s} TO ${role};`,
        `GRANT SELECT ON ALL TABLES IN SCHEMA ${s} TO ${role};`,
        `ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT SELECT ON TABLES TO ${role};`
      )
    }
    const tables = database.schemas.flatMap((schema) =>
      schema.tables.map((table) => ({ path: table.path, ready: table.has_replica_identity, name: `${quoteIdent(schema.name)}.${quoteIdent(table.name)}` }))
    )
    for (const table of tables) {
      if (!table.ready && input.decisions[table.path] === "replica_identity_full") lines.push(`ALTER TABLE ${table.name} REPLICA IDENTITY FULL;`)
    }
    // Only tables whose updates and deletes can replicate are published: publishing one without
    // a replica identity would make the source refuse its UPDATEs and DELETEs. Excluded tables
    // stay out; add_pk tables join once engine setup has added the key.
    const published = tables.filter((t) => t.ready || input.decisions[t.path] === "replica_identity_full").map((t) => t.name)
    // Schema-change capture (event triggers need a superuser): the mirror then follows the
    // source's migrations in commit order. The role owns the log tables so it may publish them.
    lines.push(
      "-- Schema-change capture: event triggers record each DDL in scion.schema_log, which the mirror applies in order.",
      ...sourceCaptureInstall.map((statement) => `${statement};`),
      `GRANT USAGE ON SCHEMA scion TO ${role};`,
      `ALTER TABLE scion.schema_log OWNER TO ${role};`,
      `ALTER TABLE scion.heartbeat OWNER TO ${role};`,
      `ALTER TABLE scion.publication_scope OWNER TO ${role};`
    )
    if (published.length > 0) published.push(...CAPTURE_PUBLISHED_TABLES)
    if (published.length > 0) {
      // ONLY: an inheritance parent's children are tables of their own, published when selected.
      const list = published.map((table) => `ONLY ${table}`).join(", ")
      lines.push(
        `DO $$ BEGIN`,
        `  IF EXISTS (SELECT FROM pg_publication WHERE pubname = ${quoteLiteral(publicationName(input.connectorId))}) THEN`,
        `    ALTER PUBLICATION ${publication} SET TABLE ${list};`,
        `    ALTER PUBLICATION ${publication} SET (publish_via_partition_root = true);`,
        `  ELSE`,
        `    CREATE PUBLICATION ${publication} FOR TABLE ${list} WITH (publish_via_partition_root = true);`,
        `  END IF;`,
        `END $$;`,
        // Owned by the role, so Scion can drop it when the connector is deleted (and setup finds it
        // as it would have made it, leaving it alone).
        `ALTER PUBLICATION ${publication} OWNER TO ${role};`
      )
    }
  }
  return { sql: `${lines.join("\n")}\n`, sourceProvider: input.provider, replicationUsername: input.username, schemasPerDatabase }
}
