import { OtlpSerialization, OtlpTracer } from "@effect/opentelemetry"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Config, Duration, Effect, FiberRef, Layer, Option, type Tracer } from "effect"
import type { YieldWrap } from "effect/Utils"
import { parseTraceparent } from "./bus/Bus.js"

/**
 * Traces, exported over OTLP/HTTP (JSON) when the standard OpenTelemetry variables say where:
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces),
 * OTEL_EXPORTER_OTLP_HEADERS (k=v,…), OTEL_SERVICE_NAME, OTEL_BSP_SCHEDULE_DELAY (ms between
 * exports), OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none. Off otherwise, and then no span is
 * recorded at all (spans cost CPU per request: the gateway bench's profile showed it).
 *
 * One trace follows a request across processes with W3C `traceparent`: the Effect clients send
 * the current span, the server bridge continues it, and a job carries the span that enqueued it.
 */
export const TRACEPARENT_HEADER = "traceparent"

/**
 * `Effect.withSpan` for the paths every request takes, and nothing at all when tracing is off.
 * With the tracer disabled, `withSpan` still captures a stack, makes a no-op span and provides it:
 * a copy of the fiber's whole Context and a FiberRef write per span, which the gateway's and the
 * operation unit's profiles showed per request.
 */
export const withSpanWhenTracing =
  (name: string, options: Tracer.SpanOptions = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(FiberRef.get(FiberRef.currentTracerEnabled), (tracing) => (tracing ? Effect.withSpan(self, name, options) : self))

/**
 * `Effect.fn(name)` for our services' functions, with the span only while tracing. Effect.fn
 * captures its call site (a new Error with a stack) and makes a span on every call, a no-op one
 * with tracing off: the operation unit's and identity's profiles showed it on every RPC.
 */
export const tracedFn =
  (name: string, options?: Tracer.SpanOptions) =>
  <Eff extends YieldWrap<Effect.Effect<any, any, any>>, AEff, Args extends Array<any>>(
    body: (...args: Args) => Generator<Eff, AEff, never>
  ): ((
    ...args: Args
  ) => Effect.Effect<
    AEff,
    [Eff] extends [never] ? never : [Eff] extends [YieldWrap<Effect.Effect<infer _A, infer E, infer _R>>] ? E : never,
    [Eff] extends [never] ? never : [Eff] extends [YieldWrap<Effect.Effect<infer _A, infer _E, infer R>>] ? R : never
  >) => {
    const span = withSpanWhenTracing(name, options)
    const untraced = Effect.fnUntraced(body)
    return (...args: Args) => span(untraced(...args))
  }

/** `name` as a span continuing `traceparent` when it carries one (server side of a call or a job). */
export const withRemoteParent =
  (name: string, traceparent: string | null | undefined, options: { readonly kind?: Tracer.SpanKind; readonly attributes?: Record<string, unknown> } = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Option.match(parseTraceparent(traceparent ?? undefined), {
      onNone: () => withSpanWhenTracing(name, options)(self),
      onSome: (parent) => withSpanWhenTracing(name, { ...options, parent })(self)
    })

const TracingConfig = Config.all({
  endpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")),
  tracesEndpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  headers: Config.string("OTEL_EXPORTER_OTLP_HEADERS").pipe(Config.withDefault("")),
  serviceName: Config.option(Config.string("OTEL_SERVICE_NAME")),
  delayMillis: Config.integer("OTEL_BSP_SCHEDULE_DELAY").pipe(Config.withDefault(5000)),
  disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  exporter: Config.string("OTEL_TRACES_EXPORTER").pipe(Config.withDefault("otlp"))
})

const headersOf = (value: string): Record<string, string> =>
  Object.fromEntries(
    value
      .split(",")
      .map((pair) => pair.split("="))
      .filter((parts) => parts.length >= 2 && parts[0]!.trim() !== "")
      .map(([key, ...rest]) => [decodeURIComponent(key!.trim()), decodeURIComponent(rest.join("=").trim())])
  )

/** Where spans are exported, when they are. */
const exportUrl = (config: Config.Config.Success<typeof TracingConfig>): Option.Option<string> =>
  config.disabled || config.exporter === "none"
    ? Option.none()
    : Option.orElse(config.tracesEndpoint, () => Option.map(config.endpoint, (base) => `${base.replace(/\/+$/, "")}/v1/traces`))

/** Whether `tracingLayer` exports spans, from the same settings (the gateway skips its HTTP spans when not). */
export const tracingConfigured: Effect.Effect<boolean> = Effect.map(Effect.orDie(TracingConfig), (config) => Option.isSome(exportUrl(config)))

/** The OTLP tracer for `serviceName` (OTEL_SERVICE_NAME wins) when configured, else no spans at all. */
export const tracingLayer = (serviceName: string): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.map(Effect.orDie(TracingConfig), (config) => {
      const url = exportUrl(config)
      if (Option.isNone(url)) return Layer.setTracerEnabled(false)
      return OtlpTracer.layer({
        url: url.value,
        resource: { serviceName: Option.getOrElse(config.serviceName, () => serviceName) },
        headers: headersOf(config.headers),
        exportInterval: Duration.millis(config.delayMillis)
      }).pipe(Layer.provide(FetchHttpClient.layer), Layer.provide(OtlpSerialization.layerJson))
    })
  )
