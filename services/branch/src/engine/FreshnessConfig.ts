import { Config, Duration, Effect, Layer } from "effect"

/** BRANCH_CATCH_UP_TIMEOUT (default 60 s): how long a read-your-writes create waits for the mirror. */
export class FreshnessConfig extends Effect.Tag("@scion/branch/FreshnessConfig")<FreshnessConfig, { readonly catchUpTimeout: Duration.Duration }>() {
  static readonly layerConfig: Layer.Layer<FreshnessConfig> = Layer.effect(
    FreshnessConfig,
    Effect.map(Config.duration("BRANCH_CATCH_UP_TIMEOUT").pipe(Config.withDefault(Duration.seconds(60)), Effect.orDie), (catchUpTimeout) => ({ catchUpTimeout }))
  )
}
