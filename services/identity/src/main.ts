#!/usr/bin/env node
import { NodeRuntime } from "@effect/platform-node"
import { LoggingLive, serveRoutesLayer } from "@scion/kit"
import { Layer } from "effect"
import { IdentityLive, identityRoutes } from "./index.js"

// gRPC on PORT (default 50051); SIGTERM closes the scope: health goes NOT_SERVING, the server
// drains, the database pool closes.
NodeRuntime.runMain(
  Layer.launch(serveRoutesLayer(50051, identityRoutes).pipe(Layer.provide(IdentityLive), Layer.provide(LoggingLive))),
  // LoggingLive writes JSON lines; the pretty logger would print every line twice.
  { disablePrettyLogger: true }
)
