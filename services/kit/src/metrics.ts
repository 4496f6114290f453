import { createServer } from "node:http"
import { Config, Duration, Effect, Layer, Metric, MetricBoundaries, MetricKey, type MetricKeyType, MetricLabel, MetricState, Option, Runtime, Schedule } from "effect"
import { LoggingLive } from "./logging.js"
import { tracingLayer } from "./tracing.js"

/**
 * Prometheus metrics. The units and the gateway record with Effect's `Metric`; each process serves
 * the registry in Prometheus' text format at `GET /metrics` on METRICS_PORT (HTTP/1.1, off when
 * unset: the Deployments set it). The exposition is written here from `Metric.snapshot` — a few
 * lines of a stable text format, instead of an OpenTelemetry SDK and exporter in every process.
 */

const seconds = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 16 })

const rpcRequests = MetricKey.counter("scion_rpc_server_requests_total", { description: "RPCs served, by service, method and gRPC code", incremental: true })
const rpcDuration = MetricKey.histogram("scion_rpc_server_duration_seconds", seconds, "Time to answer an RPC, by service and method")
const httpRequests = MetricKey.counter("scion_http_requests_total", { description: "REST requests answered by the gateway, by method, route and status", incremental: true })
const httpDuration = MetricKey.histogram("scion_http_request_duration_seconds", seconds, "Time to answer a REST request, by method and route")
const jobs = MetricKey.counter("scion_jobs_total", { description: "Jobs run to an outcome (completed, failed, retried, skipped), by unit and type", incremental: true })
const jobDuration = MetricKey.histogram("scion_job_duration_seconds", MetricBoundaries.exponential({ start: 0.01, factor: 2, count: 16 }), "Time a job ran, by unit and type")

const labelsOf = (tags: Record<string, string>) => Object.entries(tags).map(([key, value]) => MetricLabel.make(key, value))

const tag = <T, I, O>(metric: Metric.Metric<T, I, O>, tags: Record<string, string>): Metric.Metric<T, I, O> => Metric.taggedWithLabels(metric, labelsOf(tags))

/**
 * One series of the metrics recorded on every request, RPC and job: a metric whose key carries
 * its labels, made once per label set. A metric tagged with `Metric.taggedWithLabels` merges its
 * labels into a new array on every update, which misses Effect's cache of hooks (kept by that
 * array) and builds and hashes the labelled key again; this one finds its hook once. The label
 * sets are bounded (routes, methods, codes, job types), and so are these maps.
 */
const series = new Map<MetricKey.MetricKey<any>, Map<string, Metric.Metric<unknown, number, unknown>>>()
const seriesOf = (key: MetricKey.MetricKey<MetricKeyType.MetricKeyType<number, any>>, tags: Record<string, string>): Metric.Metric<unknown, number, unknown> => {
  let byLabels = series.get(key)
  if (byLabels === undefined) series.set(key, (byLabels = new Map()))
  const labels = Object.values(tags).join("\u0000")
  let found = byLabels.get(labels)
  if (found === undefined) byLabels.set(labels, (found = Metric.fromMetricKey(MetricKey.taggedWithLabels(key, labelsOf(tags))) as Metric.Metric<unknown, number, unknown>))
  return found
}

/** A count of one and a duration, each on its series (no fiber-level labels are used here). */
const record = (count: Metric.Metric<unknown, number, unknown>, duration: Metric.Metric<unknown, number, unknown>, elapsedSeconds: number) =>
  Effect.sync(() => {
    count.unsafeUpdate(1, [])
    duration.unsafeUpdate(elapsedSeconds, [])
  })

/** One RPC answered. */
export const recordRpc = (service: string, method: string, code: string, elapsedSeconds: number) =>
  record(seriesOf(rpcRequests, { service, method, code }), seriesOf(rpcDuration, { service, method }), elapsedSeconds)

/** One REST request answered (route: the endpoint's template, or "unmatched"). */
export const recordHttp = (method: string, route: string, status: number, elapsedSeconds: number) => Effect.sync(() => recordHttpNow(method, route, status, elapsedSeconds))

/** `recordHttp` inside a step that is already synchronous (the gateway's edge, once per request). */
export const recordHttpNow = (method: string, route: string, status: number, elapsedSeconds: number): void => {
  seriesOf(httpRequests, { method, route, status: String(status) }).unsafeUpdate(1, [])
  seriesOf(httpDuration, { method, route }).unsafeUpdate(elapsedSeconds, [])
}

/** One job delivery ran to an outcome. */
export const recordJob = (unit: string, type: string, outcome: "completed" | "failed" | "retried" | "skipped", elapsedSeconds: number) =>
  record(seriesOf(jobs, { unit, type, outcome }), seriesOf(jobDuration, { unit, type }), elapsedSeconds)

/**
 * Gauges whose series are replaced wholesale by each measurement round: a series the latest round
 * did not measure is gone from the exposition (Effect's registry never forgets a label set, so a
 * gauge per connector would keep every deleted connector's last value, and a replica that stopped
 * measuring one would keep reporting what it saw last).
 */
const roundGauges = new Map<string, { readonly help: string; series: ReadonlyArray<{ readonly labels: Record<string, string>; readonly value: number }> }>()

/** Replaces every series of a round gauge with this round's measurements. */
export const replaceRoundGauge = (name: string, help: string, series: ReadonlyArray<{ readonly labels: Record<string, string>; readonly value: number }>) =>
  Effect.sync(() => void roundGauges.set(name, { help, series: [...series] }))

/** The replication lag of every connector this replica's monitor measured in its last round, in bytes. */
export const recordReplicationLags = (lags: ReadonlyArray<{ readonly connectorId: string; readonly bytes: number }>) =>
  replaceRoundGauge(
    "scion_replication_lag_bytes",
    "How far a connector's replication slot is behind its source's WAL, in bytes (the connectors this replica's monitor measured in its last round)",
    lags.map((lag) => ({ labels: { connector_id: lag.connectorId }, value: lag.bytes }))
  )

const countGauges = new Map<string, Metric.Metric.Gauge<number>>()
const reported = new Map<string, Map<string, Record<string, string>>>()

/**
 * Sets a count gauge (e.g. `scion_operations` by type and status) from a grouped count: label sets
 * reported before and absent now go to 0, so a state that emptied does not keep its last count.
 */
export const recordCounts = (name: string, description: string, rows: ReadonlyArray<{ readonly labels: Record<string, string>; readonly count: number }>) =>
  Effect.suspend(() => {
    let gauge = countGauges.get(name)
    if (gauge === undefined) countGauges.set(name, (gauge = Metric.gauge(name, { description })))
    const previous = reported.get(name) ?? new Map<string, Record<string, string>>()
    const current = new Map(rows.map((row) => [JSON.stringify(Object.entries(row.labels).sort()), row.labels] as const))
    reported.set(name, current)
    const metric = gauge
    return Effect.all(
      [
        ...rows.map((row) => Metric.set(tag(metric, row.labels), row.count)),
        ...[...previous].filter(([key]) => !current.has(key)).map(([, labels]) => Metric.set(tag(metric, labels), 0))
      ],
      { discard: true }
    )
  })

/**
 * Runs `refresh` every METRICS_REFRESH_INTERVAL (15 s) for the life of the layer when this process serves metrics (nothing
 * otherwise: the counts cost queries nobody would read). Failures are logged and retried next round.
 */
export const refreshWhileServingMetrics = <E, R>(name: string, refresh: Effect.Effect<void, E, R>): Layer.Layer<never, never, R> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const port = yield* Config.option(Config.integer("METRICS_PORT")).pipe(Effect.orDie)
      if (Option.isNone(port) || port.value <= 0) return
      const interval = yield* Config.duration("METRICS_REFRESH_INTERVAL").pipe(Config.withDefault(Duration.seconds(15)), Effect.orDie)
      yield* refresh.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning(`refreshing ${name} failed`, cause)),
        Effect.repeat(Schedule.spaced(interval)),
        Effect.forkScoped
      )
    })
  )

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const labels = (pairs: ReadonlyArray<readonly [string, string]>) => (pairs.length === 0 ? "" : `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`)
const number = (value: number | bigint) => (typeof value === "bigint" ? value.toString() : Number.isFinite(value) ? String(value) : value > 0 ? "+Inf" : value < 0 ? "-Inf" : "NaN")

/** The registry in Prometheus' text exposition format (0.0.4), plus the process's own figures. */
export const prometheusText: Effect.Effect<string> = Effect.map(Metric.snapshot, (pairs) => {
  const families = new Map<string, { type: string; help: string; lines: Array<string> }>()
  const family = (name: string, type: string, help: string) => {
    let entry = families.get(name)
    if (entry === undefined) families.set(name, (entry = { type, help, lines: [] }))
    return entry
  }
  for (const { metricKey, metricState } of pairs) {
    const name = metricKey.name
    const help = Option.getOrElse(metricKey.description, () => name)
    const tags = metricKey.tags.map((t) => [t.key, t.value] as const)
    if (MetricState.isCounterState(metricState)) family(name, "counter", help).lines.push(`${name}${labels(tags)} ${number(metricState.count)}`)
    else if (MetricState.isGaugeState(metricState)) family(name, "gauge", help).lines.push(`${name}${labels(tags)} ${number(metricState.value)}`)
    else if (MetricState.isHistogramState(metricState)) {
      const entry = family(name, "histogram", help)
      // Effect's buckets are cumulative counts of samples at or below each boundary.
      for (const [boundary, count] of metricState.buckets) entry.lines.push(`${name}_bucket${labels([...tags, ["le", number(boundary)]])} ${count}`)
      if (!metricState.buckets.some(([boundary]) => boundary === Number.POSITIVE_INFINITY)) entry.lines.push(`${name}_bucket${labels([...tags, ["le", "+Inf"]])} ${metricState.count}`)
      entry.lines.push(`${name}_sum${labels(tags)} ${number(metricState.sum)}`, `${name}_count${labels(tags)} ${metricState.count}`)
    }
  }
  for (const [name, gauge] of roundGauges) {
    const entry = family(name, "gauge", gauge.help)
    for (const { labels: set, value } of gauge.series) entry.lines.push(`${name}${labels(Object.entries(set))} ${number(value)}`)
  }
  const memory = process.memoryUsage()
  const cpu = process.cpuUsage()
  family("process_resident_memory_bytes", "gauge", "Resident memory").lines.push(`process_resident_memory_bytes ${memory.rss}`)
  family("nodejs_heap_used_bytes", "gauge", "V8 heap in use").lines.push(`nodejs_heap_used_bytes ${memory.heapUsed}`)
  family("process_cpu_seconds_total", "counter", "User and system CPU time").lines.push(`process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`)
  const out: Array<string> = []
  for (const [name, { type, help, lines }] of families) out.push(`# HELP ${name} ${help.replace(/\n/g, " ")}`, `# TYPE ${name} ${type}`, ...lines)
  return `${out.join("\n")}\n`
})

/**
 * `GET /metrics` on METRICS_PORT for the life of the layer (nothing when unset or 0). Plain
 * HTTP/1.1: Prometheus scrapes that, and the units' own port speaks only HTTP/2.
 */
export const MetricsServerLive: Layer.Layer<never> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const port = yield* Config.option(Config.integer("METRICS_PORT")).pipe(Effect.orDie)
    if (Option.isNone(port) || port.value <= 0) return
    const runtime = yield* Effect.runtime<never>()
    const server = createServer((request, response) => {
      if (request.method !== "GET" || (request.url ?? "").split("?")[0] !== "/metrics") {
        response.writeHead(404, { "content-type": "text/plain" }).end("Not Found\n")
        return
      }
      Runtime.runPromise(runtime)(prometheusText).then(
        (text) => response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(text),
        () => response.writeHead(500).end()
      )
    })
    yield* Effect.acquireRelease(
      Effect.async<void, Error>((resume) => {
        server.once("error", (error) => resume(Effect.fail(error)))
        server.listen(port.value, "0.0.0.0", () => resume(Effect.void))
      }),
      () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
    ).pipe(Effect.orDie)
    yield* Effect.logInfo("serving metrics").pipe(Effect.annotateLogs({ port: port.value, path: "/metrics" }))
  })
)

/**
 * What every process runs with: JSON logs, the metrics endpoint when METRICS_PORT is set, and
 * traces over OTLP when the OTEL_* variables say where (service name `serviceName` by default).
 */
export const telemetry = (serviceName: string): Layer.Layer<never> =>
  Layer.mergeAll(MetricsServerLive, tracingLayer(serviceName)).pipe(Layer.provideMerge(LoggingLive))
