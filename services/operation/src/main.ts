#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { telemetry, NatsBus, serveUnitLayer } from "@scion/kit"
import { Layer } from "effect"
import { IdentityClient, OperationChanges, OperationLive, operationRoutes } from "./index.js"

// gRPC on PORT (default 50052). Identity at IDENTITY_URL answers authorization and the
// verification keys; change announcements go over core NATS at NATS_URL. SIGTERM closes the
// scope: health goes NOT_SERVING, the server drains, the sweeper stops, NATS drains, the pool closes.
NodeRuntime.runMain(
  Layer.launch(
    serveUnitLayer(
      50052,
      operationRoutes,
      OperationLive.pipe(
        // The bus carries identity's access changes to the grant cache.
        Layer.provide(Layer.merge(IdentityClient.layerConfig.pipe(Layer.provide(NatsBus.layer({ name: "scion-operation" }))), OperationChanges.nats))
      )
    ).pipe(Layer.provide(telemetry("scion-operation")))
  ),
  { disablePrettyLogger: true }
)
