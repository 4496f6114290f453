import type { Transport } from "@connectrpc/connect"
import { asService, makeEffectClient, ServiceIdentity } from "@scion/kit"
import { BranchService } from "@scion/proto/scion/branch/v1/branch_pb"
import { Context, Effect, Layer, Schema } from "effect"

/** The branch unit could not drop a connector's branches; the delete is retried. */
export class BranchesUnavailable extends Schema.TaggedError<BranchesUnavailable>()("BranchesUnavailable", { reason: Schema.String }) {
  override get message() {
    return `The connector's branches could not be deleted (${this.reason})`
  }
}

/**
 * The branch unit as connector deletion uses it: a connector's branches go first (their
 * databases and roles dropped on the engine, their rows marked deleted), then the engine.
 */
export class ConnectorBranches extends Context.Tag("@scion/connector/ConnectorBranches")<
  ConnectorBranches,
  { readonly deleteAll: (connectorId: string) => Effect.Effect<number, BranchesUnavailable> }
>() {
  /** Over the branch unit's BranchService, with this unit's service principal. */
  static readonly fromTransport = (transport: Transport): Layer.Layer<ConnectorBranches, never, ServiceIdentity> =>
    Layer.effect(
      ConnectorBranches,
      Effect.gen(function* () {
        const client = makeEffectClient(BranchService, transport)
        const service = yield* ServiceIdentity
        return ConnectorBranches.of({
          deleteAll: (connectorId) =>
            asService(client.deleteConnectorBranches({ connectorId })).pipe(
              Effect.map((r) => r.deleted),
              Effect.mapError((e) => new BranchesUnavailable({ reason: `${e.codeName}: ${e.reason}` })),
              Effect.provideService(ServiceIdentity, service),
              Effect.withSpan("ConnectorBranches.deleteAll", { attributes: { connectorId } })
            )
        })
      })
    )
}
