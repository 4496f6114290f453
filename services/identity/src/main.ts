#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { telemetry, NatsBus, serveUnitLayer } from "@scion/kit"
import { Layer } from "effect"
import { IdentityAccessFollower, IdentityEventsRelay, IdentityLive, identityRoutes } from "./index.js"

// gRPC on PORT (default 50051); SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the database pool closes. The outbox relay publishes identity's events to NATS (NATS_URL),
// where the standing caches hear the access changes other replicas commit.
NodeRuntime.runMain(
  Layer.launch(
    Layer.mergeAll(serveUnitLayer(50051, identityRoutes, Layer.provideMerge(IdentityAccessFollower, IdentityLive)), IdentityEventsRelay).pipe(
      Layer.provide(NatsBus.layer({ name: "scion-identity" })),
      Layer.provide(telemetry("scion-identity"))
    )
  ),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
