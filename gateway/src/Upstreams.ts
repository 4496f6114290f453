import type { Transport } from "@connectrpc/connect"
import { grpcTransport, makeEffectClient, type EffectClient } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { IdentityService } from "@scion/proto/scion/identity/v1/identity_pb"
import { OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Config, Context, Effect, Layer } from "effect"

/** A Connect transport to each unit the gateway talks to. */
export interface UpstreamTransports {
  /** Identity: AuthService and IdentityService. */
  readonly identity: Transport
  /** Operation: OperationService. */
  readonly operation: Transport
}

/** The units the gateway talks to, as typed Effect clients. */
export class Upstreams extends Context.Tag("@scion/gateway/Upstreams")<
  Upstreams,
  {
    readonly identity: EffectClient<typeof IdentityService>
    readonly auth: EffectClient<typeof AuthService>
    readonly operation: EffectClient<typeof OperationService>
  }
>() {
  /** Clients over any Connect transports: HTTP/2 gRPC in production, `createRouterTransport` embedded. */
  static fromTransport(transports: UpstreamTransports): Layer.Layer<Upstreams> {
    return Layer.succeed(Upstreams, {
      identity: makeEffectClient(IdentityService, transports.identity),
      auth: makeEffectClient(AuthService, transports.identity),
      operation: makeEffectClient(OperationService, transports.operation)
    })
  }

  /**
   * IDENTITY_URL (default http://127.0.0.1:50051) and OPERATION_URL (default
   * http://127.0.0.1:50052), each over an HTTP/2 gRPC transport scoped to the layer.
   */
  static readonly layerConfig: Layer.Layer<Upstreams> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const identityUrl = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
      const operationUrl = yield* Config.string("OPERATION_URL").pipe(Config.withDefault("http://127.0.0.1:50052"))
      return Upstreams.fromTransport({ identity: yield* grpcTransport(identityUrl), operation: yield* grpcTransport(operationUrl) })
    }).pipe(Effect.orDie)
  )
}
