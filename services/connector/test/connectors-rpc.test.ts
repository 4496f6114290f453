/**
 * ConnectorService on a real HTTP/2 port: details travel as a protobuf Struct, failures as Connect
 * codes with ErrorInfo reasons, and a failed gate carries the whole report in its metadata (what
 * the gateway answers as 422). One throwaway source cluster without logical WAL.
 */
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, serveHttp2 } from "@scion/kit"
import { ConnectorService, PreflightCheckStatus } from "@scion/proto/scion/connector/v1/connector_pb"
import { Effect } from "effect"
import { startSourceCluster, type SourceCluster } from "../../../test/support/sourceCluster.js"
import { connectorRoutes } from "../src/index.js"
import { as, connectorTestLayer, newOrgId, session } from "./support.js"


let replica: SourceCluster
beforeAll(async () => {
  replica = await startSourceCluster({ logical: false })
}, 120_000)
afterAll(async () => {
  await replica?.stop()
})

const client = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* connectorRoutes })
  return makeEffectClient(ConnectorService, yield* grpcTransport(served.url))
})

describe("ConnectorService over a real port", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("serves every RPC with typed errors, reasons and metadata", () =>
      Effect.gen(function* () {
        const connectors = yield* client
        const orgId = (yield* newOrgId())
        const member = yield* session({ [orgId]: "member" })
        const viewer = yield* session({ [orgId]: "viewer" })
        const details = replica.details() as Record<string, string | number>

        expect(yield* Effect.flip(connectors.listConnectors({ orgId }))).toMatchObject({ code: Code.Unauthenticated })
        const report = yield* as(member)(connectors.preflight({ orgId, serviceName: "postgresql", connectionDetails: details }))
        expect(report.report).toMatchObject({ preflightPass: false, provider: "vanilla" })
        expect(report.report!.checks.find((c) => c.id === "wal_level")).toMatchObject({ status: PreflightCheckStatus.FAIL, remedy: expect.stringContaining("logical") })
        expect(yield* Effect.flip(as(member)(connectors.preflight({ orgId, serviceName: "oracle", connectionDetails: {} })))).toMatchObject({
          code: Code.InvalidArgument,
          reason: "UNSUPPORTED_SERVICE",
          metadata: { service_name: "oracle" }
        })
        expect(yield* Effect.flip(as(member)(connectors.preflight({ orgId, serviceName: "postgresql" })))).toMatchObject({ code: Code.InvalidArgument, reason: "INVALID_CONNECTION_DETAILS" })
        expect(yield* Effect.flip(as(viewer)(connectors.preflight({ orgId, serviceName: "postgresql", connectionDetails: details })))).toMatchObject({
          code: Code.PermissionDenied,
          reason: "PERMISSION_DENIED",
          metadata: { permission: "connectors.create" }
        })

        const refused = yield* Effect.flip(as(member)(connectors.createConnector({ orgId, serviceName: "postgresql", connectionDetails: details })))
        expect(refused).toMatchObject({ code: Code.FailedPrecondition, reason: "PREFLIGHT_FAILED" })
        expect(JSON.parse(refused.metadata.preflight_report!)).toMatchObject({ preflight_pass: false, checks: expect.arrayContaining([expect.objectContaining({ id: "wal_level", status: "fail" })]) })

        const created = yield* as(member)(connectors.createConnector({ orgId, serviceName: "postgresql", connectionDetails: details, byoc: "self_managed" }))
        expect(created.connector).toMatchObject({ orgId, serviceName: "postgresql", connectorCategory: "database", byoc: "self_managed", canUpdate: true, canDelete: false })
        expect(created.connector!.schemaStructure).toBeUndefined()
        const id = created.connector!.connectorId
        expect((yield* as(viewer)(connectors.getConnector({ connectorId: id }))).connector).toMatchObject({ connectorId: id, canUpdate: false, needsReindex: false })
        expect((yield* as(member)(connectors.getConnectionDetails({ connectorId: id }))).connectionDetails).toEqual({ ...details, databases: ["postgres"] })
        expect(yield* Effect.flip(as(viewer)(connectors.getConnectionDetails({ connectorId: id })))).toMatchObject({ code: Code.PermissionDenied })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        expect(yield* Effect.flip(as(stranger)(connectors.getConnector({ connectorId: id })))).toMatchObject({ code: Code.NotFound, reason: "CONNECTOR_NOT_FOUND", metadata: { connector_id: id } })
        expect((yield* as(member)(connectors.updateConnector({ connectorId: id, name: "renamed" }))).connector?.name).toBe("renamed")
        expect((yield* as(viewer)(connectors.listConnectors({ orgId, connectorCategory: "database" }))).connectors.map((c) => c.connectorId)).toEqual([id])
      })
    )
  })
})
