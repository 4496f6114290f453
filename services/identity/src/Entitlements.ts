import type { Transport } from "@connectrpc/connect"
import { type BillingUnavailable, planLimitCheck, type PlanLimitReached, Principal, PrincipalSigner, unitTransport } from "@scion/kit"
import { Clock, Config, Context, Effect, Layer } from "effect"

/** The resources identity creates under a plan limit. */
export type LimitedResource = "projects"


/**
 * The port identity asks before creating a plan-limited resource: may the org hold one more,
 * given it holds `inUse` now? Production and the embedded mode ask billing (`billing`); identity's
 * own domain tests use `unlimited`.
 */
export class Entitlements extends Context.Tag("@scion/identity/Entitlements")<
  Entitlements,
  {
    readonly requireRoom: (orgId: string, resource: LimitedResource, inUse: number) => Effect.Effect<void, PlanLimitReached | BillingUnavailable>
  }
>() {
  static readonly unlimited: Layer.Layer<Entitlements> = Layer.succeed(Entitlements, Entitlements.of({ requireRoom: () => Effect.void }))

  /**
   * Billing's CheckEntitlement over any Connect transport. Identity asks as its own service
   * principal, signed with its own key: the caller's permission (projects.create) was already
   * checked here, and an API key scoped to projects only would lack billing.read.
   */
  static billing(transport: Transport): Layer.Layer<Entitlements, never, PrincipalSigner> {
    return Layer.effect(
      Entitlements,
      Effect.gen(function* () {
        const signer = yield* PrincipalSigner
        // Identity is the signer: its own service principal needs no round trip.
        const serviceToken = Effect.map(Clock.currentTimeMillis, (now) =>
          signer.sign(
            new Principal({
              kind: "service",
              service: "identity",
              userId: null,
              sessionId: null,
              apiKeyId: null,
              orgId: null,
              roleKey: null,
              permissions: [],
              exp: Math.floor(now / 1000) + 60
            })
          )
        )
        return Entitlements.of({ requireRoom: planLimitCheck(transport, serviceToken) })
      })
    )
  }

  /** BILLING_URL (default http://127.0.0.1:50053) over HTTP/2 gRPC, scoped to the layer. */
  static readonly billingConfig: Layer.Layer<Entitlements, never, PrincipalSigner> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
      return Entitlements.billing(yield* unitTransport(url))
    }).pipe(Effect.orDie)
  )
}
