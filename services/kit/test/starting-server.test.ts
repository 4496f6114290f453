import { describe, expect, it } from "@effect/vitest"
import { OperationService, OperationStatus } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option } from "effect"
import { Code, http2Transport, listenHttp2, makeEffectClient, type Routes } from "../src/index.js"

/** A stand-in unit's routes: GetOperation answers one fixed operation. */
const routes: Routes = (router) =>
  router.service(OperationService, { getOperation: (request) => ({ operation: { id: request.id, status: OperationStatus.RUNNING } }) })

describe("a unit's server while the unit starts", () => {
  for (const protocol of ["grpc", "connect"] as const) {
    it.scoped(`answers the unit's methods UNAVAILABLE over ${protocol} until its routes are installed, then serves them`, () =>
      Effect.gen(function* () {
        const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
        const client = makeEffectClient(OperationService, yield* http2Transport(server.url, protocol))
        // Not a 404 (callers take an unknown method for a bug): a state they retry.
        expect(yield* Effect.flip(client.getOperation({ id: "op_starting" }))).toMatchObject({ code: Code.Unavailable })
        yield* server.install([routes], Option.none())
        expect((yield* client.getOperation({ id: "op_ready" })).operation).toMatchObject({ id: "op_ready", status: OperationStatus.RUNNING })
        // Once installed, a method nobody serves is what it is: unimplemented, not unavailable.
        expect((yield* Effect.flip(client.listOperations({ orgId: "org_1", resourceId: "br_1" }))).code).toBe(Code.Unimplemented)
      })
    )
  }
})
