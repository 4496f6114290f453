import type { Transport } from "@connectrpc/connect"
import { unitTransport, makeEffectClient, Principal, PrincipalSigner, withPrincipalToken } from "@scion/kit"
import { BillingService, Resource } from "@scion/proto/scion/billing/v1/billing_pb"
import { Clock, Config, Context, Effect, Layer } from "effect"
import { BillingUnavailable, PlanLimitReached } from "./domain/errors.js"

/** The resources identity creates under a plan limit. */
export type LimitedResource = "projects"

const resources = { projects: Resource.PROJECTS } as const satisfies Record<LimitedResource, Resource>

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
        const billing = makeEffectClient(BillingService, transport)
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
        return Entitlements.of({
          requireRoom: (orgId, resource, inUse) =>
            Effect.gen(function* () {
              const token = yield* serviceToken
              const answer = yield* billing.checkEntitlement({ orgId, resource: resources[resource], inUse }).pipe(
                withPrincipalToken(token),
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
  static readonly billingConfig: Layer.Layer<Entitlements, never, PrincipalSigner> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
      return Entitlements.billing(yield* unitTransport(url))
    }).pipe(Effect.orDie)
  )
}
