import type { Transport } from "@connectrpc/connect"
import { asService, Code, isTransient, makeEffectClient, type RpcError, ServiceIdentity } from "@scion/kit"
import { BranchingEngineStatus } from "@scion/proto/scion/connector/v1/connector_pb"
import { EngineAccessService } from "@scion/proto/scion/connector/v1/engine_pb"
import { Context, Effect, Layer, Option, Redacted, Schedule } from "effect"
import { ConnectorNotFound, EngineAccessUnavailable } from "../domain/errors.js"
import { isMaskingMethod, type MaskingRule } from "../domain/models.js"

/** The connector's branching_engine_status; `unknown` when the answer left it unset (never branchable). */
export type EngineStatus = "not_set_up" | "setting_up" | "ready" | "degraded" | "failed_validation" | "failed" | "unknown"

const engineStatuses = {
  [BranchingEngineStatus.UNSPECIFIED]: "unknown",
  [BranchingEngineStatus.NOT_SET_UP]: "not_set_up",
  [BranchingEngineStatus.SETTING_UP]: "setting_up",
  [BranchingEngineStatus.READY]: "ready",
  [BranchingEngineStatus.DEGRADED]: "degraded",
  [BranchingEngineStatus.FAILED_VALIDATION]: "failed_validation",
  [BranchingEngineStatus.FAILED]: "failed"
} as const satisfies Record<BranchingEngineStatus, EngineStatus>

/** A connector's branching engine as the branch unit uses it (EngineAccessService.GetBranchingEngine). */
export interface BranchingEngine {
  readonly connectorId: string
  readonly orgId: string
  /** "ready" means branchable. */
  readonly status: EngineStatus
  readonly host: string
  readonly port: number
  readonly superuser: { readonly username: string; readonly password: Redacted.Redacted<string> }
  readonly mirrorDatabase: string
  readonly subscriptionNames: ReadonlyArray<string>
  /** The advisory lock to hold over pause + copy + resume, as the connector names it (engine.proto). */
  readonly copyLockKey: string
  readonly fileCopyClone: boolean
  readonly pooler: Option.Option<{ readonly host: string; readonly port: number }>
  /** What discovery suggests masking, by column name, for the selected tables. */
  readonly maskingSuggestions: ReadonlyArray<MaskingRule>
  /** The open quarantine of the replication (a degraded engine). */
  readonly quarantine: Option.Option<{ readonly id: string; readonly reason: string; readonly detail: string }>
}

/**
 * Whether branches can be cut: a ready engine, or a degraded one (replication quarantined, the
 * mirror possibly stale) when the caller accepts stale data.
 */
export const isBranchable = (engine: BranchingEngine, options: { readonly allowStale: boolean } = { allowStale: false }) =>
  (engine.status === "ready" || (engine.status === "degraded" && options.allowStale)) && engine.host !== "" && engine.port > 0 && engine.mirrorDatabase !== "" && engine.copyLockKey !== ""

/** The connector unit restarting or briefly unreachable: asked again for up to 3 seconds. */
const retryTransient = <A, R>(call: Effect.Effect<A, RpcError, R>) =>
  Effect.retry(call, { while: isTransient, schedule: Schedule.exponential("50 millis").pipe(Schedule.upTo("3 seconds")) })

/** NotFound is the connector's absence; anything else, the connector unit unavailable. */
const failureOf = (connectorId: string, error: RpcError): Effect.Effect<never, ConnectorNotFound | EngineAccessUnavailable> =>
  error.code === Code.NotFound
    ? Effect.fail(new ConnectorNotFound({ connectorId }))
    : Effect.fail(new EngineAccessUnavailable({ cause: `${error.codeName}: ${error.reason} ${error.message}` }))

/**
 * The connector unit's answer about a connector's engine, asked with this unit's service
 * principal (the answer carries the engine's superuser credentials, so only services may ask).
 * An unknown connector is ConnectorNotFound; the connector unit unreachable is
 * EngineAccessUnavailable (retried briefly first).
 */
export class Engines extends Context.Tag("@scion/branch/Engines")<
  Engines,
  {
    readonly get: (connectorId: string) => Effect.Effect<BranchingEngine, ConnectorNotFound | EngineAccessUnavailable>
    /** The source's current WAL position (read-your-writes branches). */
    readonly sourcePosition: (connectorId: string) => Effect.Effect<string, ConnectorNotFound | EngineAccessUnavailable>
  }
>() {
  static fromTransport(transport: Transport): Layer.Layer<Engines, never, ServiceIdentity> {
    return Layer.effect(
      Engines,
      Effect.gen(function* () {
        const client = makeEffectClient(EngineAccessService, transport)
        const service = yield* ServiceIdentity
        return Engines.of({
          get: (connectorId) =>
            asService(client.getBranchingEngine({ connectorId })).pipe(
              retryTransient,
              Effect.flatMap((response) => {
                const e = response.engine
                if (e === undefined) return Effect.fail(new EngineAccessUnavailable({ cause: "the connector unit answered without an engine" }))
                return Effect.succeed<BranchingEngine>({
                  connectorId: e.connectorId,
                  orgId: e.orgId,
                  status: engineStatuses[e.branchingEngineStatus],
                  host: e.host,
                  port: e.port,
                  superuser: { username: e.superuserUsername, password: Redacted.make(e.superuserPassword) },
                  mirrorDatabase: e.mirrorDatabase,
                  subscriptionNames: e.subscriptionNames,
                  copyLockKey: e.copyLockKey,
                  fileCopyClone: e.fileCopyClone,
                  pooler: e.poolerHost !== undefined && e.poolerHost !== "" && e.poolerPort !== undefined ? Option.some({ host: e.poolerHost, port: e.poolerPort }) : Option.none(),
                  maskingSuggestions: e.maskingSuggestions.flatMap((m) =>
                    isMaskingMethod(m.method) ? [{ schema: m.schema, table: m.table, column: m.column, method: m.method }] : []
                  ),
                  quarantine: e.quarantine === undefined ? Option.none() : Option.some({ id: e.quarantine.quarantineId, reason: e.quarantine.reason, detail: e.quarantine.detail })
                })
              }),
              Effect.catchTag("RpcError", (error: RpcError) => failureOf(connectorId, error)),
              Effect.provideService(ServiceIdentity, service),
              Effect.withSpan("Engines.get", { attributes: { connectorId } })
            ),
          sourcePosition: (connectorId) =>
            asService(client.getSourcePosition({ connectorId })).pipe(
              retryTransient,
              Effect.map((response) => response.lsn),
              Effect.catchTag("RpcError", (error: RpcError) => failureOf(connectorId, error)),
              Effect.provideService(ServiceIdentity, service),
              Effect.withSpan("Engines.sourcePosition", { attributes: { connectorId } })
            )
        })
      })
    )
  }
}
