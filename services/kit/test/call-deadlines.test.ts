import { describe, expect, it } from "@effect/vitest"
import { BillingService } from "@scion/proto/scion/billing/v1/billing_pb"
import { OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option, Schema } from "effect"
import {
  BillingUnavailable,
  http2Transport,
  listenHttp2,
  makeUnitOperations,
  OperationClient,
  planAllowance,
  planLimitCheck,
  type Routes,
  ServiceIdentity
} from "../src/index.js"

class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { cause: Schema.String }) {}

/**
 * A peer that accepts the call and never answers, as a stuck unit would: each call waits for its
 * abort, and `aborted` counts the calls the caller gave up on.
 */
const stuckPeer = () => {
  let aborted = 0
  const hang = (_request: unknown, context: { signal: AbortSignal }) =>
    new Promise<never>((_, reject) =>
      context.signal.addEventListener("abort", () => {
        aborted++
        reject(context.signal.reason)
      })
    )
  const routes: Routes = (router) =>
    router.service(OperationService, { createOperation: hang, getOperation: hang }).service(BillingService, { checkEntitlement: hang })
  return { routes, aborted: () => aborted }
}

const service = ServiceIdentity.of({ serviceName: "test", token: Effect.succeed("principal") })

// Units make these calls under a row or org lock: a stuck peer must not hold the lock for long.
describe("calls units make while they hold a lock", () => {
  it.live(
    "give up on a peer that does not answer within five seconds, with the unit's own unavailable error, and abort the call",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const peer = stuckPeer()
          const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
          yield* server.install([peer.routes], Option.none())
          const transport = yield* http2Transport(server.url, "grpc")
          const operations = yield* makeUnitOperations<"branch_create", Unavailable>((cause) => new Unavailable({ cause })).pipe(
            Effect.provide(OperationClient.fromTransport(transport)),
            Effect.provideService(ServiceIdentity, service)
          )

          const [created, read] = yield* Effect.all(
            [
              Effect.flip(operations.create({ id: "op_stuck", orgId: "org_1", resourceId: "br_1", type: "branch_create" })),
              Effect.flip(operations.status("op_stuck"))
            ],
            { concurrency: "unbounded" }
          )
          for (const failure of [created, read]) {
            expect(failure).toBeInstanceOf(Unavailable)
            expect(failure.cause).toContain("DEADLINE_EXCEEDED")
          }
          const checked = yield* Effect.flip(planLimitCheck(transport, Effect.succeed("principal"))("org_1", "branches", 1))
          expect(checked).toBeInstanceOf(BillingUnavailable)
          expect((checked as BillingUnavailable).cause).toContain("DEADLINE_EXCEEDED")
          const allowance = yield* Effect.flip(planAllowance(transport, Effect.succeed("principal"))("org_1", "branches"))
          expect(allowance).toBeInstanceOf(BillingUnavailable)
          expect(allowance.cause).toContain("DEADLINE_EXCEEDED")
          // The peer saw each call end: nothing is left running on either side.
          yield* Effect.sleep("200 millis")
          expect(peer.aborted()).toBe(4)
        })
      ),
    40_000
  )
})
