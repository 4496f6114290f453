import { Caller, effectService } from "@scion/kit"
import { EngineAccessService } from "@scion/proto/scion/connector/v1/engine_pb"
import { Effect, Option, Redacted } from "effect"
import { type ConnectorError, toWireError, Unauthenticated } from "../domain/errors.js"
import { EngineAccess } from "../engine/EngineAccess.js"
import { engineStatusToProto } from "./statuses.js"

const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

/** EngineAccessService as Connect routes: service principals only (EngineAccess enforces it). */
export const engineAccessRoutes = Effect.gen(function* () {
  const access = yield* EngineAccess
  return yield* effectService<typeof EngineAccessService, ConnectorError, never>(
    EngineAccessService,
    {
      getBranchingEngine: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => access.get(p, req.connectorId)), (engine) => ({
          engine: {
            connectorId: engine.connectorId,
            orgId: engine.orgId,
            branchingEngineStatus: engineStatusToProto(engine.branchingEngineStatus),
            host: engine.host,
            port: engine.port,
            superuserUsername: engine.superuserUsername,
            // Unwrapped only here, onto the wire to a service principal.
            superuserPassword: Redacted.value(engine.superuserPassword),
            mirrorDatabase: engine.mirrorDatabase,
            subscriptionNames: [...engine.subscriptionNames],
            copyLockKey: engine.copyLockKey,
            fileCopyClone: engine.fileCopyClone,
            maskingSuggestions: engine.maskingSuggestions.map((m) => ({ ...m })),
            ...(engine.pooler !== null ? { poolerHost: engine.pooler.host, poolerPort: engine.pooler.port } : {}),
            ...(engine.quarantine !== null ? { quarantine: { quarantineId: engine.quarantine.id, reason: engine.quarantine.reason, detail: engine.quarantine.detail } } : {})
          }
        })),
      getSourcePosition: (req) => Effect.map(Effect.flatMap(caller, (p) => access.sourcePosition(p, req.connectorId)), (lsn) => ({ lsn }))
    },
    toWireError
  )
})
