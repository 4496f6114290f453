import { describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, serveHttp2 } from "@scion/kit"
import { OperationService, OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect } from "effect"
import { operationRoutes } from "../src/index.js"
import { newApiKey, newOperationId, newOrg, newOrgId, newWorker, operationTestLayer } from "./support.js"

const client = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* operationRoutes })
  return makeEffectClient(OperationService, yield* grpcTransport(served.url))
})

describe("RPC over a real port", () => {
  // Principal tokens are identity's, verified with identity's key as the unit does.
  layer(operationTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("creates, reports and reads operations with typed errors and reasons", () =>
      Effect.gen(function* () {
        const operations = yield* client
        const orgId = newOrgId()
        const worker = yield* newWorker()
        const id = newOperationId()

        expect(yield* Effect.flip(operations.getOperation({ id }))).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })

        const created = yield* worker.as(operations.createOperation({ id, orgId, type: OperationType.CONNECTOR_ENGINE_SETUP, resourceId: "con_1" }))
        expect(created.created).toBe(true)
        expect(created.operation).toMatchObject({ id, orgId, type: OperationType.CONNECTOR_ENGINE_SETUP, status: OperationStatus.PENDING, setupStatus: {} })
        expect(created.operation?.progress).toBeUndefined()
        expect(created.operation?.startedAt).toBeUndefined()

        const conflict = yield* Effect.flip(worker.as(operations.createOperation({ id, orgId, type: OperationType.BRANCH_CREATE, resourceId: "con_1" })))
        expect(conflict).toMatchObject({ code: Code.AlreadyExists, reason: "OPERATION_ID_CONFLICT", metadata: { operation_id: id } })
        const noType = yield* Effect.flip(worker.as(operations.createOperation({ id: newOperationId(), orgId, resourceId: "x" })))
        expect(noType).toMatchObject({ code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: { field: "type" } })

        const running = yield* worker.as(
          operations.reportOperation({ id, status: OperationStatus.RUNNING, stage: "setup", stageLabel: "Setting up", progress: 5, setupStatus: { step: "slot" } })
        )
        expect(running.operation).toMatchObject({ status: OperationStatus.RUNNING, stage: "setup", progress: 5, setupStatus: { step: "slot" } })
        const heartbeat = yield* worker.as(operations.reportOperation({ id }))
        expect(heartbeat.operation?.progress).toBe(5)

        const done = yield* worker.as(operations.reportOperation({ id, status: OperationStatus.COMPLETED, result: { engine: "ready", tables: 3 } }))
        expect(done.operation?.result).toEqual({ engine: "ready", tables: 3 })
        const terminal = yield* Effect.flip(worker.as(operations.reportOperation({ id, status: OperationStatus.FAILED, error: "late" })))
        expect(terminal).toMatchObject({ code: Code.FailedPrecondition, reason: "OPERATION_TERMINAL", metadata: { operation_id: id, status: "completed" } })

        const other = yield* newApiKey(yield* newOrg("Other"))
        expect(yield* Effect.flip(other.as(operations.getOperation({ id })))).toMatchObject({ code: Code.NotFound, reason: "OPERATION_NOT_FOUND" })
        expect(yield* Effect.flip(worker.as(operations.getOperation({ id, waitSeconds: 11 })))).toMatchObject({ code: Code.InvalidArgument })

        const listed = yield* worker.as(operations.listOperations({ orgId, resourceId: "con_1" }))
        expect(listed.operations.map((o) => o.id)).toEqual([id])
      })
    )
  })
})
