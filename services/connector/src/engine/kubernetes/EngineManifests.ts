import { createHash, randomBytes } from "node:crypto"
import type { EngineRenderOptions } from "../KubernetesEngineProvisioner.js"
import { Option, Redacted } from "effect"
import { selfSignedCertificate, type TlsMaterial } from "./SelfSignedCertificate.js"

/**
 * The Kubernetes objects of one engine, rendered by pure functions (unit-tested): names and labels
 * within Kubernetes' limits, the Secret (the engine's record), the ConfigMap (pg_hba.conf), the
 * ClusterIP Service and the single-replica StatefulSet.
 */

// ---------------------------------------------------------------------------------------------
// Names and labels

const NAME_PREFIX = "scion-engine-"
/**
 * The longest object name: a StatefulSet's pods carry `controller-revision-hash: <name>-<10 chars>`,
 * a label value (≤ 63), so the StatefulSet's name stays ≤ 52.
 */
export const MAX_ENGINE_NAME = 52
export const ENGINE_PORT = 5432
export const SUPERUSER = "postgres"
export const FIELD_MANAGER = "scion-connector"
/** uid and gid of `postgres` in the official image. */
const POSTGRES_UID = 999

const hashOf = (value: string, length: number) => createHash("sha256").update(value).digest("hex").slice(0, length)

/**
 * The one name of every object of a connector's engine (Secret, ConfigMap, Service, StatefulSet):
 * `scion-engine-<id>` lowercased, a DNS-1035 label of at most 52 characters. When lowercasing or
 * replacing characters lost information (`con_A` vs `con-a`) or the id had to be shortened, an
 * 8-hex-digit hash of the exact id is appended, so distinct ids never share a name.
 */
export const engineName = (connectorId: string): string => {
  const slug = connectorId.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+/g, "-").replace(/^-|-$/g, "")
  const plain = `${NAME_PREFIX}${slug}`
  if (slug === connectorId && slug.length > 0 && plain.length <= MAX_ENGINE_NAME) return plain
  const hash = hashOf(connectorId, 8)
  const room = MAX_ENGINE_NAME - NAME_PREFIX.length - hash.length - 1
  const head = slug.slice(0, room).replace(/-+$/, "")
  return head.length > 0 ? `${NAME_PREFIX}${head}-${hash}` : `${NAME_PREFIX}${hash}`
}

/** A label value (≤ 63, alphanumeric ends, `[A-Za-z0-9_.-]`): the id itself, or its hash when it cannot be one. */
export const connectorIdLabel = (connectorId: string): string =>
  /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/.test(connectorId) ? connectorId : `sha256-${hashOf(connectorId, 40)}`

export const LABEL_NAME = "app.kubernetes.io/name"
export const LABEL_INSTANCE = "app.kubernetes.io/instance"
export const LABEL_CONNECTOR = "scion.dev/connector-id"

/** The labels selecting one engine's pods and claims. */
export const selectorLabels = (connectorId: string) => ({
  [LABEL_NAME]: "scion-engine",
  [LABEL_INSTANCE]: engineName(connectorId)
})

const labelsOf = (connectorId: string) => ({
  ...selectorLabels(connectorId),
  "app.kubernetes.io/component": "branching-engine",
  "app.kubernetes.io/part-of": "scion",
  "app.kubernetes.io/managed-by": FIELD_MANAGER,
  [LABEL_CONNECTOR]: connectorIdLabel(connectorId)
})

const metadataOf = (connectorId: string, options: EngineRenderOptions) => ({
  name: engineName(connectorId),
  namespace: options.namespace,
  labels: labelsOf(connectorId),
  // The exact id, whatever the label had to become.
  annotations: { [LABEL_CONNECTOR]: connectorId }
})

/** The host clients are given: the Service's DNS name. */
export const engineHost = (connectorId: string, options: Pick<EngineRenderOptions, "namespace" | "serviceDnsSuffix">) =>
  `${engineName(connectorId)}.${options.namespace}.${options.serviceDnsSuffix}`

/** The DNS names the certificate carries: every way a pod of the cluster may name the Service. */
export const engineDnsNames = (connectorId: string, options: Pick<EngineRenderOptions, "namespace" | "serviceDnsSuffix">) => {
  const name = engineName(connectorId)
  return [...new Set([name, `${name}.${options.namespace}`, `${name}.${options.namespace}.svc`, engineHost(connectorId, options)])]
}

// ---------------------------------------------------------------------------------------------
// Rendering

/** What the engine's Secret holds: generated once, then only ever read back. */
export interface EngineMaterial {
  readonly password: Redacted.Redacted<string>
  readonly tls: TlsMaterial
}

export const generateMaterial = (connectorId: string, options: Pick<EngineRenderOptions, "namespace" | "serviceDnsSuffix">): EngineMaterial => ({
  password: Redacted.make(randomBytes(24).toString("base64url")),
  tls: selfSignedCertificate(engineName(connectorId), engineDnsNames(connectorId, options))
})

export const b64 = (value: string) => Buffer.from(value, "utf8").toString("base64")

/** The Secret: `username`, `password` (the superuser's), `tls.crt`, `tls.key`. Opaque: it holds both. */
export const renderSecret = (connectorId: string, options: EngineRenderOptions, material: EngineMaterial) => ({
  apiVersion: "v1" as const,
  kind: "Secret" as const,
  metadata: metadataOf(connectorId, options),
  type: "Opaque",
  data: {
    username: b64(SUPERUSER),
    password: b64(Redacted.value(material.password)),
    "tls.crt": b64(material.tls.certificate),
    "tls.key": b64(Redacted.value(material.tls.key))
  }
})

/** Client authentication: TLS and SCRAM over TCP; the local socket (probes, the image's init) SCRAM. */
export const PG_HBA_CONF = [
  "# Written by Scion's Kubernetes engine provisioner: TCP clients must use TLS and SCRAM.",
  "local     all  all                scram-sha-256",
  "hostssl   all  all  0.0.0.0/0     scram-sha-256",
  "hostssl   all  all  ::/0          scram-sha-256",
  "hostnossl all  all  0.0.0.0/0     reject",
  "hostnossl all  all  ::/0          reject",
  ""
].join("\n")

export const renderConfigMap = (connectorId: string, options: EngineRenderOptions) => ({
  apiVersion: "v1" as const,
  kind: "ConfigMap" as const,
  metadata: metadataOf(connectorId, options),
  data: { "pg_hba.conf": PG_HBA_CONF }
})

/** A ClusterIP Service (a stable address across pod restarts); also the StatefulSet's serviceName. */
export const renderService = (connectorId: string, options: EngineRenderOptions) => ({
  apiVersion: "v1" as const,
  kind: "Service" as const,
  metadata: metadataOf(connectorId, options),
  spec: {
    type: "ClusterIP",
    selector: selectorLabels(connectorId),
    ports: [{ name: "postgres", port: ENGINE_PORT, targetPort: "postgres", protocol: "TCP", appProtocol: "postgresql" }]
  }
})

const DATA_MOUNT = "/var/lib/postgresql/data"
const TLS_MOUNT = "/etc/scion/tls"
const HBA_MOUNT = "/etc/scion/hba"

/** The server's settings, as `-c name=value` arguments (the image's entrypoint passes them to postgres). */
export const postgresSettings = (options: EngineRenderOptions): ReadonlyArray<readonly [string, string]> => [
  ["listen_addresses", "*"],
  ["port", String(ENGINE_PORT)],
  ["ssl", "on"],
  ["ssl_cert_file", `${TLS_MOUNT}/tls.crt`],
  ["ssl_key_file", `${TLS_MOUNT}/tls.key`],
  ["ssl_min_protocol_version", "TLSv1.2"],
  ["hba_file", `${HBA_MOUNT}/pg_hba.conf`],
  ["password_encryption", "scram-sha-256"],
  ["wal_level", "logical"],
  ["max_replication_slots", String(options.maxReplicationSlots)],
  ["max_wal_senders", String(options.maxWalSenders)],
  // The engine subscribes: one origin per subscription, apply and table-sync workers.
  ["max_active_replication_origins", String(options.maxReplicationSlots)],
  ["max_logical_replication_workers", String(options.maxLogicalReplicationWorkers)],
  ["max_sync_workers_per_subscription", "2"],
  // A failed apply (a schema change not followed yet) is retried soon after reconciliation fixed it.
  ["wal_retrieve_retry_interval", "500ms"],
  ["max_worker_processes", String(options.maxLogicalReplicationWorkers + 8)],
  ["max_connections", "100"],
  ["file_copy_method", options.fileCopyMethod]
]

const pgIsReady = ["pg_isready", "-h", "127.0.0.1", "-p", String(ENGINE_PORT), "-U", SUPERUSER, "-d", "postgres"]

export const renderStatefulSet = (connectorId: string, options: EngineRenderOptions, replicas: 0 | 1 = 1) => {
  const name = engineName(connectorId)
  const labels = labelsOf(connectorId)
  return {
    apiVersion: "apps/v1" as const,
    kind: "StatefulSet" as const,
    metadata: metadataOf(connectorId, options),
    spec: {
      replicas,
      serviceName: name,
      podManagementPolicy: "OrderedReady",
      updateStrategy: { type: "RollingUpdate" },
      // Deleting the StatefulSet keeps the claims (destroy deletes them by label, explicitly).
      persistentVolumeClaimRetentionPolicy: { whenDeleted: "Retain", whenScaled: "Retain" },
      selector: { matchLabels: selectorLabels(connectorId) },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 60,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: POSTGRES_UID,
            runAsGroup: POSTGRES_UID,
            fsGroup: POSTGRES_UID,
            fsGroupChangePolicy: "OnRootMismatch",
            seccompProfile: { type: "RuntimeDefault" }
          },
          containers: [
            {
              name: "postgres",
              image: options.image,
              args: postgresSettings(options).flatMap(([key, value]) => ["-c", `${key}=${value}`]),
              ports: [{ name: "postgres", containerPort: ENGINE_PORT, protocol: "TCP" }],
              env: [
                { name: "POSTGRES_USER", value: SUPERUSER },
                { name: "POSTGRES_PASSWORD", valueFrom: { secretKeyRef: { name, key: "password" } } },
                { name: "POSTGRES_INITDB_ARGS", value: "--auth-local=scram-sha-256 --auth-host=scram-sha-256 --encoding=UTF8 --locale=C" },
                // A subdirectory: the volume's root may hold lost+found.
                { name: "PGDATA", value: `${DATA_MOUNT}/pgdata` }
              ],
              readinessProbe: { exec: { command: pgIsReady }, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 3 },
              livenessProbe: { exec: { command: pgIsReady }, initialDelaySeconds: 30, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
              // initdb and crash recovery may take a while on a large volume.
              startupProbe: { exec: { command: pgIsReady }, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 120 },
              resources: {
                requests: { ...options.resources.requests },
                limits: { ...options.resources.limits }
              },
              securityContext: {
                runAsNonRoot: true,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ["ALL"] }
              },
              volumeMounts: [
                { name: "data", mountPath: DATA_MOUNT },
                { name: "tls", mountPath: TLS_MOUNT, readOnly: true },
                { name: "hba", mountPath: HBA_MOUNT, readOnly: true },
                { name: "run", mountPath: "/var/run/postgresql" },
                { name: "tmp", mountPath: "/tmp" },
                { name: "shm", mountPath: "/dev/shm" }
              ]
            }
          ],
          volumes: [
            {
              name: "tls",
              // Owned by root, group fsGroup, 0640: what postgres accepts for a key it does not own.
              secret: {
                secretName: Option.isSome(options.certificateIssuer) ? tlsSecretName(connectorId) : name,
                defaultMode: 0o640,
                items: [
                  { key: "tls.crt", path: "tls.crt" },
                  { key: "tls.key", path: "tls.key" }
                ]
              }
            },
            { name: "hba", configMap: { name, defaultMode: 0o644 } },
            { name: "run", emptyDir: {} },
            { name: "tmp", emptyDir: {} },
            { name: "shm", emptyDir: { medium: "Memory", sizeLimit: "256Mi" } }
          ]
        }
      },
      volumeClaimTemplates: [
        {
          metadata: { name: "data", labels: selectorLabels(connectorId) },
          spec: {
            accessModes: ["ReadWriteOnce"],
            ...Option.match(options.storageClass, { onNone: () => ({}), onSome: (storageClassName) => ({ storageClassName }) }),
            resources: { requests: { storage: options.storageSize } }
          }
        }
      ]
    }
  }
}

/** The Secret cert-manager writes the engine's certificate to, when an issuer signs it. */
export const tlsSecretName = (connectorId: string) => `${engineName(connectorId)}-tls`

/**
 * The cert-manager Certificate of an engine whose certificates an issuer signs: the Service's DNS
 * names, an ECDSA P-256 key (a new one on each renewal), server auth. Postgres reads the files at
 * start: a renewed certificate is served from the pod's next start.
 */
export const renderCertificate = (connectorId: string, options: EngineRenderOptions, issuer: { readonly name: string; readonly kind: "Issuer" | "ClusterIssuer" }) => ({
  apiVersion: "cert-manager.io/v1" as const,
  kind: "Certificate" as const,
  metadata: { ...metadataOf(connectorId, options), name: tlsSecretName(connectorId) },
  spec: {
    secretName: tlsSecretName(connectorId),
    commonName: engineName(connectorId),
    dnsNames: [...engineDnsNames(connectorId, options)],
    duration: "8760h",
    renewBefore: "720h",
    privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
    usages: ["server auth", "digital signature", "key encipherment"],
    issuerRef: { group: "cert-manager.io", kind: issuer.kind, name: issuer.name }
  }
})

/** Every object of one engine, in the order they are applied. */
export const renderEngine = (connectorId: string, options: EngineRenderOptions, material: EngineMaterial) => ({
  secret: renderSecret(connectorId, options, material),
  certificate: Option.map(options.certificateIssuer, (issuer) => renderCertificate(connectorId, options, issuer)),
  configMap: renderConfigMap(connectorId, options),
  service: renderService(connectorId, options),
  statefulSet: renderStatefulSet(connectorId, options)
})

