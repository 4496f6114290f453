import { describe, expect, it } from "@effect/vitest"
import { OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option } from "effect"
import { Code, effectService, http2Transport, listenHttp2, makeEffectClient, PrincipalVerifier } from "../src/index.js"

describe("a unit's direct gRPC path", () => {
  it.scoped("answers INTERNAL when a handler's answer does not encode, and serves on", () =>
    Effect.gen(function* () {
      // Every method but GetOperation is a bug to call here; GetOperation answers "op_bad" with a
      // progress that is no int32 (a handler bug the types would normally catch).
      const unexpected = Object.fromEntries(Object.keys(OperationService.method).map((name) => [name, () => Effect.dieMessage(`${name} is not served here`)]))
      const impl = {
        ...unexpected,
        getOperation: (request: { readonly id: string }) =>
          Effect.succeed({ operation: { id: request.id, ...(request.id === "op_bad" ? { progress: "lots" as unknown as number } : {}) } })
      }
      const routes = yield* effectService<typeof OperationService, never, never>(OperationService, impl as never, (error: never) => error).pipe(
        Effect.provideService(PrincipalVerifier, PrincipalVerifier.of({ verify: () => Effect.dieMessage("no principal is sent here") }))
      )
      const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
      yield* server.install([routes], Option.none())
      const client = makeEffectClient(OperationService, yield* http2Transport(server.url, "grpc"))
      expect(yield* Effect.flip(client.getOperation({ id: "op_bad" }))).toMatchObject({ code: Code.Internal })
      expect((yield* client.getOperation({ id: "op_good" })).operation).toMatchObject({ id: "op_good" })
    })
  )
})
