import { generateKeyPairSync } from "node:crypto"
import { describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, type Principal, PrincipalSigner, PrincipalVerifier, serveHttp2, withPrincipalToken } from "@scion/kit"
import { OperationService, OperationStatus, OperationType } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Layer } from "effect"
import { operationRoutes } from "../src/index.js"
import { apiKeyPrincipal, newOperationId, newOrgId, operationTestLayer } from "./support.js"

const signer = PrincipalSigner.fromPrivateKey(generateKeyPairSync("ed25519").privateKey)
const Verifier = Layer.succeed(PrincipalVerifier, PrincipalVerifier.fromPublicKeys([{ keyId: signer.keyId, publicKeyDer: signer.publicKeyDer }]))
const as = (principal: Principal) => withPrincipalToken(signer.sign(principal))

const client = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* operationRoutes })
  return makeEffectClient(OperationService, yield* grpcTransport(served.url))
})

describe("RPC over a real port", () => {
  layer(Layer.merge(operationTestLayer(), Verifier), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("creates, reports and reads operations with typed errors and reasons", () =>
      Effect.gen(function* () {
        const operations = yield* client
        const orgId = newOrgId()
        const principal = apiKeyPrincipal(orgId)
        const id = newOperationId()

        expect(yield* Effect.flip(operations.getOperation({ id }))).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })

        const created = yield* as(principal)(operations.createOperation({ id, orgId, type: OperationType.CONNECTOR_ENGINE_SETUP, resourceId: "con_1" }))
        expect(created.created).toBe(true)
        expect(created.operation).toMatchObject({ id, orgId, type: OperationType.CONNECTOR_ENGINE_SETUP, status: OperationStatus.PENDING, setupStatus: {} })
        expect(created.operation?.progress).toBeUndefined()
        expect(created.operation?.startedAt).toBeUndefined()

        const conflict = yield* Effect.flip(as(principal)(operations.createOperation({ id, orgId, type: OperationType.BRANCH_CREATE, resourceId: "con_1" })))
        expect(conflict).toMatchObject({ code: Code.AlreadyExists, reason: "OPERATION_ID_CONFLICT", metadata: { operation_id: id } })
        const noType = yield* Effect.flip(as(principal)(operations.createOperation({ id: newOperationId(), orgId, resourceId: "x" })))
        expect(noType).toMatchObject({ code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", metadata: { field: "type" } })

        const running = yield* as(principal)(
          operations.reportOperation({ id, status: OperationStatus.RUNNING, stage: "setup", stageLabel: "Setting up", progress: 5, setupStatus: { step: "slot" } })
        )
        expect(running.operation).toMatchObject({ status: OperationStatus.RUNNING, stage: "setup", progress: 5, setupStatus: { step: "slot" } })
        const heartbeat = yield* as(principal)(operations.reportOperation({ id }))
        expect(heartbeat.operation?.progress).toBe(5)

        const done = yield* as(principal)(operations.reportOperation({ id, status: OperationStatus.COMPLETED, result: { engine: "ready", tables: 3 } }))
        expect(done.operation?.result).toEqual({ engine: "ready", tables: 3 })
        const terminal = yield* Effect.flip(as(principal)(operations.reportOperation({ id, status: OperationStatus.FAILED, error: "late" })))
        expect(terminal).toMatchObject({ code: Code.FailedPrecondition, reason: "OPERATION_TERMINAL", metadata: { operation_id: id, status: "completed" } })

        const other = apiKeyPrincipal(newOrgId())
        expect(yield* Effect.flip(as(other)(operations.getOperation({ id })))).toMatchObject({ code: Code.NotFound, reason: "OPERATION_NOT_FOUND" })
        expect(yield* Effect.flip(as(principal)(operations.getOperation({ id, waitSeconds: 11 })))).toMatchObject({ code: Code.InvalidArgument })

        const listed = yield* as(principal)(operations.listOperations({ orgId, resourceId: "con_1" }))
        expect(listed.operations.map((o) => o.id)).toEqual([id])
      })
    )
  })
})
