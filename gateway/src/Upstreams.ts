import type { Transport } from "@connectrpc/connect"
import { grpcTransport, makeEffectClient, type EffectClient } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { IdentityService } from "@scion/proto/scion/identity/v1/identity_pb"
import { Config, Context, Effect, Layer } from "effect"

/** The units the gateway talks to, as typed Effect clients. Identity answers both services. */
export class Upstreams extends Context.Tag("@scion/gateway/Upstreams")<
  Upstreams,
  {
    readonly identity: EffectClient<typeof IdentityService>
    readonly auth: EffectClient<typeof AuthService>
  }
>() {
  /** Clients over any Connect transport: HTTP/2 gRPC in production, `createRouterTransport` embedded. */
  static fromTransport(transport: Transport): Layer.Layer<Upstreams> {
    return Layer.succeed(Upstreams, {
      identity: makeEffectClient(IdentityService, transport),
      auth: makeEffectClient(AuthService, transport)
    })
  }

  /** IDENTITY_URL (default http://127.0.0.1:50051), over an HTTP/2 gRPC transport scoped to the layer. */
  static readonly layerConfig: Layer.Layer<Upstreams> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
      return Upstreams.fromTransport(yield* grpcTransport(url))
    }).pipe(Effect.orDie)
  )
}
