#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Config, Effect, Layer } from "effect"
import { telemetry, NatsBus, serveUnitLayer, unitTransport } from "@scion/kit"
import { branchLive, branchRoutes } from "./index.js"

/**
 * The unit over HTTP/2 gRPC: identity at IDENTITY_URL, the operation unit at OPERATION_URL, the
 * connector unit at CONNECTOR_URL (EngineAccessService), billing at BILLING_URL (plan limits) and NATS at NATS_URL (its jobs;
 * every stream and subject prefixed with BUS_NAMESPACE when set).
 */
const BranchProcess = Layer.unwrapScoped(
  Effect.gen(function* () {
    const identityUrl = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
    const operationUrl = yield* Config.string("OPERATION_URL").pipe(Config.withDefault("http://127.0.0.1:50052"))
    const connectorUrl = yield* Config.string("CONNECTOR_URL").pipe(Config.withDefault("http://127.0.0.1:50054"))
    const billingUrl = yield* Config.string("BILLING_URL").pipe(Config.withDefault("http://127.0.0.1:50053"))
    return branchLive({ identity: yield* unitTransport(identityUrl), operation: yield* unitTransport(operationUrl), connector: yield* unitTransport(connectorUrl), billing: yield* unitTransport(billingUrl) }).pipe(
      Layer.provide(NatsBus.layer({ name: "scion-branch" }))
    )
  }).pipe(Effect.orDie)
)

// gRPC on PORT (default 50055). SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the workers stop, the database pool closes.
NodeRuntime.runMain(Layer.launch(serveUnitLayer(50055, branchRoutes, BranchProcess).pipe(Layer.provide(telemetry("scion-branch")))), { disablePrettyLogger: true })
