import type { Transport } from "@connectrpc/connect"
import { asService, unitTransport, makeEffectClient, type ServiceIdentity } from "@scion/kit"
import { BillingService, Resource } from "@scion/proto/scion/billing/v1/billing_pb"
import { Config, Context, Effect, Layer } from "effect"
import { BillingUnavailable, PlanLimitReached } from "./domain/errors.js"

/** The resources this unit creates under a plan limit . */
export type LimitedResource = "environments" | "connectors"

const resources = { environments: Resource.ENVIRONMENTS, connectors: Resource.CONNECTORS } as const satisfies Record<LimitedResource, Resource>

/**
 * Asked before creating a plan-limited resource: may the org hold one more, given it holds
 * `inUse` now? Production and the embedded mode ask billing; domain tests use `unlimited` or a
 * fake.
 */
export class Entitlements extends Context.Tag("@scion/connector/Entitlements")<
  Entitlements,
  {
    readonly requireRoom: (orgId: string, resource: LimitedResource, inUse: number) => Effect.Effect<void, PlanLimitReached | BillingUnavailable>
  }
>() {
  static readonly unlimited: Layer.Layer<Entitlements> = Layer.succeed(Entitlements, Entitlements.of({ requireRoom: () => Effect.void }))

  /**
   * Billing's CheckEntitlement over a Connect transport, asked as this unit's service principal
   * (ServiceIdentity): the caller's own permission was checked here already, and an API key
   * scoped to environments only would lack billing.read.
   */
  static billing(transport: Transport): Layer.Layer<Entitlements, never, ServiceIdentity> {
    return Layer.effect(
      Entitlements,
      Effect.gen(function* () {
        const billing = makeEffectClient(BillingService, transport)
        const service = yield* Effect.context<ServiceIdentity>()
        return Entitlements.of({
          requireRoom: (orgId, resource, inUse) =>
            Effect.gen(function* () {
              const answer = yield* billing.checkEntitlement({ orgId, resource: resources[resource], inUse }).pipe(
                asService,
                Effect.provide(service),
                Effect.catchTag("RpcError", (error) =>
                  Effect.zipRight(
                    Effect.logWarning("billing could not check an entitlement").pipe(Effect.annotateLogs({ code: error.codeName, reason: error.reason })),
                    Effect.fail(new BillingUnavailable({ cause: `${error.codeName}: ${error.reason}` }))
                  )
                )
              )
              if (!answer.allowed) return yield* new PlanLimitReached({ orgId, resource, limit: answer.limit ?? inUse, planId: answer.planId })
            }).pipe(Effect.withSpan("Entitlements.requireRoom", { attributes: { orgId, resource, inUse } }))
        })
      })
    )
  }

  /** BILLING_URL (default http://127.0.0.1:50053) over HTTP/2 gRPC, scoped to the layer. */
  static readonly billingConfig: Layer.Layer<Entitlements, never, ServiceIdentity> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
      return Entitlements.billing(yield* unitTransport(url))
    }).pipe(Effect.orDie)
  )
}
