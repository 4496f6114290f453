import type { Transport } from "@connectrpc/connect"
import { unitTransport, makeEffectClient, type EffectClient } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { BillingService } from "@scion/proto/scion/billing/v1/billing_pb"
import { BranchService } from "@scion/proto/scion/branch/v1/branch_pb"
import { CodeHostService } from "@scion/proto/scion/connector/v1/code_host_pb"
import { ConnectorService } from "@scion/proto/scion/connector/v1/connector_pb"
import { EnvironmentService } from "@scion/proto/scion/connector/v1/environment_pb"
import { IdentityService } from "@scion/proto/scion/identity/v1/identity_pb"
import { ProjectService } from "@scion/proto/scion/identity/v1/project_pb"
import { OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Config, Context, Effect, Layer } from "effect"

/** A Connect transport to each unit the gateway talks to. */
export interface UpstreamTransports {
  /** Identity: AuthService, IdentityService and ProjectService. */
  readonly identity: Transport
  /** Operation: OperationService. */
  readonly operation: Transport
  /** Billing: BillingService. */
  readonly billing: Transport
  /** Connector: EnvironmentService, ConnectorService and CodeHostService. */
  readonly connector: Transport
  /** Branch: BranchService. */
  readonly branch: Transport
}

/** The units the gateway talks to, as typed Effect clients. */
export class Upstreams extends Context.Tag("@scion/gateway/Upstreams")<
  Upstreams,
  {
    readonly identity: EffectClient<typeof IdentityService>
    readonly auth: EffectClient<typeof AuthService>
    readonly operation: EffectClient<typeof OperationService>
    readonly billing: EffectClient<typeof BillingService>
    readonly projects: EffectClient<typeof ProjectService>
    readonly environments: EffectClient<typeof EnvironmentService>
    readonly connectors: EffectClient<typeof ConnectorService>
    readonly codeHost: EffectClient<typeof CodeHostService>
    readonly branches: EffectClient<typeof BranchService>
  }
>() {
  /** Clients over any Connect transports: HTTP/2 gRPC in production, `createRouterTransport` embedded. */
  static fromTransport(transports: UpstreamTransports): Layer.Layer<Upstreams> {
    return Layer.succeed(Upstreams, {
      identity: makeEffectClient(IdentityService, transports.identity),
      auth: makeEffectClient(AuthService, transports.identity),
      operation: makeEffectClient(OperationService, transports.operation),
      billing: makeEffectClient(BillingService, transports.billing),
      projects: makeEffectClient(ProjectService, transports.identity),
      environments: makeEffectClient(EnvironmentService, transports.connector),
      connectors: makeEffectClient(ConnectorService, transports.connector),
      codeHost: makeEffectClient(CodeHostService, transports.connector),
      branches: makeEffectClient(BranchService, transports.branch)
    })
  }

  /**
   * IDENTITY_URL (default http://127.0.0.1:50051), OPERATION_URL (default
   * http://127.0.0.1:50052), BILLING_URL (default http://127.0.0.1:50053) and CONNECTOR_URL
   * (default http://127.0.0.1:50054) and BRANCH_URL (default http://127.0.0.1:50055), each over an HTTP/2 gRPC transport scoped to the layer.
   */
  static readonly layerConfig: Layer.Layer<Upstreams> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const identityUrl = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
      const operationUrl = yield* Config.string("OPERATION_URL").pipe(Config.withDefault("http://127.0.0.1:50052"))
      const billingUrl = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
      const connectorUrl = yield* Config.string("CONNECTOR_URL").pipe(Config.withDefault("http://127.0.0.1:50054"))
      const branchUrl = yield* Config.string("BRANCH_URL").pipe(Config.withDefault("http://127.0.0.1:50055"))
      return Upstreams.fromTransport({
        identity: yield* unitTransport(identityUrl),
        operation: yield* unitTransport(operationUrl),
        billing: yield* unitTransport(billingUrl),
        connector: yield* unitTransport(connectorUrl),
        branch: yield* unitTransport(branchUrl)
      })
    }).pipe(Effect.orDie)
  )
}
