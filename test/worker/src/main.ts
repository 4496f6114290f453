#!/usr/bin/env node
import { NodeRuntime } from "@effect/platform-node"
import { unitTransport, JobWorker, LoggingLive, NatsBus, OperationClient, OutboxRelay, ServiceIdentity, unitDatabase } from "@scion/kit"
import { Config, Duration, Effect, Layer, Option } from "effect"
import { copyTable } from "./CopyTable.js"

/**
 * The copier: a stand-in for a unit with background work, used by the crash tests and the
 * operations bench. Its own schema holds the outbox the starting side writes jobs into, the relay
 * publishes them, and the worker runs them against the operation unit with a service principal.
 */
const WorkerLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const ackWaitMs = yield* Config.integer("WORKER_ACK_WAIT_MS").pipe(Config.withDefault(30_000))
    const heartbeatMs = yield* Config.integer("WORKER_HEARTBEAT_MS").pipe(Config.withDefault(10_000))
    const maxAttempts = yield* Config.integer("WORKER_MAX_ATTEMPTS").pipe(Config.withDefault(5))
    const backoffMs = yield* Config.integer("WORKER_BACKOFF_MS").pipe(Config.withDefault(1000))
    const concurrency = yield* Config.integer("WORKER_CONCURRENCY").pipe(Config.withDefault(4))
    return JobWorker.layer({
      ...copyTable("copier"),
      ackWait: Duration.millis(ackWaitMs),
      heartbeatInterval: Duration.millis(heartbeatMs),
      maxAttempts,
      backoff: [Duration.millis(backoffMs)],
      concurrency
    })
  }).pipe(Effect.orDie)
)

const Identity = Layer.unwrapScoped(
  Effect.gen(function* () {
    const url = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
    return ServiceIdentity.layer("copier", yield* unitTransport(url))
  }).pipe(Effect.orDie)
)

const BusLive = Layer.unwrapEffect(
  Effect.map(Effect.orDie(Config.option(Config.string("BUS_NAMESPACE"))), (namespace) =>
    NatsBus.layer({ name: "scion-copier", ...(Option.isSome(namespace) ? { namespace: namespace.value } : {}) })
  )
)

const Database = unitDatabase({ schema: "copier", migrations: new URL("../migrations/", import.meta.url) })

NodeRuntime.runMain(
  Layer.launch(
    Layer.mergeAll(WorkerLive, OutboxRelay.layer()).pipe(
      Layer.provide(Layer.mergeAll(Identity, OperationClient.layerConfig, BusLive, Database)),
      Layer.provide(LoggingLive)
    )
  ),
  { disablePrettyLogger: true }
)
