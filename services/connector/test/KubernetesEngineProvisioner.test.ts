/**
 * The Kubernetes EngineProvisioner adapter: the rendered objects (TLS on, logical WAL, SCRAM only,
 * non-root, names valid for any connector id), and the adapter against a fake API server on a
 * local port speaking the REST wire format (JSON objects, Status objects for errors, server-side
 * apply simplified to store-or-merge, the StatefulSet scale subresource, delete by label).
 */
import { createPrivateKey, createPublicKey, randomBytes, X509Certificate } from "node:crypto"
import { writeFile, rm } from "node:fs/promises"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect as tlsConnect, createServer as createTlsServer } from "node:tls"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Fiber, Layer, Option, Redacted } from "effect"
import { EngineError, EngineNotFound, EngineProvisioner } from "../src/engine/EngineProvisioner.js"
import {
  connectorIdLabel,
  type EngineRenderOptions,
  engineDnsNames,
  engineHost,
  engineName,
  generateMaterial,
  KubernetesEngineProvisionerLive,
  MAX_ENGINE_NAME,
  renderEngine,
  selfSignedCertificate
} from "../src/engine/KubernetesEngineProvisioner.js"

const options: EngineRenderOptions = {
  namespace: "engines",
  image: "postgres:18",
  storageClass: Option.some("fast-ssd"),
  storageSize: "20Gi",
  resources: { requests: { cpu: "250m", memory: "512Mi" }, limits: { cpu: "2", memory: "2Gi" } },
  serviceDnsSuffix: "svc",
  maxReplicationSlots: 16,
  maxWalSenders: 16,
  maxLogicalReplicationWorkers: 8,
  fileCopyMethod: "clone",
  certificateIssuer: Option.none()
}

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/
const LABEL_VALUE = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/
const fromB64 = (value: string | undefined) => Buffer.from(value ?? "", "base64").toString("utf8")

describe("KubernetesEngineProvisioner rendering", () => {
  it("derives DNS-1035 names of at most 52 characters from any connector id, distinct for distinct ids", () => {
    expect(engineName("abc-123")).toBe("scion-engine-abc-123")
    const ids = ["con_9f2a", "con-9f2a", "CON-9F2A", "___", "-x-", "a".repeat(128), "A_".repeat(64), "con_" + "Z".repeat(124), "x"]
    const names = ids.map(engineName)
    for (const name of names) {
      expect(name).toMatch(DNS_1035)
      expect(name.length).toBeLessThanOrEqual(MAX_ENGINE_NAME)
      expect(name.startsWith("scion-engine-")).toBe(true)
    }
    expect(new Set(names).size).toBe(ids.length)
    // Lossy ids carry a hash of the exact id; names are stable.
    expect(engineName("con_9f2a")).toMatch(/^scion-engine-con-9f2a-[0-9a-f]{8}$/)
    expect(engineName("con_9f2a")).toBe(engineName("con_9f2a"))
    expect(engineName("a".repeat(128))).toMatch(/^scion-engine-a+-[0-9a-f]{8}$/)
    for (const id of ids) expect(connectorIdLabel(id)).toMatch(LABEL_VALUE)
    expect(connectorIdLabel("con_9f2a")).toBe("con_9f2a")
  })

  it("renders a single-replica, non-root StatefulSet with TLS, logical WAL and SCRAM", () => {
    const id = "con_Long_" + "x".repeat(100)
    const material = generateMaterial(id, options)
    const { statefulSet, service, configMap, secret } = renderEngine(id, options, material)
    const name = engineName(id)
    for (const object of [statefulSet, service, configMap, secret]) {
      expect(object.metadata.name).toBe(name)
      expect(object.metadata.namespace).toBe("engines")
      expect(object.metadata.labels).toMatchObject({ "app.kubernetes.io/name": "scion-engine", "scion.dev/connector-id": connectorIdLabel(id) })
      expect(object.metadata.annotations["scion.dev/connector-id"]).toBe(id)
      for (const value of Object.values(object.metadata.labels)) expect(value).toMatch(LABEL_VALUE)
    }

    const spec = statefulSet.spec
    expect(statefulSet.apiVersion).toBe("apps/v1")
    expect(spec.replicas).toBe(1)
    expect(spec.serviceName).toBe(name)
    expect(Object.entries(spec.selector.matchLabels).every(([k, v]) => spec.template.metadata.labels[k as keyof typeof spec.template.metadata.labels] === v)).toBe(true)
    const pod = spec.template.spec
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 999, fsGroup: 999 })
    expect(pod.automountServiceAccountToken).toBe(false)
    const container = pod.containers[0]!
    expect(container.image).toBe("postgres:18")
    expect(container.securityContext).toMatchObject({ runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } })
    expect(container.resources).toEqual(options.resources)

    // -c name=value pairs.
    const args = container.args
    const settings = new Map<string, string>()
    for (let i = 0; i < args.length; i += 2) {
      expect(args[i]).toBe("-c")
      const [key, ...value] = (args[i + 1] ?? "").split("=")
      settings.set(key!, value.join("="))
    }
    expect(Object.fromEntries(settings)).toMatchObject({
      wal_level: "logical",
      ssl: "on",
      ssl_cert_file: "/etc/scion/tls/tls.crt",
      ssl_key_file: "/etc/scion/tls/tls.key",
      hba_file: "/etc/scion/hba/pg_hba.conf",
      password_encryption: "scram-sha-256",
      max_replication_slots: "16",
      max_wal_senders: "16",
      max_logical_replication_workers: "8",
      file_copy_method: "clone",
      port: "5432"
    })

    // The password only by reference; PGDATA a subdirectory of the volume.
    const env = Object.fromEntries(container.env.map((e) => [e.name, e]))
    expect(env["POSTGRES_PASSWORD"]).toEqual({ name: "POSTGRES_PASSWORD", valueFrom: { secretKeyRef: { name, key: "password" } } })
    expect(JSON.stringify(statefulSet)).not.toContain(Redacted.value(material.password))
    const dataMount = container.volumeMounts.find((m) => m.name === "data")!
    expect(env["PGDATA"]?.value?.startsWith(`${dataMount.mountPath}/`)).toBe(true)
    expect(env["POSTGRES_INITDB_ARGS"]?.value).toContain("--auth-host=scram-sha-256")

    for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
      expect(probe.exec.command[0]).toBe("pg_isready")
      expect(probe.exec.command).toContain("5432")
    }
    expect(container.ports).toEqual([{ name: "postgres", containerPort: 5432, protocol: "TCP" }])

    // The key mounted 0640 (root-owned, group fsGroup: accepted by postgres); only cert and key.
    const tls = pod.volumes.find((v) => v.name === "tls")
    expect(tls).toMatchObject({ secret: { secretName: name, defaultMode: 0o640 } })
    expect(tls && "secret" in tls ? tls.secret.items.map((i) => i.key) : []).toEqual(["tls.crt", "tls.key"])

    const claim = spec.volumeClaimTemplates[0]!
    expect(claim.metadata.name).toBe("data")
    expect(claim.metadata.labels).toEqual(spec.selector.matchLabels)
    expect(claim.spec).toEqual({ accessModes: ["ReadWriteOnce"], storageClassName: "fast-ssd", resources: { requests: { storage: "20Gi" } } })
    const noClass = renderEngine(id, { ...options, storageClass: Option.none() }, material).statefulSet.spec.volumeClaimTemplates[0]!.spec
    expect("storageClassName" in noClass).toBe(false)

    expect(service.spec).toMatchObject({ type: "ClusterIP", selector: spec.selector.matchLabels })
    expect(service.spec.ports).toEqual([{ name: "postgres", port: 5432, targetPort: "postgres", protocol: "TCP", appProtocol: "postgresql" }])
  })

  it("pg_hba.conf admits TCP only over TLS with SCRAM", () => {
    const hba = renderEngine("c1", options, generateMaterial("c1", options)).configMap.data["pg_hba.conf"]
    const rules = hba.split("\n").filter((line) => line.trim() && !line.startsWith("#")).map((line) => line.split(/\s+/))
    const hostssl = rules.filter((r) => r[0] === "hostssl")
    const hostnossl = rules.filter((r) => r[0] === "hostnossl")
    expect(hostssl.length).toBeGreaterThan(0)
    expect(hostnossl.length).toBeGreaterThan(0)
    expect(hostssl.every((r) => r.at(-1) === "scram-sha-256")).toBe(true)
    expect(hostnossl.every((r) => r.at(-1) === "reject")).toBe(true)
    expect(rules.some((r) => r[0] === "host")).toBe(false)
    expect(hba).not.toMatch(/\btrust\b|\bmd5\b|\bpassword\b/)
  })

  it("the Secret holds the superuser and a self-signed certificate for the Service's names", async () => {
    const id = "con_tls"
    const material = generateMaterial(id, options)
    const { secret } = renderEngine(id, options, material)
    expect(secret.type).toBe("Opaque")
    expect(fromB64(secret.data.username)).toBe("postgres")
    expect(fromB64(secret.data.password)).toBe(Redacted.value(material.password))
    expect(Redacted.value(material.password)).toMatch(/^[A-Za-z0-9_-]{32}$/)

    const certificate = new X509Certificate(fromB64(secret.data["tls.crt"]))
    const key = createPrivateKey(fromB64(secret.data["tls.key"]))
    expect(certificate.checkPrivateKey(key)).toBe(true)
    expect(certificate.verify(createPublicKey(key))).toBe(true)
    const host = engineHost(id, options)
    expect(host).toBe(`${engineName(id)}.engines.svc`)
    for (const dns of engineDnsNames(id, options)) expect(certificate.checkHost(dns)).toBe(dns)
    expect(certificate.checkHost("other.engines.svc")).toBeUndefined()
    expect(new Date(certificate.validTo).getTime()).toBeGreaterThan(Date.now() + 9 * 365 * 86_400_000)

    // A client trusting the certificate verifies the server under the engine's host name.
    const server = createTlsServer({ cert: material.tls.certificate, key: Redacted.value(material.tls.key) }, (socket) => socket.end("ok"))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const port = (server.address() as AddressInfo).port
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = tlsConnect({ host: "127.0.0.1", port, servername: host, ca: material.tls.certificate, rejectUnauthorized: true })
        let data = ""
        socket.on("data", (chunk: Buffer) => void (data += chunk.toString()))
        socket.once("end", () => resolve(data))
        socket.once("error", reject)
      })
      expect(answer).toBe("ok")
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
    expect(() => selfSignedCertificate("x", ["a.b"], new Date("2049-06-01T00:00:00Z"))).not.toThrow()
  })
})

// ---------------------------------------------------------------------------------------------
// A fake API server

type Json = Record<string, any>

interface Logged {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly contentType: string | undefined
  readonly authorization: string | undefined
}

const statusObject = (code: number, reason: string, message: string) => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message,
  reason,
  code
})

const merge = (base: Json, patch: Json): Json => {
  const out: Json = { ...base }
  for (const [key, value] of Object.entries(patch)) {
    out[key] =
      value && typeof value === "object" && !Array.isArray(value) && out[key] && typeof out[key] === "object" && !Array.isArray(out[key])
        ? merge(out[key], value)
        : value
  }
  return out
}

class FakeKubernetes {
  readonly objects = new Map<string, Json>()
  readonly log: Array<Logged> = []
  ready = true
  forbid: (method: string, path: string) => boolean = () => false
  private server: Server | undefined
  url = ""

  async start() {
    this.server = createServer((req, res) => void this.handle(req, res))
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  async stop() {
    this.server?.closeAllConnections()
    await new Promise((resolve) => this.server?.close(resolve))
  }

  reset() {
    this.objects.clear()
    this.log.length = 0
    this.ready = true
    this.forbid = () => false
  }

  /** The stored objects of one kind (collection path prefix). */
  ofKind(collection: string) {
    return [...this.objects.entries()].filter(([path]) => path.startsWith(`${collection}/`)).map(([, object]) => object)
  }

  private withStatus(path: string, object: Json): Json {
    if (!path.includes("/statefulsets/")) return object
    const replicas: number = object["spec"]?.replicas ?? 1
    return { ...object, status: { replicas, readyReplicas: this.ready ? replicas : 0 } }
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString("utf8")
    const url = new URL(req.url ?? "/", "http://fake")
    const method = req.method ?? "GET"
    this.log.push({ method, path: url.pathname, query: url.searchParams, contentType: req.headers["content-type"], authorization: req.headers.authorization })
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { "Content-Type": "application/json" })
      res.end(JSON.stringify(body))
    }
    const match = /^\/(?:api\/v1|apis\/apps\/v1|apis\/cert-manager\.io\/v1)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?(\/scale)?$/.exec(url.pathname)
    if (!match) return send(404, statusObject(404, "NotFound", "the server could not find the requested resource"))
    const [, , plural, name, scale] = match
    const collection = url.pathname.replace(/\/[^/]+(\/scale)?$/, "")
    if (this.forbid(method, url.pathname)) {
      // A verbose server: the message echoes the request, as some proxies and webhooks do.
      return send(403, statusObject(403, "Forbidden", `${plural} "${name ?? ""}" is forbidden: User "system:serviceaccount:scion:connector" cannot ${method.toLowerCase()} ${plural}; data: ${JSON.stringify((JSON.parse(text || "{}") as Json)["data"] ?? null)}`))
    }
    const body = text.length > 0 ? (JSON.parse(text) as Json) : {}
    if (name === undefined) {
      if (method === "POST") {
        const path = `${url.pathname}/${body["metadata"]?.name}`
        if (this.objects.has(path)) return send(409, statusObject(409, "AlreadyExists", `${plural} "${body["metadata"]?.name}" already exists`))
        this.objects.set(path, merge(body, { metadata: { uid: randomBytes(8).toString("hex"), resourceVersion: "1" } }))
        return send(201, this.objects.get(path))
      }
      if (method === "DELETE") {
        const selector = Object.fromEntries((url.searchParams.get("labelSelector") ?? "").split(",").map((pair) => pair.split("=")))
        const doomed = [...this.objects.entries()].filter(
          ([path, object]) => path.startsWith(`${url.pathname}/`) && Object.entries(selector).every(([k, v]) => object["metadata"]?.labels?.[k] === v)
        )
        for (const [path] of doomed) this.objects.delete(path)
        return send(200, { kind: "PersistentVolumeClaimList", apiVersion: "v1", items: doomed.map(([, o]) => o) })
      }
      return send(405, statusObject(405, "MethodNotAllowed", "method not allowed"))
    }
    const path = scale ? url.pathname.slice(0, -"/scale".length) : url.pathname
    const existing = this.objects.get(path)
    const notFound = () => send(404, statusObject(404, "NotFound", `${plural} "${name}" not found`))
    switch (method) {
      case "GET":
        return existing ? send(200, this.withStatus(path, existing)) : notFound()
      case "DELETE":
        if (!existing) return notFound()
        this.objects.delete(path)
        return send(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details: { name, kind: plural } })
      case "PATCH": {
        if (scale) {
          if (req.headers["content-type"] !== "application/merge-patch+json") return send(415, statusObject(415, "UnsupportedMediaType", "bad type"))
          if (!existing) return notFound()
          const updated = merge(existing, { spec: { replicas: body["spec"]?.replicas } })
          this.objects.set(path, updated)
          this.claimsFor(collection, updated)
          return send(200, { kind: "Scale", apiVersion: "autoscaling/v1", metadata: { name }, spec: { replicas: updated["spec"].replicas } })
        }
        if (req.headers["content-type"] !== "application/apply-patch+yaml") return send(415, statusObject(415, "UnsupportedMediaType", "bad type"))
        if (!url.searchParams.get("fieldManager")) return send(422, statusObject(422, "Invalid", "fieldManager is required for apply"))
        if (body["metadata"]?.name !== name) return send(400, statusObject(400, "BadRequest", "the name of the object does not match the URL"))
        const applied = existing ? merge(existing, body) : merge(body, { metadata: { uid: randomBytes(8).toString("hex") } })
        this.objects.set(path, applied)
        this.claimsFor(collection, applied)
        return send(existing ? 200 : 201, this.withStatus(path, applied))
      }
      default:
        return send(405, statusObject(405, "MethodNotAllowed", "method not allowed"))
    }
  }

  /** The StatefulSet controller, simplified: a running replica gets its claim from the template. */
  private claimsFor(collection: string, statefulSet: Json) {
    if (!collection.endsWith("/statefulsets") || (statefulSet["spec"]?.replicas ?? 0) < 1) return
    const ns: string = statefulSet["metadata"].namespace
    for (const template of statefulSet["spec"].volumeClaimTemplates ?? []) {
      const claim = `${template.metadata.name}-${statefulSet["metadata"].name}-0`
      const path = `/api/v1/namespaces/${ns}/persistentvolumeclaims/${claim}`
      if (!this.objects.has(path)) {
        this.objects.set(path, { apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: claim, namespace: ns, labels: template.metadata.labels }, spec: template.spec })
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The adapter

const kube = new FakeKubernetes()
const tokenPath = join(tmpdir(), `scion-k8s-token-${randomBytes(4).toString("hex")}`)

const layerWith = (extra: Record<string, string> = {}) =>
  KubernetesEngineProvisionerLive.pipe(
    Layer.provide(
      Layer.setConfigProvider(
        ConfigProvider.fromMap(
          new Map(
            Object.entries({
              KUBERNETES_API_URL: kube.url,
              KUBERNETES_TOKEN_PATH: tokenPath,
              KUBERNETES_CA_PATH: join(tmpdir(), "no-such-ca.crt"),
              ENGINE_NAMESPACE: "engines",
              ENGINE_STORAGE_CLASS: "fast-ssd",
              ENGINE_STORAGE_SIZE: "5Gi",
              ENGINE_READY_TIMEOUT: "3 seconds",
              ENGINE_READY_POLL_INTERVAL: "20 millis",
              ...extra
            })
          )
        )
      )
    )
  )

const run = <A, E>(effect: Effect.Effect<A, E, EngineProvisioner>, extra?: Record<string, string>) =>
  Effect.runPromise(Effect.provide(effect, layerWith(extra)))
const runExit = <A, E>(effect: Effect.Effect<A, E, EngineProvisioner>, extra?: Record<string, string>) =>
  Effect.runPromise(Effect.exit(Effect.provide(effect, layerWith(extra))))
const failureOf = <A, E>(exit: Exit.Exit<A, E>) => (Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined)

const secretPath = (id: string) => `/api/v1/namespaces/engines/secrets/${engineName(id)}`
const statefulSetPath = (id: string) => `/apis/apps/v1/namespaces/engines/statefulsets/${engineName(id)}`

beforeAll(async () => {
  await kube.start()
  await writeFile(tokenPath, "test-token\n", { mode: 0o600 })
})
afterAll(async () => {
  await kube.stop()
  await rm(tokenPath, { force: true })
})
beforeEach(() => kube.reset())

describe("KubernetesEngineProvisioner against a fake API server", () => {
  it("provision creates the Secret, then applies Secret, ConfigMap, Service and StatefulSet, and answers the engine", async () => {
    const id = "con_Prov1"
    const engine = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    const name = engineName(id)
    expect(engine).toMatchObject({ connectorId: id, host: `${name}.engines.svc`, port: 5432, tls: true, superuser: { username: "postgres" } })
    expect(engine).toMatchObject({ instanceName: `${name}-0`, fileCopyClone: false })
    const stored = kube.objects.get(secretPath(id))!
    expect(fromB64(stored["data"].password)).toBe(Redacted.value(engine.superuser.password))
    expect(JSON.stringify(engine)).not.toContain(Redacted.value(engine.superuser.password))

    const writes = kube.log.filter((r) => r.method !== "GET")
    expect(writes.map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /api/v1/namespaces/engines/secrets",
      `PATCH ${secretPath(id)}`,
      `PATCH /api/v1/namespaces/engines/configmaps/${name}`,
      `PATCH /api/v1/namespaces/engines/services/${name}`,
      `PATCH ${statefulSetPath(id)}`
    ])
    for (const apply of writes.filter((r) => r.method === "PATCH")) {
      expect(apply.contentType).toBe("application/apply-patch+yaml")
      expect(apply.query.get("fieldManager")).toBe("scion-connector")
      expect(apply.query.get("force")).toBe("true")
    }
    expect(kube.log.every((r) => r.authorization === "Bearer test-token")).toBe(true)

    const sts = kube.objects.get(statefulSetPath(id))!
    expect(sts["spec"].template.spec.containers[0].args).toContain("file_copy_method=copy")
    expect(sts["spec"].replicas).toBe(1)
    expect(sts["spec"].volumeClaimTemplates[0].spec).toMatchObject({ storageClassName: "fast-ssd", resources: { requests: { storage: "5Gi" } } })
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(id)))).toEqual({ connectorId: id, state: "running", host: engine.host, port: 5432 })
  })

  it("with a cert-manager issuer: a Certificate for the Service's names, mounted by the pod, removed by destroy; the authority is served", async () => {
    const id = "con_issued"
    const name = engineName(id)
    const caFile = join(tmpdir(), `scion-k8s-ca-${randomBytes(4).toString("hex")}.pem`)
    await writeFile(caFile, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    const issuer = { ENGINE_CERT_ISSUER: "scion-engines", ENGINE_CERT_ISSUER_KIND: "ClusterIssuer", ENGINE_CA_CERT_FILE: caFile }
    try {
      await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)), issuer)
      const certificatePath = `/apis/cert-manager.io/v1/namespaces/engines/certificates/${name}-tls`
      const certificate = kube.objects.get(certificatePath)!
      expect(certificate).toMatchObject({
        apiVersion: "cert-manager.io/v1",
        kind: "Certificate",
        spec: { secretName: `${name}-tls`, issuerRef: { group: "cert-manager.io", kind: "ClusterIssuer", name: "scion-engines" }, privateKey: { algorithm: "ECDSA" } }
      })
      expect(certificate["spec"].dnsNames).toEqual(engineDnsNames(id, { namespace: "engines", serviceDnsSuffix: "svc" }))
      expect(certificate["spec"].usages).toContain("server auth")
      const volumes = kube.objects.get(statefulSetPath(id))!["spec"].template.spec.volumes
      expect(volumes.find((v: { name: string }) => v.name === "tls").secret.secretName).toBe(`${name}-tls`)
      expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.certificateAuthority), issuer)).toEqual(Option.some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))

      await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(id)), issuer)
      expect(kube.objects.has(certificatePath)).toBe(false)
      expect(kube.log.some((r) => r.method === "DELETE" && r.path === `/api/v1/namespaces/engines/secrets/${name}-tls`)).toBe(true)
    } finally {
      await rm(caFile, { force: true })
    }
    // Without an issuer: the engine's own Secret is mounted and there is no authority to serve.
    await run(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_selfsigned")))
    expect(kube.objects.get(statefulSetPath("con_selfsigned"))!["spec"].template.spec.volumes.find((v: { name: string }) => v.name === "tls").secret.secretName).toBe(engineName("con_selfsigned"))
    expect([...kube.objects.keys()].some((path) => path.includes("/certificates/"))).toBe(false)
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.certificateAuthority))).toEqual(Option.none())
  })

  it("provision again keeps the password and certificate; an existing Secret's password is the one answered", async () => {
    const id = "con_twice"
    const first = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    const secretBefore = kube.objects.get(secretPath(id))!["data"]
    const second = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    expect(Redacted.value(second.superuser.password)).toBe(Redacted.value(first.superuser.password))
    expect(kube.objects.get(secretPath(id))!["data"]).toEqual(secretBefore)
    expect(kube.log.filter((r) => r.method === "POST")).toHaveLength(1)

    // ENGINE_FILE_COPY_METHOD=clone reaches the server and the engine answered.
    const cloned = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_clone")), { ENGINE_FILE_COPY_METHOD: "clone" })
    expect(cloned.fileCopyClone).toBe(true)
    expect(kube.objects.get(statefulSetPath("con_clone"))!["spec"].template.spec.containers[0].args).toContain("file_copy_method=clone")

    // Concurrent provisions in one process agree.
    const both = await run(Effect.flatMap(EngineProvisioner, (p) => Effect.all([p.provision("con_race"), p.provision("con_race")], { concurrency: 2 })))
    expect(Redacted.value(both[0].superuser.password)).toBe(Redacted.value(both[1].superuser.password))

    // A Secret made earlier (another replica, an earlier version) is read back, never replaced.
    const seeded = generateMaterial("con_seeded", { namespace: "engines", serviceDnsSuffix: "svc" })
    const { secret } = renderEngine("con_seeded", { ...options, namespace: "engines" }, seeded)
    kube.objects.set(secretPath("con_seeded"), secret)
    const engine = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_seeded")))
    expect(Redacted.value(engine.superuser.password)).toBe(Redacted.value(seeded.password))
    expect(fromB64(kube.objects.get(secretPath("con_seeded"))!["data"]["tls.crt"])).toBe(seeded.tls.certificate)
  })

  it("stop scales to 0, start scales to 1, status maps readyReplicas", async () => {
    const id = "con_life"
    const engine = await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(id)))
    expect(kube.objects.get(statefulSetPath(id))!["spec"].replicas).toBe(0)
    const scaleCall = kube.log.find((r) => r.path.endsWith("/scale"))!
    expect(scaleCall).toMatchObject({ method: "PATCH", path: `${statefulSetPath(id)}/scale`, contentType: "application/merge-patch+json" })
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(id)))).toMatchObject({ state: "stopped" })
    // Stopping a stopped engine changes nothing.
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(id)))
    expect(kube.objects.get(statefulSetPath(id))!["spec"].replicas).toBe(0)

    const started = await run(Effect.flatMap(EngineProvisioner, (p) => p.start(id)))
    expect(kube.objects.get(statefulSetPath(id))!["spec"].replicas).toBe(1)
    expect(Redacted.value(started.superuser.password)).toBe(Redacted.value(engine.superuser.password))
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(id)))).toMatchObject({ state: "running" })

    // Not ready: stopped as far as clients are concerned.
    kube.ready = false
    expect(await run(Effect.flatMap(EngineProvisioner, (p) => p.status(id)))).toMatchObject({ state: "stopped" })

    // A stopped engine is started again by provision.
    kube.ready = true
    await run(Effect.flatMap(EngineProvisioner, (p) => p.stop(id)))
    await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    expect(kube.objects.get(statefulSetPath(id))!["spec"].replicas).toBe(1)
  })

  it("provision waits for a ready replica, within the configured timeout", async () => {
    kube.ready = false
    const waited = await run(
      Effect.gen(function* () {
        const provisioner = yield* EngineProvisioner
        const fiber = yield* Effect.fork(provisioner.provision("con_slow"))
        yield* Effect.sleep(Duration.millis(300))
        const early = yield* Fiber.poll(fiber)
        kube.ready = true
        const engine = yield* Fiber.join(fiber)
        return { early: Option.isSome(early), engine }
      })
    )
    expect(waited.early).toBe(false)
    expect(waited.engine.connectorId).toBe("con_slow")
    expect(waited.engine.fileCopyClone).toBe(false)
    // It asked again while it waited (how often in 300 ms depends on the machine's load).
    expect(kube.log.filter((r) => r.method === "GET" && r.path === statefulSetPath("con_slow")).length).toBeGreaterThan(1)

    kube.ready = false
    const exit = await runExit(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_never")), { ENGINE_READY_TIMEOUT: "300 millis" })
    const error = failureOf(exit)
    expect(error).toBeInstanceOf(EngineError)
    expect(error).toMatchObject({ step: "wait ready", connectorId: "con_never" })
  })

  it("destroy deletes the StatefulSet, Service, ConfigMap, claims and Secret, and tolerates their absence", async () => {
    const id = "con_gone"
    await run(Effect.flatMap(EngineProvisioner, (p) => p.provision(id)))
    await run(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_other")))
    expect(kube.ofKind("/api/v1/namespaces/engines/persistentvolumeclaims")).toHaveLength(2)

    await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(id)))
    const left = [...kube.objects.keys()]
    expect(left.filter((path) => path.includes(engineName(id)))).toEqual([])
    // The other engine is untouched.
    expect(left.filter((path) => path.includes(engineName("con_other")))).toHaveLength(5)
    const pvcDelete = kube.log.find((r) => r.method === "DELETE" && r.path.endsWith("/persistentvolumeclaims"))!
    expect(pvcDelete.query.get("labelSelector")).toBe(`app.kubernetes.io/name=scion-engine,app.kubernetes.io/instance=${engineName(id)}`)

    // Every DELETE answers 404 now: fine.
    kube.log.length = 0
    await run(Effect.flatMap(EngineProvisioner, (p) => p.destroy(id)))
    expect(kube.log.filter((r) => r.method === "DELETE")).toHaveLength(5)

    for (const op of ["status", "start", "stop"] as const) {
      const exit = await runExit(Effect.flatMap(EngineProvisioner, (p) => p[op](id)))
      expect(failureOf(exit)).toBeInstanceOf(EngineNotFound)
    }
  })

  it("an API refusal is an EngineError whose message carries no secret", async () => {
    kube.forbid = (method, path) => method === "PATCH" && path.includes("/secrets/")
    const exit = await runExit(Effect.flatMap(EngineProvisioner, (p) => p.provision("con_denied")))
    const error = failureOf(exit)
    expect(error).toBeInstanceOf(EngineError)
    const stored = kube.objects.get(secretPath("con_denied"))!
    const password = fromB64(stored["data"].password)
    const key = fromB64(stored["data"]["tls.key"])
    const message = (error as EngineError).message
    expect(error).toMatchObject({ step: "apply Secret", connectorId: "con_denied" })
    expect(message).toContain("403")
    expect(message).toContain("Forbidden")
    // The fake echoed the Secret's data: it was scrubbed, not merely cut off.
    expect(message).toContain("[redacted]")
    for (const secret of [password, Buffer.from(password).toString("base64"), stored["data"]["tls.key"], key.split("\n")[1]]) {
      expect(message).not.toContain(secret)
    }
    expect(JSON.stringify(error)).not.toContain(password)

    // Refused reads too (RBAC missing altogether).
    kube.forbid = () => true
    const denied = failureOf(await runExit(Effect.flatMap(EngineProvisioner, (p) => p.status("con_denied"))))
    expect(denied).toMatchObject({ _tag: "EngineError", step: "read statefulset" })
    expect((denied as EngineError).message).toMatch(/403/)
  })

  it("an unreachable API server and an unsafe connector id are EngineErrors", async () => {
    const unreachable = failureOf(
      await runExit(Effect.flatMap(EngineProvisioner, (p) => p.status("con_x")), { KUBERNETES_API_URL: "http://127.0.0.1:1" })
    )
    expect(unreachable).toMatchObject({ _tag: "EngineError", step: "read statefulset" })
    expect((unreachable as EngineError).message).toContain("unreachable")
    const unsafe = failureOf(await runExit(Effect.flatMap(EngineProvisioner, (p) => p.provision("../etc"))))
    expect(unsafe).toMatchObject({ _tag: "EngineError", step: "validate" })
    expect(kube.log).toHaveLength(0)
  })
})
