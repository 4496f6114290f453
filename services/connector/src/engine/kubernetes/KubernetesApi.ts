/**
 * The Kubernetes API server's REST wire format as the engine adapter uses it: object paths by
 * kind, one request over node:http(s) with the service account's CA and bearer token, and the
 * scrubbing of secret values from the messages that leave the adapter.
 */
import { request as httpRequest, type IncomingMessage } from "node:http"
import { request as httpsRequest } from "node:https"
import { b64, FIELD_MANAGER } from "./EngineManifests.js"

export type Kind = "Secret" | "ConfigMap" | "Service" | "StatefulSet" | "PersistentVolumeClaim" | "Certificate"

const plural: Record<Kind, string> = {
  Certificate: "certificates",
  Secret: "secrets",
  ConfigMap: "configmaps",
  Service: "services",
  StatefulSet: "statefulsets",
  PersistentVolumeClaim: "persistentvolumeclaims"
}

const apiGroupPath: Record<Kind, string> = {
  Secret: "/api/v1",
  ConfigMap: "/api/v1",
  Service: "/api/v1",
  PersistentVolumeClaim: "/api/v1",
  StatefulSet: "/apis/apps/v1",
  Certificate: "/apis/cert-manager.io/v1"
}

export const collectionPath = (kind: Kind, namespace: string) => `${apiGroupPath[kind]}/namespaces/${encodeURIComponent(namespace)}/${plural[kind]}`

export const objectPath = (kind: Kind, namespace: string, name: string) => `${collectionPath(kind, namespace)}/${encodeURIComponent(name)}`

export interface ApiResponse {
  readonly status: number
  readonly body: unknown
}

export interface ApiRequest {
  readonly method: "GET" | "POST" | "PATCH" | "DELETE"
  readonly path: string
  readonly body?: unknown
  readonly contentType?: string
}

/** Removes every given secret value (and its base64) from a message before it leaves the adapter. */
export const scrub = (message: string, secrets: ReadonlyArray<string>) =>
  secrets
    .filter((secret) => secret.length >= 6)
    .flatMap((secret) => [secret, b64(secret)])
    .reduce((text, secret) => text.split(secret).join("[redacted]"), message)

export const statusMessage = (body: unknown): string => {
  if (typeof body === "object" && body !== null) {
    const status = body as { reason?: unknown; message?: unknown }
    return [status.reason, status.message].filter((part) => typeof part === "string" && part.length > 0).join(": ")
  }
  return typeof body === "string" ? body : ""
}

/**
 * Sends one request to the API server at `apiUrl` (trusting `ca` for https) and answers its status
 * and body (JSON when it parses, else the text); only transport failures reject.
 */
export const kubernetesSender =
  (options: { readonly apiUrl: string; readonly ca: string | undefined; readonly timeoutMs: number }) =>
  (request: ApiRequest, token: string | undefined, signal: AbortSignal) => {
    const { apiUrl, ca, timeoutMs } = options
    return new Promise<ApiResponse>((resolve, reject) => {
      const url = new URL(`${apiUrl}${request.path}`)
      const payload = request.body === undefined ? undefined : JSON.stringify(request.body)
      const headers: Record<string, string> = { Accept: "application/json", "User-Agent": FIELD_MANAGER }
      if (token) headers["Authorization"] = `Bearer ${token}`
      if (payload !== undefined) {
        headers["Content-Type"] = request.contentType ?? "application/json"
        headers["Content-Length"] = String(Buffer.byteLength(payload))
      }
      const onResponse = (response: IncomingMessage) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.once("error", reject)
        response.once("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let body: unknown = text
          try {
            body = text.length > 0 ? JSON.parse(text) : undefined
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: response.statusCode ?? 0, body })
        })
      }
      const req =
        url.protocol === "https:"
          ? httpsRequest(url, { method: request.method, headers, signal, timeout: timeoutMs, ...(ca ? { ca } : {}) }, onResponse)
          : httpRequest(url, { method: request.method, headers, signal, timeout: timeoutMs }, onResponse)
      req.once("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
      req.once("error", reject)
      req.end(payload)
    })
  }
