#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { telemetry, NatsBus, serveUnitLayer } from "@scion/kit"
import { Layer } from "effect"
import { BillingLive, billingRoutes, IdentityClient } from "./index.js"

// gRPC on PORT (default 50053). Identity at IDENTITY_URL answers authorization and the
// verification keys; org events come from NATS JetStream at NATS_URL. The consumer is running
// before the server listens. SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the consumer stops (an in-flight event is nak'ed for redelivery), NATS drains, the pool closes.
NodeRuntime.runMain(
  Layer.launch(
    serveUnitLayer(50053, billingRoutes, BillingLive.pipe(Layer.provide(Layer.provideMerge(IdentityClient.layerConfig, NatsBus.layer())))).pipe(
      Layer.provide(telemetry("scion-billing"))
    )
  ),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
