#!/usr/bin/env node
import { NodeRuntime } from "@effect/platform-node"
import { grpcTransport, LoggingLive, serveRoutesLayer } from "@scion/kit"
import { Config, Effect, Layer } from "effect"
import { connectorLive, connectorRoutes, IdentityClient } from "./index.js"

/**
 * The unit over HTTP/2 gRPC: identity at IDENTITY_URL (authorization, verification keys, this
 * unit's service principal for SERVICE_CREDENTIAL) and billing at BILLING_URL (plan limits).
 */
const ConnectorProcess = Layer.unwrapScoped(
  Effect.gen(function* () {
    const identityUrl = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
    const billingUrl = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
    const identity = yield* grpcTransport(identityUrl)
    const billing = yield* grpcTransport(billingUrl)
    return connectorLive({ identity, billing }).pipe(Layer.provide(IdentityClient.fromTransport(identity)))
  }).pipe(Effect.orDie)
)

// gRPC on PORT (default 50054). SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the database pool closes.
NodeRuntime.runMain(
  Layer.launch(serveRoutesLayer(50054, connectorRoutes).pipe(Layer.provide(ConnectorProcess), Layer.provide(LoggingLive))),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
