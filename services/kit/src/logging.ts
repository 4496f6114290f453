import { Config, Effect, Layer, Logger, LogLevel } from "effect"

/**
 * JSON lines on stdout, one object per log call, at the level named by LOG_LEVEL (default Info).
 * Secrets never reach a log: values we log are ids and reasons, and Redacted values render as
 * <redacted>.
 */
export const LoggingLive: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const level = yield* Config.logLevel("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))
    return Layer.merge(Logger.json, Logger.minimumLogLevel(level))
  }).pipe(Effect.orDie)
)
