#!/usr/bin/env node
import { NodeRuntime } from "@effect/platform-node"
import { LoggingLive, NatsBus, serveRoutesLayer } from "@scion/kit"
import { Layer } from "effect"
import { IdentityEventsRelay, IdentityLive, identityRoutes } from "./index.js"

// gRPC on PORT (default 50051); SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the database pool closes. The outbox relay publishes identity's events to NATS (NATS_URL).
NodeRuntime.runMain(
  Layer.launch(
    Layer.mergeAll(
      serveRoutesLayer(50051, identityRoutes).pipe(Layer.provide(IdentityLive)),
      IdentityEventsRelay.pipe(Layer.provide(NatsBus.layer()))
    ).pipe(Layer.provide(LoggingLive))
  ),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
