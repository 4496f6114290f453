#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Config, Effect, Layer } from "effect"
import { unitTransport, telemetry, NatsBus, serveUnitLayer } from "@scion/kit"
import { connectorLive, connectorRoutes, IdentityClient } from "./index.js"

/**
 * The unit over HTTP/2 gRPC: identity at IDENTITY_URL (authorization, verification keys, this
 * unit's service principal for SERVICE_CREDENTIAL), billing at BILLING_URL (plan limits), the
 * operation unit at OPERATION_URL (discovery, setup and delete operations), the branch unit at
 * BRANCH_URL (a connector's branches are deleted before it) and NATS at NATS_URL (its jobs and
 * identity's events; every stream and subject prefixed with BUS_NAMESPACE when set).
 */
const ConnectorProcess = Layer.unwrapScoped(
  Effect.gen(function* () {
    const identityUrl = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
    const billingUrl = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
    const operationUrl = yield* Config.string("OPERATION_URL").pipe(Config.withDefault("http://127.0.0.1:50052"))
    const branchUrl = yield* Config.string("BRANCH_URL").pipe(Config.withDefault("http://127.0.0.1:50055"))
    const identity = yield* unitTransport(identityUrl)
    const billing = yield* unitTransport(billingUrl)
    const operation = yield* unitTransport(operationUrl)
    const branch = yield* unitTransport(branchUrl)
    return connectorLive({ identity, billing, operation, branch }).pipe(
      Layer.provide(IdentityClient.fromTransport(identity)),
      Layer.provide(NatsBus.layer({ name: "scion-connector" }))
    )
  }).pipe(Effect.orDie)
)

// gRPC on PORT (default 50054). SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the worker stops, the database pool closes.
NodeRuntime.runMain(
  Layer.launch(serveUnitLayer(50054, connectorRoutes, ConnectorProcess).pipe(Layer.provide(telemetry("scion-connector")))),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
