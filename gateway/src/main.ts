#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { telemetry, serveHttp2 } from "@scion/kit"
import { Config, Effect, Layer } from "effect"
import { GatewayLive } from "./index.js"
import { Upstreams } from "./Upstreams.js"

/** grpc.health.v1 on HEALTH_PORT (default 8081); NOT_SERVING as soon as shutdown begins. */
const HealthLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const port = yield* Config.integer("HEALTH_PORT").pipe(Config.withDefault(8081))
    const served = yield* serveHttp2({ port, routes: [] })
    yield* Effect.logInfo("serving gRPC health").pipe(Effect.annotateLogs({ port: served.port }))
  }).pipe(Effect.orDie)
)

const MainLive = Layer.mergeAll(GatewayLive, HealthLive).pipe(Layer.provide(Upstreams.layerConfig), Layer.provide(telemetry("scion-gateway")))

// LoggingLive writes JSON lines; runMain's pretty logger would print every line twice.
NodeRuntime.runMain(Layer.launch(MainLive), { disablePrettyLogger: true })
