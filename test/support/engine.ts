/**
 * A connector with a ready branching engine, through the REST API as a user would get one:
 * create → discover → select → decisions → engine setup → ready. And direct access to an engine's
 * mirror for assertions (the local adapter's record under the system's ENGINE_DATA_DIR).
 */
import { existsSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import pg from "pg"
import { settleOperation } from "./flows.js"
import type { SourceCluster } from "./sourceCluster.js"
import type { Scion } from "./system.js"

export interface ReadyConnectorInput {
  readonly orgId: string
  /** Creates, discovers and sets up (connectors.create / connectors.update). */
  readonly memberToken: string
  /** Selects and decides (connectors.admin). */
  readonly adminToken: string
  readonly source: SourceCluster
  /** Default ["*"]. */
  readonly selectedPaths?: ReadonlyArray<string>
  /** Replica-identity decisions; default: every table without one gets replica_identity_full. */
  readonly decisions?: Record<string, string>
  readonly name?: string
  readonly database?: string
}

export interface ReadyConnector {
  readonly connectorId: string
  readonly setupOperation: Record<string, any>
}

const expectStatus = (response: { status: number; body: any }, status: number, what: string) => {
  if (response.status !== status) throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`)
}

export const readyConnector = async (scion: Scion, input: ReadyConnectorInput): Promise<ReadyConnector> => {
  const created = await scion.request("POST", "/v1/connectors", {
    token: input.memberToken,
    body: {
      org_id: input.orgId,
      service_name: "postgresql",
      name: input.name ?? "engine source",
      connection_details: input.source.details(input.database !== undefined ? { database: input.database } : {})
    }
  })
  expectStatus(created, 200, "create connector")
  const connectorId = created.body.connector_id as string
  const discovered = await scion.request("POST", `/v1/connectors/${connectorId}/discover`, { token: input.memberToken })
  expectStatus(discovered, 202, "discover")
  const discovery = await settleOperation(scion, discovered.body.operation_id, input.memberToken)
  if (discovery.status !== "completed") throw new Error(`discovery: ${JSON.stringify(discovery)}`)
  const selected = await scion.request("POST", `/v1/connectors/${connectorId}/selection`, {
    token: input.adminToken,
    body: { selected_paths: input.selectedPaths ?? ["*"] }
  })
  expectStatus(selected, 200, "selection")
  const missing: ReadonlyArray<string> = selected.body.replica_identity_preflight?.tables_without_replica_identity ?? []
  if (missing.length > 0 || input.decisions !== undefined) {
    const decisions = input.decisions ?? Object.fromEntries(missing.map((path) => [path, "replica_identity_full"]))
    const decided = await scion.request("PUT", `/v1/connectors/${connectorId}/replica-identity-decisions`, { token: input.adminToken, body: { decisions } })
    expectStatus(decided, 200, "decisions")
  }
  const started = await scion.request("POST", `/v1/connectors/${connectorId}/engine-setup`, { token: input.memberToken })
  expectStatus(started, 202, "engine-setup")
  const setupOperation = await settleOperation(scion, started.body.operation_id, input.memberToken, 300_000)
  if (setupOperation.status !== "completed") throw new Error(`engine setup: ${JSON.stringify(setupOperation)}`)
  return { connectorId, setupOperation }
}

/** The local adapter's record of a connector's engine (host, port, superuser password). */
export const engineRecordOf = async (scion: Scion, connectorId: string): Promise<{ host: string; port: number; username: string; password: string }> =>
  JSON.parse(await readFile(join(scion.engineDataDir, connectorId, "engine.json"), "utf8"))

/** Runs SQL on a database of a connector's engine as its superuser, over TLS. */
export const queryEngine = async (scion: Scion, connectorId: string, sql: string, values: ReadonlyArray<unknown> = [], database = "mirror") => {
  const record = await engineRecordOf(scion, connectorId)
  const client = new pg.Client({ host: record.host, port: record.port, user: record.username, password: record.password, database, ssl: { rejectUnauthorized: false } })
  await client.connect()
  try {
    return await client.query(sql, [...values])
  } finally {
    await client.end()
  }
}

/** Whether the local engines get a PgBouncer (Debian's, where the connector unit looks for it). */
export const hasPgbouncer = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer", "/usr/local/sbin/pgbouncer"].some((path) => existsSync(path))
