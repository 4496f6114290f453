#!/usr/bin/env node
// Where one request's time goes across the units, from their own spans.
//
//   node test/bench/traces.mjs collect [file] [port]   an OTLP/HTTP (JSON) receiver: appends every
//                                                      export to file (default /tmp/scion-spans.jsonl),
//                                                      port 4318 by default
//   node test/bench/traces.mjs show <file> <value> [depth]
//                                                      the trace(s) holding a span attribute equal to
//                                                      value (an operation id, a branch id…), as a
//                                                      tree: start and duration in ms, unit, span
//
// Units export spans when OTEL_EXPORTER_OTLP_ENDPOINT is set (kit tracing.ts), and the benches'
// units inherit the environment: for example
//   node test/bench/traces.mjs collect &
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_BSP_SCHEDULE_DELAY=500 pnpm bench:branch
//   node test/bench/traces.mjs show /tmp/scion-spans.jsonl op_brc…
import { appendFileSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"

const [command, ...args] = process.argv.slice(2)

if (command === "collect") {
  const file = args[0] ?? "/tmp/scion-spans.jsonl"
  const port = Number(args[1] ?? 4318)
  writeFileSync(file, "")
  createServer((request, response) => {
    const chunks = []
    request.on("data", (chunk) => chunks.push(chunk))
    request.on("end", () => {
      appendFileSync(file, `${Buffer.concat(chunks).toString("utf8").replace(/\n/g, " ")}\n`)
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  }).listen(port, "127.0.0.1", () => console.log(`collecting OTLP/HTTP JSON spans on 127.0.0.1:${port} into ${file}`))
} else if (command === "show" && args.length >= 2) {
  const [file, value, depthArg] = args
  const maxDepth = Number(depthArg ?? 99)
  const attributeValue = (attribute) => Object.values(attribute.value ?? {})[0]
  const spans = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .flatMap((line) =>
      JSON.parse(line).resourceSpans.flatMap((resource) => {
        const unit = attributeValue(resource.resource.attributes.find((a) => a.key === "service.name") ?? {}) ?? "?"
        return resource.scopeSpans.flatMap((scope) => scope.spans.map((span) => ({ ...span, unit })))
      })
    )
  const traceIds = new Set(spans.filter((span) => (span.attributes ?? []).some((a) => String(attributeValue(a)) === value)).map((span) => span.traceId))
  const trace = spans.filter((span) => traceIds.has(span.traceId)).sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))
  if (trace.length === 0) {
    console.log(`no span carries ${value}`)
    process.exit(1)
  }
  const byId = new Map(trace.map((span) => [span.spanId, span]))
  const depthOf = (span) => {
    let depth = 0
    for (let parent = byId.get(span.parentSpanId); parent !== undefined; parent = byId.get(parent.parentSpanId)) depth++
    return depth
  }
  const t0 = BigInt(trace[0].startTimeUnixNano)
  const ms = (nanos) => (Number(nanos) / 1e6).toFixed(1).padStart(8)
  for (const span of trace) {
    const depth = depthOf(span)
    if (depth > maxDepth) continue
    const start = BigInt(span.startTimeUnixNano)
    console.log(`${ms(start - t0)} ${ms(BigInt(span.endTimeUnixNano) - start)}  ${span.unit.replace(/^scion-/, "").padEnd(10)} ${"  ".repeat(depth)}${span.name}`)
  }
} else {
  console.log("usage: traces.mjs collect [file] [port] | traces.mjs show <file> <attribute value> [depth]")
  process.exit(2)
}
