import { Cause, Config, ConfigError, Effect, Either, FiberRefs, HashMap, Layer, Logger, LogLevel, Option } from "effect"
import { CurrentRequestId } from "./request-id.js"

/** A log level by name, case-insensitive: Effect's literals (Warning, Info, …) or labels (WARN, OFF, …). */
const logLevelConfig = (name: string): Config.Config<LogLevel.LogLevel> =>
  Config.mapOrFail(Config.string(name), (value) => {
    const wanted = value.trim().toUpperCase()
    const level = LogLevel.allLevels.find((l) => l._tag.toUpperCase() === wanted || l.label === wanted)
    return level === undefined
      ? Either.left(ConfigError.InvalidData([], `Expected a log level (${LogLevel.allLevels.map((l) => l._tag).join(", ")}) but received ${value}`))
      : Either.right(level)
  })

/**
 * Effect's JSON logger, except that a line logged with a cause and no message (a fatal error
 * as runMain reports it) says what failed instead of `"message": []`.
 */
const jsonWithMessages = Logger.jsonLogger.pipe(
  Logger.mapInputOptions((options) => {
    const empty = options.message === undefined || (Array.isArray(options.message) && options.message.length === 0)
    if (!empty || Cause.isEmpty(options.cause)) return options
    const squashed = Cause.squash(options.cause)
    const what = squashed instanceof Error ? squashed.message : String(squashed)
    return { ...options, message: `fatal: ${what}` }
  }),
  // The request's id is read when a line is written, not annotated on every request and call:
  // most requests write no line, and the annotation cost each one a log-annotation map.
  Logger.mapInputOptions((options) => {
    const requestId = FiberRefs.getOrDefault(options.context, CurrentRequestId)
    return Option.isNone(requestId) || HashMap.has(options.annotations, "request_id") ? options : { ...options, annotations: HashMap.set(options.annotations, "request_id", requestId.value) }
  })
)

/**
 * JSON lines on stdout, one object per log call, at the level named by LOG_LEVEL (default Info).
 * Secrets never reach a log: values we log are ids and reasons, and Redacted values render as
 * <redacted>. Spans are recorded only when a tracer exports them (tracing.ts, `TelemetryLive`):
 * each one (with its captured stack) was a measurable share of a request's CPU in the bench profiles.
 */
export const LoggingLive: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const level = yield* logLevelConfig("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))
    return Layer.mergeAll(Logger.replace(Logger.defaultLogger, Logger.withConsoleLog(jsonWithMessages)), Logger.minimumLogLevel(level))
  }).pipe(Effect.orDie)
)
