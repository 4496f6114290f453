/**
 * The Kubernetes EngineProvisioner adapter: one single-replica Postgres StatefulSet per connector,
 * with a ClusterIP Service, a ConfigMap (pg_hba.conf) and a Secret (superuser password and the
 * server's TLS certificate and key), in one namespace (ENGINE_NAMESPACE).
 *
 * Two halves:
 * - pure render functions (`renderEngine` and friends, `kubernetes/EngineManifests.ts`, with the
 *   certificate of `kubernetes/SelfSignedCertificate.ts`) producing the objects, unit-tested;
 * - an adapter speaking the API server's REST wire format (`kubernetes/KubernetesApi.ts`: over
 *   `node:https` with the service-account CA and bearer token): server-side apply of the objects,
 *   the StatefulSet's `scale` subresource
 *   for stop/start, `status.readyReplicas` for readiness, DELETE (collection, by label, for the
 *   PersistentVolumeClaims) for destroy.
 *
 * The Secret is the engine's record: it is created once (POST, so two replicas racing agree on the
 * one that won) and read back by every later provision; its password and certificate are never
 * regenerated. TLS: a self-signed EC P-256 certificate is made in-process (no openssl, no
 * cert-manager needed), naming the Service's DNS names; clients use `sslmode=require`, or
 * verify-full with `tls.crt` from the Secret as their CA.
 */
import { createPrivateKey } from "node:crypto"
import { readFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { Config, Duration, Effect, Layer, Option, Redacted, Schedule } from "effect"
import { ENGINE_PORT, type EngineMaterial, FIELD_MANAGER, SUPERUSER, engineHost, engineName, generateMaterial, renderEngine, renderSecret, selectorLabels, tlsSecretName } from "./kubernetes/EngineManifests.js"
import { type ApiRequest, collectionPath, type Kind, kubernetesSender, objectPath, scrub, statusMessage } from "./kubernetes/KubernetesApi.js"
import { type Engine, EngineError, EngineNotFound, EngineProvisioner, perConnectorLock, validateConnectorId, type EngineStatus } from "./EngineProvisioner.js"

// The pure halves: the objects rendered, and the certificate they carry.
export * from "./kubernetes/EngineManifests.js"
export * from "./kubernetes/SelfSignedCertificate.js"

// ---------------------------------------------------------------------------------------------
// Options and configuration

export interface KubernetesEngineResources {
  readonly requests: { readonly cpu: string; readonly memory: string }
  readonly limits: { readonly cpu: string; readonly memory: string }
}

/** What the rendered objects depend on. */
export interface EngineRenderOptions {
  readonly namespace: string
  /** The Postgres image (official `postgres` image layout: entrypoint, uid 999, pg_isready). */
  readonly image: string
  /** None: the cluster's default StorageClass. */
  readonly storageClass: Option.Option<string>
  readonly storageSize: string
  readonly resources: KubernetesEngineResources
  /** The engine host is `<service>.<namespace>.<serviceDnsSuffix>` (`svc`, or `svc.cluster.local`). */
  readonly serviceDnsSuffix: string
  readonly maxReplicationSlots: number
  readonly maxWalSenders: number
  readonly maxLogicalReplicationWorkers: number
  /**
   * `clone` when the StorageClass's filesystem can reflink (XFS with reflink=1, btrfs): Postgres 18
   * then clones a template database's files for a branch. Default `copy`.
   */
  readonly fileCopyMethod: "copy" | "clone"
  /**
   * A cert-manager Issuer or ClusterIssuer that signs the engines' certificates (a Certificate per
   * engine, its Secret `<engine>-tls` mounted by the pod); none: the self-signed certificate kept
   * in the engine's Secret.
   */
  readonly certificateIssuer: Option.Option<{ readonly name: string; readonly kind: "Issuer" | "ClusterIssuer" }>
}

export interface KubernetesEngineOptions extends EngineRenderOptions {
  /** The API server, e.g. `https://kubernetes.default.svc`. */
  readonly apiUrl: string
  /** The bearer token file (re-read on every request: projected tokens rotate); absent: no token. */
  readonly tokenPath: string
  /** The API server's CA bundle; absent: the system's CAs. */
  readonly caPath: string
  /** How long provision and start wait for `readyReplicas >= 1`, and how often they look. */
  readonly readyTimeout: Duration.Duration
  readonly pollInterval: Duration.Duration
  /** Per-request timeout. */
  readonly requestTimeout: Duration.Duration
  /** The PEM file of the authority behind certificateIssuer, served to clients that verify; none: not served. */
  readonly certificateAuthorityFile: Option.Option<string>
}

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

/**
 * ENGINE_* and KUBERNETES_* configuration of the Kubernetes adapter (see the unit's README,
 * "Engines: the Kubernetes adapter"). ENGINE_NAMESPACE defaults to the pod's own namespace (the
 * service account's `namespace` file), else `default`.
 */
export const KubernetesEngineConfig: Config.Config<KubernetesEngineOptions> = Config.all({
  apiUrl: Config.string("KUBERNETES_API_URL").pipe(Config.withDefault("https://kubernetes.default.svc")),
  tokenPath: Config.string("KUBERNETES_TOKEN_PATH").pipe(Config.withDefault(join(SERVICE_ACCOUNT_DIR, "token"))),
  caPath: Config.string("KUBERNETES_CA_PATH").pipe(Config.withDefault(join(SERVICE_ACCOUNT_DIR, "ca.crt"))),
  namespace: Config.option(Config.string("ENGINE_NAMESPACE")),
  image: Config.string("ENGINE_IMAGE").pipe(Config.withDefault("postgres:18")),
  storageClass: Config.option(Config.string("ENGINE_STORAGE_CLASS")),
  storageSize: Config.string("ENGINE_STORAGE_SIZE").pipe(Config.withDefault("10Gi")),
  resources: Config.all({
    requests: Config.all({
      cpu: Config.string("ENGINE_CPU_REQUEST").pipe(Config.withDefault("250m")),
      memory: Config.string("ENGINE_MEMORY_REQUEST").pipe(Config.withDefault("512Mi"))
    }),
    limits: Config.all({
      cpu: Config.string("ENGINE_CPU_LIMIT").pipe(Config.withDefault("2")),
      memory: Config.string("ENGINE_MEMORY_LIMIT").pipe(Config.withDefault("2Gi"))
    })
  }),
  serviceDnsSuffix: Config.string("ENGINE_SERVICE_DNS_SUFFIX").pipe(Config.withDefault("svc")),
  maxReplicationSlots: Config.integer("ENGINE_MAX_REPLICATION_SLOTS").pipe(Config.withDefault(16)),
  maxWalSenders: Config.integer("ENGINE_MAX_WAL_SENDERS").pipe(Config.withDefault(16)),
  maxLogicalReplicationWorkers: Config.integer("ENGINE_MAX_LOGICAL_REPLICATION_WORKERS").pipe(Config.withDefault(8)),
  fileCopyMethod: Config.literal("copy", "clone")("ENGINE_FILE_COPY_METHOD").pipe(Config.withDefault("copy" as const)),
  readyTimeout: Config.duration("ENGINE_READY_TIMEOUT").pipe(Config.withDefault(Duration.minutes(5))),
  pollInterval: Config.duration("ENGINE_READY_POLL_INTERVAL").pipe(Config.withDefault(Duration.seconds(2))),
  requestTimeout: Config.duration("KUBERNETES_REQUEST_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30))),
  certificateIssuer: Config.option(
    Config.all({
      name: Config.string("ENGINE_CERT_ISSUER"),
      kind: Config.literal("Issuer", "ClusterIssuer")("ENGINE_CERT_ISSUER_KIND").pipe(Config.withDefault("Issuer" as const))
    })
  ),
  certificateAuthorityFile: Config.option(Config.string("ENGINE_CA_CERT_FILE"))
}).pipe(
  Config.map(({ namespace, ...rest }) => ({ ...rest, namespace: Option.getOrElse(namespace, () => "") }))
)

export const makeKubernetesEngineProvisioner = (options: KubernetesEngineOptions) =>
  Effect.gen(function* () {
    const apiUrl = options.apiUrl.replace(/\/+$/, "")
    const ca = yield* Effect.promise(() => readFile(options.caPath, "utf8").catch(() => undefined))
    const namespace =
      options.namespace.length > 0
        ? options.namespace
        : yield* Effect.promise(() =>
            readFile(join(dirname(options.tokenPath), "namespace"), "utf8").then((ns) => ns.trim() || "default", () => "default")
          )
    const render: EngineRenderOptions = { ...options, namespace }
    const timeoutMs = Duration.toMillis(options.requestTimeout)

    const send = kubernetesSender({ apiUrl, ca, timeoutMs })

    /** One API call; any answer (2xx or not) is returned, only transport failures fail. */
    const call = (connectorId: string, step: string, request: ApiRequest) =>
      Effect.gen(function* () {
        const token = yield* Effect.promise(() => readFile(options.tokenPath, "utf8").then((t) => t.trim(), () => undefined))
        return yield* Effect.tryPromise({
          try: (signal) => send(request, token, signal),
          catch: (cause) =>
            new EngineError({
              connectorId,
              step,
              message: `Kubernetes API unreachable (${request.method} ${request.path}): ${cause instanceof Error ? cause.message : String(cause)}`
            })
        })
      }).pipe(Effect.withSpan(`KubernetesEngineProvisioner.${request.method}`, { attributes: { "http.path": request.path } }))

    /** Fails with an EngineError for any status outside `ok`; the message is scrubbed of `secrets`. */
    const ask = (
      connectorId: string,
      step: string,
      request: ApiRequest,
      ok: ReadonlyArray<number> = [200, 201, 202],
      secrets: ReadonlyArray<string> = []
    ) =>
      call(connectorId, step, request).pipe(
        Effect.flatMap((response) =>
          ok.includes(response.status)
            ? Effect.succeed(response)
            : Effect.fail(
                new EngineError({
                  connectorId,
                  step,
                  // Scrubbed before shortening, so no piece of a secret survives at the cut.
                  message: `Kubernetes API answered ${response.status} to ${request.method} ${request.path.split("?")[0]}: ${scrub(statusMessage(response.body), secrets).slice(0, 500)}`
                })
              )
        )
      )

    const apply = (connectorId: string, kind: Kind, object: { readonly metadata: { readonly name: string } }, secrets: ReadonlyArray<string> = []) =>
      ask(
        connectorId,
        `apply ${kind}`,
        {
          method: "PATCH",
          path: `${objectPath(kind, namespace, object.metadata.name)}?fieldManager=${FIELD_MANAGER}&force=true`,
          body: object,
          contentType: "application/apply-patch+yaml"
        },
        [200, 201],
        secrets
      )

    // --- the Secret: the engine's record ---------------------------------------------------------

    const decodeField = (data: Record<string, unknown>, key: string) => {
      const value = data[key]
      return typeof value === "string" ? Buffer.from(value, "base64").toString("utf8") : undefined
    }

    const materialOf = (connectorId: string, body: unknown): Effect.Effect<EngineMaterial, EngineError> => {
      const data = (typeof body === "object" && body !== null ? (body as { data?: unknown }).data : undefined) ?? {}
      const fields = typeof data === "object" && data !== null ? (data as Record<string, unknown>) : {}
      const password = decodeField(fields, "password")
      const certificate = decodeField(fields, "tls.crt")
      const key = decodeField(fields, "tls.key")
      if (!password || !certificate || !key) {
        return Effect.fail(new EngineError({ connectorId, step: "read secret", message: `Secret ${engineName(connectorId)} lacks password, tls.crt or tls.key` }))
      }
      try {
        createPrivateKey(key)
      } catch {
        return Effect.fail(new EngineError({ connectorId, step: "read secret", message: `Secret ${engineName(connectorId)} holds no valid tls.key` }))
      }
      return Effect.succeed({ password: Redacted.make(password), tls: { certificate, key: Redacted.make(key) } })
    }

    const readSecret = (connectorId: string) =>
      ask(connectorId, "read secret", { method: "GET", path: objectPath("Secret", namespace, engineName(connectorId)) }, [200, 404]).pipe(
        Effect.flatMap((response) =>
          response.status === 404 ? Effect.succeed(Option.none<EngineMaterial>()) : Effect.map(materialOf(connectorId, response.body), Option.some)
        )
      )

    /** The existing material, or new material created with POST (409: another writer won; read theirs). */
    const ensureSecret = (connectorId: string) =>
      Effect.gen(function* () {
        const existing = yield* readSecret(connectorId)
        if (Option.isSome(existing)) return { material: existing.value, created: false }
        const material = generateMaterial(connectorId, render)
        const secrets = secretValues(material)
        const created = yield* ask(
          connectorId,
          "create secret",
          { method: "POST", path: `${collectionPath("Secret", namespace)}?fieldManager=${FIELD_MANAGER}`, body: renderSecret(connectorId, render, material) },
          [200, 201, 409],
          secrets
        )
        if (created.status !== 409) return { material, created: true }
        const winner = yield* readSecret(connectorId)
        return Option.isSome(winner)
          ? { material: winner.value, created: false }
          : yield* Effect.fail(new EngineError({ connectorId, step: "create secret", message: "the Secret was created and removed concurrently" }))
      })

    const secretValues = (material: EngineMaterial) => {
      const key = Redacted.value(material.tls.key)
      const keyBody = key.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")
      return [Redacted.value(material.password), key, keyBody]
    }

    // --- the StatefulSet ---------------------------------------------------------------------

    interface StatefulSetState {
      readonly replicas: number
      readonly readyReplicas: number
    }

    const readStatefulSet = (connectorId: string): Effect.Effect<Option.Option<StatefulSetState>, EngineError> =>
      ask(connectorId, "read statefulset", { method: "GET", path: objectPath("StatefulSet", namespace, engineName(connectorId)) }, [200, 404]).pipe(
        Effect.map((response) => {
          if (response.status === 404) return Option.none()
          const body = response.body as { spec?: { replicas?: unknown }; status?: { readyReplicas?: unknown } } | undefined
          const replicas = typeof body?.spec?.replicas === "number" ? body.spec.replicas : 1
          const readyReplicas = typeof body?.status?.readyReplicas === "number" ? body.status.readyReplicas : 0
          return Option.some({ replicas, readyReplicas })
        })
      )

    const requireStatefulSet = (connectorId: string) =>
      readStatefulSet(connectorId).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(new EngineNotFound({ connectorId })), onSome: Effect.succeed }))
      )

    const scale = (connectorId: string, replicas: 0 | 1) =>
      ask(
        connectorId,
        replicas === 0 ? "stop" : "start",
        {
          method: "PATCH",
          path: `${objectPath("StatefulSet", namespace, engineName(connectorId))}/scale?fieldManager=${FIELD_MANAGER}`,
          body: { spec: { replicas } },
          contentType: "application/merge-patch+json"
        },
        [200, 201, 404]
      ).pipe(Effect.flatMap((response) => (response.status === 404 ? Effect.fail(new EngineNotFound({ connectorId })) : Effect.void)))

    /** Polls until a replica is ready, within ENGINE_READY_TIMEOUT. */
    const waitReady = (connectorId: string) =>
      readStatefulSet(connectorId).pipe(
        Effect.flatMap(
          Option.match({
            onNone: () => Effect.fail(new EngineError({ connectorId, step: "wait ready", message: "the StatefulSet disappeared" })),
            onSome: (state) => Effect.succeed(state.readyReplicas >= 1)
          })
        ),
        Effect.repeat({ schedule: Schedule.spaced(options.pollInterval), until: (ready) => ready }),
        Effect.timeoutFail({
          duration: options.readyTimeout,
          onTimeout: () =>
            new EngineError({
              connectorId,
              step: "wait ready",
              message: `StatefulSet ${namespace}/${engineName(connectorId)} has no ready replica after ${Duration.format(options.readyTimeout)}`
            })
        }),
        Effect.asVoid,
        Effect.withSpan("KubernetesEngineProvisioner.waitReady")
      )

    const engineOf = (connectorId: string, material: EngineMaterial): Engine => ({
      connectorId,
      host: engineHost(connectorId, render),
      port: ENGINE_PORT,
      superuser: { username: SUPERUSER, password: material.password },
      dataDir: `pvc:${namespace}/data-${engineName(connectorId)}-0`,
      tls: true,
      // The StatefulSet's one pod.
      instanceName: `${engineName(connectorId)}-0`,
      fileCopyClone: options.fileCopyMethod === "clone"
    })

    const locked = perConnectorLock()
    const validate = validateConnectorId

    const provision = Effect.fn("KubernetesEngineProvisioner.provision")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      const { material, created } = yield* ensureSecret(connectorId)
      const secrets = secretValues(material)
      const objects = renderEngine(connectorId, render, material)
      // Applied again even when it existed: labels converge; the values are the ones read back.
      yield* apply(connectorId, "Secret", objects.secret, secrets)
      if (Option.isSome(objects.certificate)) yield* apply(connectorId, "Certificate", objects.certificate.value)
      yield* apply(connectorId, "ConfigMap", objects.configMap)
      yield* apply(connectorId, "Service", objects.service)
      yield* apply(connectorId, "StatefulSet", objects.statefulSet)
      yield* waitReady(connectorId)
      yield* Effect.logInfo(created ? "engine provisioned" : "engine already provisioned").pipe(
        Effect.annotateLogs({ connectorId, namespace, name: engineName(connectorId), host: engineHost(connectorId, render) })
      )
      return engineOf(connectorId, material)
    }, (effect, connectorId) => locked(connectorId)(effect))

    const start = Effect.fn("KubernetesEngineProvisioner.start")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      yield* requireStatefulSet(connectorId)
      const material = yield* readSecret(connectorId).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(new EngineNotFound({ connectorId })), onSome: Effect.succeed }))
      )
      yield* scale(connectorId, 1)
      yield* waitReady(connectorId)
      return engineOf(connectorId, material)
    }, (effect, connectorId) => locked(connectorId)(effect))

    const stop = Effect.fn("KubernetesEngineProvisioner.stop")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      yield* scale(connectorId, 0)
      yield* Effect.logInfo("engine stopped").pipe(Effect.annotateLogs({ connectorId }))
    }, (effect, connectorId) => locked(connectorId)(effect))

    const remove = (connectorId: string, kind: Kind) =>
      ask(connectorId, `delete ${kind}`, { method: "DELETE", path: objectPath(kind, namespace, engineName(connectorId)) }, [200, 202, 404])

    const destroy = Effect.fn("KubernetesEngineProvisioner.destroy")(function* (connectorId: string) {
      yield* Effect.annotateCurrentSpan("connector.id", connectorId)
      yield* validate(connectorId)
      yield* remove(connectorId, "StatefulSet")
      yield* remove(connectorId, "Service")
      yield* remove(connectorId, "ConfigMap")
      if (Option.isSome(options.certificateIssuer)) {
        yield* ask(connectorId, "delete Certificate", { method: "DELETE", path: objectPath("Certificate", namespace, tlsSecretName(connectorId)) }, [200, 202, 404])
        // cert-manager leaves the Secret it wrote behind.
        yield* ask(connectorId, "delete Secret", { method: "DELETE", path: objectPath("Secret", namespace, tlsSecretName(connectorId)) }, [200, 202, 404])
      }
      const selector = Object.entries(selectorLabels(connectorId))
        .map(([key, value]) => `${key}=${value}`)
        .join(",")
      yield* ask(
        connectorId,
        "delete PersistentVolumeClaim",
        { method: "DELETE", path: `${collectionPath("PersistentVolumeClaim", namespace)}?labelSelector=${encodeURIComponent(selector)}` },
        [200, 202, 404]
      )
      // Last: while it exists, the engine can be found and destroyed again.
      yield* remove(connectorId, "Secret")
      yield* Effect.logInfo("engine destroyed").pipe(Effect.annotateLogs({ connectorId, namespace }))
    }, (effect, connectorId) => locked(connectorId)(effect))

    const status = Effect.fn("KubernetesEngineProvisioner.status")(function* (connectorId: string) {
      yield* validate(connectorId)
      const state = yield* requireStatefulSet(connectorId)
      const result: EngineStatus = {
        connectorId,
        state: state.readyReplicas >= 1 ? "running" : "stopped",
        host: engineHost(connectorId, render),
        port: ENGINE_PORT
      }
      return result
    })

    const certificateAuthority = Option.match(options.certificateAuthorityFile, {
      onNone: () => Effect.succeed(Option.none<string>()),
      onSome: (file) =>
        Effect.tryPromise({
          try: () => readFile(file, "utf8"),
          catch: (cause) => new EngineError({ connectorId: "-", step: "certificate authority", message: cause instanceof Error ? cause.message : String(cause) })
        }).pipe(Effect.map(Option.some))
    })

    return EngineProvisioner.of({ provision, start, stop, destroy, status, certificateAuthority })
  })

/** The Kubernetes adapter from KUBERNETES_* and ENGINE_* config. */
export const KubernetesEngineProvisionerLive = Layer.effect(
  EngineProvisioner,
  Effect.flatMap(KubernetesEngineConfig, makeKubernetesEngineProvisioner)
)
