import { Config, Effect } from "effect"

/** Every setting of the operation unit, read once. */
export const operationConfig = Config.all({
  /** How often each replica looks for running operations whose worker went silent. */
  sweepIntervalSeconds: Config.number("OPERATION_SWEEP_INTERVAL_SECONDS").pipe(Config.withDefault(15)),
  /** A running operation with no report for longer than this is failed by the sweeper. */
  heartbeatDeadlineSeconds: Config.number("OPERATION_HEARTBEAT_DEADLINE_SECONDS").pipe(Config.withDefault(120)),
  /** A waiting GetOperation re-reads the row at least this often, should an announcement be lost. */
  waitRecheckSeconds: Config.number("OPERATION_WAIT_RECHECK_SECONDS").pipe(Config.withDefault(5))
})

export class OperationConfig extends Effect.Service<OperationConfig>()("@scion/operation/OperationConfig", {
  effect: operationConfig
}) {}
