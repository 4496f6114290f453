import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

/** A span as an OTLP/HTTP JSON export carries it, with the exporting service's name. */
export interface ReceivedSpan {
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly name: string
}

export interface OtlpReceiver {
  /** The base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT (exports go to /v1/traces). */
  readonly url: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** The spans of one trace once `done` says they are all there (10 s at most). */
  readonly waitForSpans: (traceId: string, done: (spans: ReadonlyArray<ReceivedSpan>) => boolean) => Promise<ReadonlyArray<ReceivedSpan>>
  readonly stop: () => Promise<void>
}

// OTLP/JSON encodes ids as hex; protobuf-JSON mappers sometimes send base64: accept both.
const hexId = (value: unknown): string => {
  if (typeof value !== "string") return ""
  return /^[0-9a-f]+$/i.test(value) ? value.toLowerCase() : Buffer.from(value, "base64").toString("hex")
}

interface ExportRequest {
  readonly resourceSpans?: ReadonlyArray<{
    readonly resource?: { readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value?: { readonly stringValue?: string } }> }
    readonly scopeSpans?: ReadonlyArray<{ readonly spans?: ReadonlyArray<Record<string, unknown>> }>
  }>
}

/**
 * A stand-in for an OpenTelemetry collector (an outside service): the OTLP/HTTP JSON trace
 * endpoint, `POST /v1/traces`, answering as a collector does (200 with an empty partial success).
 */
export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const received: Array<ReceivedSpan> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      if (request.method !== "POST" || request.url !== "/v1/traces" || !(request.headers["content-type"] ?? "").includes("json")) {
        response.writeHead(404).end()
        return
      }
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest
        for (const resource of body.resourceSpans ?? []) {
          const service = resource.resource?.attributes?.find((a) => a.key === "service.name")?.value?.stringValue ?? ""
          for (const scope of resource.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              received.push({ service, traceId: hexId(span.traceId), spanId: hexId(span.spanId), parentSpanId: hexId(span.parentSpanId), name: String(span.name ?? "") })
            }
          }
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      } catch {
        response.writeHead(400).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    spans: () => received,
    waitForSpans: async (traceId, done) => {
      const deadline = Date.now() + 10_000
      while (true) {
        const found = received.filter((span) => span.traceId === traceId)
        if (done(found) || Date.now() > deadline) return found
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
