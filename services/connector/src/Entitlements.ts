import type { Transport } from "@connectrpc/connect"
import { type BillingUnavailable, planLimitCheck, type PlanLimitReached, ServiceIdentity, unitTransport } from "@scion/kit"
import { Config, Context, Effect, Layer } from "effect"

/** The resources this unit creates under a plan limit . */
export type LimitedResource = "environments" | "connectors"


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
      Effect.map(ServiceIdentity, (service) => Entitlements.of({ requireRoom: planLimitCheck(transport, service.token) }))
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
