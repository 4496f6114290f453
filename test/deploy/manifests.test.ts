/**
 * Static checks for the Kubernetes manifests in deploy/base.
 *
 * The manifests are loaded the way kustomize would find them: starting at
 * deploy/base/kustomization.yaml and following every `resources` entry (files,
 * and directories holding a kustomization.yaml) recursively. When `kubectl` is
 * on PATH the same checks also run against the output of
 * `kubectl kustomize deploy/base`, which proves the base actually builds.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { UNIT_NODE_FLAGS } from "../../deploy/local/production-shape.mjs";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const baseDir = join(repoRoot, "deploy", "base");

// ---------------------------------------------------------------------------
// The subset of the Kubernetes API these checks look at.

type Labels = Record<string, string>;
type IntOrString = number | string;

interface Metadata {
  readonly name?: string;
  readonly labels?: Labels;
}
interface K8sObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: Metadata;
  readonly spec?: unknown;
  readonly data?: Record<string, unknown>;
  readonly stringData?: Record<string, unknown>;
}
interface Manifest {
  /** Where the document came from, for error messages. */
  readonly source: string;
  readonly obj: K8sObject;
}
interface Probe {
  readonly grpc?: { readonly port?: unknown; readonly service?: string };
  readonly httpGet?: unknown;
  readonly tcpSocket?: unknown;
  readonly exec?: unknown;
}
interface KeyRef {
  readonly name?: string;
  readonly key?: string;
  readonly optional?: boolean;
}
interface EnvVar {
  readonly name: string;
  readonly value?: unknown;
  readonly valueFrom?: {
    readonly secretKeyRef?: KeyRef;
    readonly configMapKeyRef?: KeyRef;
    readonly fieldRef?: unknown;
    readonly resourceFieldRef?: unknown;
  };
}
interface EnvFromSource {
  readonly configMapRef?: { readonly name?: string; readonly optional?: boolean };
  readonly secretRef?: { readonly name?: string };
  readonly prefix?: string;
}
interface SecurityContext {
  readonly runAsNonRoot?: boolean;
  readonly readOnlyRootFilesystem?: boolean;
  readonly allowPrivilegeEscalation?: boolean;
}
interface Container {
  readonly name?: string;
  readonly image?: string;
  readonly command?: ReadonlyArray<string>;
  readonly ports?: ReadonlyArray<{ readonly name?: string; readonly containerPort?: number }>;
  readonly env?: ReadonlyArray<EnvVar>;
  readonly envFrom?: ReadonlyArray<EnvFromSource>;
  readonly readinessProbe?: Probe;
  readonly livenessProbe?: Probe;
  readonly startupProbe?: Probe;
  readonly lifecycle?: {
    readonly preStop?: {
      readonly exec?: { readonly command?: ReadonlyArray<string> };
      readonly sleep?: { readonly seconds?: number };
    };
  };
  readonly resources?: {
    readonly requests?: Record<string, IntOrString>;
    readonly limits?: Record<string, IntOrString>;
  };
  readonly securityContext?: SecurityContext;
}
interface PodSpec {
  readonly containers?: ReadonlyArray<Container>;
  readonly terminationGracePeriodSeconds?: number;
  readonly securityContext?: SecurityContext;
}
interface DeploymentSpec {
  readonly replicas?: number;
  readonly selector?: { readonly matchLabels?: Labels; readonly matchExpressions?: unknown };
  readonly strategy?: {
    readonly type?: string;
    readonly rollingUpdate?: { readonly maxUnavailable?: IntOrString; readonly maxSurge?: IntOrString };
  };
  readonly template?: { readonly metadata?: Metadata; readonly spec?: PodSpec };
}
interface ServicePort {
  readonly name?: string;
  readonly port?: number;
  readonly targetPort?: IntOrString;
  readonly appProtocol?: string;
}
interface ServiceSpec {
  readonly type?: string;
  readonly selector?: Labels;
  readonly ports?: ReadonlyArray<ServicePort>;
}
interface PdbSpec {
  readonly minAvailable?: IntOrString;
  readonly maxUnavailable?: IntOrString;
  readonly selector?: { readonly matchLabels?: Labels; readonly matchExpressions?: unknown };
}

// ---------------------------------------------------------------------------
// What each unit is expected to look like (see deploy/README.md).

interface UnitExpectation {
  readonly image: string;
  readonly command: ReadonlyArray<string>;
  /** containerPort name -> number */
  readonly ports: Record<string, number>;
  /** Port of the grpc.health.v1 server used by the kubelet's gRPC probes. */
  readonly healthPort: number;
  readonly service: ReadonlyArray<{
    readonly name: string;
    readonly port: number;
    readonly containerPort: number;
    readonly appProtocol: string;
  }>;
  /** Env vars that must be literal values in the Deployment. */
  readonly literalEnv: Record<string, string>;
  /** Env vars that must come from a ConfigMap (null: any non-empty value). */
  readonly configEnv: Record<string, string | null>;
  /** Env vars that must come from a secretKeyRef. */
  readonly secretEnv: Record<string, { readonly name: string; readonly key: string }>;
}

/** Every process serves Prometheus metrics on 9464 (METRICS_PORT), scraped through its Service. */
const METRICS_SERVICE_PORT = { name: "metrics", port: 9464, containerPort: 9464, appProtocol: "http" } as const

const UNITS: Record<"identity" | "operation" | "billing" | "connector" | "branch" | "gateway", UnitExpectation> = {
  identity: {
    image: "ghcr.io/scion/identity:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "services/identity/dist/server.mjs"],
    ports: { grpc: 50051, metrics: 9464 },
    healthPort: 50051,
    service: [{ name: "grpc", port: 50051, containerPort: 50051, appProtocol: "kubernetes.io/h2c" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "50051" },
    configEnv: { LOG_LEVEL: null, MAIL_ADAPTER: "log", BILLING_URL: "http://billing:50053" },
    secretEnv: {
      DATABASE_URL: { name: "identity-db", key: "url" },
      IDENTITY_SIGNING_KEY: { name: "identity-signing-key", key: "private_key_pem" },
      SERVICE_CREDENTIAL: { name: "scion-service-credential", key: "credential" },
    },
  },
  operation: {
    image: "ghcr.io/scion/operation:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "services/operation/dist/server.mjs"],
    ports: { grpc: 50052, metrics: 9464 },
    healthPort: 50052,
    service: [{ name: "grpc", port: 50052, containerPort: 50052, appProtocol: "kubernetes.io/h2c" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "50052" },
    configEnv: {
      LOG_LEVEL: null,
      NATS_URL: "nats://nats:4222",
      IDENTITY_URL: "http://identity:50051",
      OPERATION_SWEEP_INTERVAL_SECONDS: null,
      OPERATION_HEARTBEAT_DEADLINE_SECONDS: null,
    },
    secretEnv: {
      DATABASE_URL: { name: "operation-db", key: "url" },
    },
  },
  billing: {
    image: "ghcr.io/scion/billing:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "services/billing/dist/server.mjs"],
    ports: { grpc: 50053, metrics: 9464 },
    healthPort: 50053,
    service: [{ name: "grpc", port: 50053, containerPort: 50053, appProtocol: "kubernetes.io/h2c" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "50053" },
    configEnv: {
      LOG_LEVEL: null,
      NATS_URL: "nats://nats:4222",
      IDENTITY_URL: "http://identity:50051",
      PAYMENT_PROVIDER: "local",
      BILLING_EVENTS_DURABLE: "billing",
    },
    secretEnv: {
      DATABASE_URL: { name: "billing-db", key: "url" },
    },
  },
  connector: {
    image: "ghcr.io/scion/connector:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "services/connector/dist/server.mjs"],
    ports: { grpc: 50054, metrics: 9464 },
    healthPort: 50054,
    service: [{ name: "grpc", port: 50054, containerPort: 50054, appProtocol: "kubernetes.io/h2c" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "50054" },
    configEnv: {
      LOG_LEVEL: null,
      IDENTITY_URL: "http://identity:50051",
      BILLING_URL: "http://billing:50053",
      OPERATION_URL: "http://operation:50052",
      NATS_URL: "nats://nats:4222",
      AWS_SETUP_TEMPLATE_URL: null,
      SCION_AWS_ACCOUNT_ID: null,
      PREFLIGHT_CONNECT_TIMEOUT: "5 seconds",
      PREFLIGHT_QUERY_TIMEOUT: "10 seconds",
      DISCOVERY_QUERY_TIMEOUT: "60 seconds",
    },
    // Master keys only ever come from a Secret.
    secretEnv: {
      DATABASE_URL: { name: "connector-db", key: "url" },
      SECRET_KEYS: { name: "connector-secret-keys", key: "keys" },
      SECRET_ACTIVE_KEY_ID: { name: "connector-secret-keys", key: "active_key_id" },
      SERVICE_CREDENTIAL: { name: "scion-service-credential", key: "credential" },
    },
  },
  branch: {
    image: "ghcr.io/scion/branch:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "services/branch/dist/server.mjs"],
    ports: { grpc: 50055, metrics: 9464 },
    healthPort: 50055,
    service: [{ name: "grpc", port: 50055, containerPort: 50055, appProtocol: "kubernetes.io/h2c" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "50055" },
    configEnv: {
      LOG_LEVEL: null,
      IDENTITY_URL: "http://identity:50051",
      OPERATION_URL: "http://operation:50052",
      CONNECTOR_URL: "http://connector:50054",
      BILLING_URL: "http://billing:50053",
      NATS_URL: "nats://nats:4222",
      BRANCH_EVENTS_DURABLE: "branch",
      BRANCH_JOB_ACK_WAIT: null,
    },
    // Master keys (branch role passwords) only ever come from a Secret.
    secretEnv: {
      DATABASE_URL: { name: "branch-db", key: "url" },
      SECRET_KEYS: { name: "branch-secret-keys", key: "keys" },
      SECRET_ACTIVE_KEY_ID: { name: "branch-secret-keys", key: "active_key_id" },
      SERVICE_CREDENTIAL: { name: "scion-service-credential", key: "credential" },
    },
  },
  gateway: {
    image: "ghcr.io/scion/gateway:0.1.0",
    command: ["node", ...UNIT_NODE_FLAGS, "gateway/dist/server.mjs"],
    ports: { http: 8080, health: 8081, metrics: 9464 },
    healthPort: 8081,
    service: [{ name: "http", port: 80, containerPort: 8080, appProtocol: "http" }, METRICS_SERVICE_PORT],
    literalEnv: { PORT: "8080", HEALTH_PORT: "8081" },
    configEnv: { LOG_LEVEL: null, IDENTITY_URL: "http://identity:50051", OPERATION_URL: "http://operation:50052", BILLING_URL: "http://billing:50053", CONNECTOR_URL: "http://connector:50054", BRANCH_URL: "http://branch:50055" },
    secretEnv: {},
  },
};
const unitNames = Object.keys(UNITS) as Array<keyof typeof UNITS>;

/** Env var names that must never carry a literal value. */
const SECRET_ENV_NAME = /KEY|SECRET|PASSWORD|TOKEN|DATABASE_URL/i;
const MAX_MEMORY_LIMIT_BYTES = 256 * 2 ** 20;
/** Time the app needs to drain after SIGTERM, on top of the preStop sleep. */
const DRAIN_SECONDS = 10;

// ---------------------------------------------------------------------------
// Loading

const KUSTOMIZATION_FILES = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/**
 * Kustomization fields this loader understands. Anything else (patches,
 * generators, name prefixes, components, ...) could change the rendered
 * output in ways these checks would not see, so it fails the test until the
 * loader is taught about it.
 */
const UNDERSTOOD_KUSTOMIZATION_FIELDS = new Set([
  "apiVersion",
  "kind",
  "resources",
  "labels",
  "commonLabels",
  "commonAnnotations",
  "namespace",
]);

const rel = (path: string): string => relative(repoRoot, path);

const parseYamlStream = (text: string, source: string): Array<K8sObject> => {
  const out: Array<K8sObject> = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) {
      throw new Error(`${source}: invalid YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    if (typeof value !== "object" || Array.isArray(value)) {
      throw new Error(`${source}: a document is not a mapping`);
    }
    out.push(value as K8sObject);
  }
  return out;
};

const findKustomization = (dir: string): string | undefined =>
  KUSTOMIZATION_FILES.map((f) => join(dir, f)).find((p) => existsSync(p));

interface LoadedBase {
  readonly manifests: Array<Manifest>;
  readonly kustomizations: Array<{ readonly path: string; readonly doc: Record<string, unknown> }>;
  readonly files: Set<string>;
}

const loadKustomization = (dir: string, acc: LoadedBase, seen: Set<string>): void => {
  const path = findKustomization(dir);
  if (path === undefined) throw new Error(`${rel(dir)}: no kustomization.yaml`);
  if (seen.has(path)) throw new Error(`${rel(path)}: included twice (cycle or duplicate)`);
  seen.add(path);
  const docs = parseYamlStream(readFileSync(path, "utf8"), rel(path));
  if (docs.length !== 1) throw new Error(`${rel(path)}: expected exactly one document`);
  const doc = docs[0] as Record<string, unknown>;
  acc.kustomizations.push({ path, doc });
  for (const field of Object.keys(doc)) {
    if (!UNDERSTOOD_KUSTOMIZATION_FIELDS.has(field)) {
      throw new Error(`${rel(path)}: field "${field}" is not modelled by this test's loader`);
    }
  }
  const resources: unknown = doc["resources"] ?? [];
  if (!Array.isArray(resources) || resources.length === 0) {
    throw new Error(`${rel(path)}: resources must be a non-empty list`);
  }
  for (const entry of resources) {
    if (typeof entry !== "string" || entry.length === 0) {
      throw new Error(`${rel(path)}: resources entries must be non-empty strings`);
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(entry) || entry.startsWith("github.com/")) {
      throw new Error(`${rel(path)}: remote resource ${entry} is not allowed in the base`);
    }
    const target = resolve(dir, entry);
    if (!existsSync(target)) throw new Error(`${rel(path)}: resource ${entry} does not exist`);
    if (statSync(target).isDirectory()) {
      loadKustomization(target, acc, seen);
    } else {
      if (acc.files.has(target)) throw new Error(`${rel(target)}: listed twice`);
      acc.files.add(target);
      for (const obj of parseYamlStream(readFileSync(target, "utf8"), rel(target))) {
        acc.manifests.push({ source: rel(target), obj });
      }
    }
  }
};

const loadBase = (): LoadedBase => {
  const acc: LoadedBase = { manifests: [], kustomizations: [], files: new Set() };
  loadKustomization(baseDir, acc, new Set());
  return acc;
};

/** `kubectl kustomize deploy/base`, or undefined when kubectl is not installed. */
const kustomizeBuild = (): string | undefined => {
  const result = spawnSync("kubectl", ["kustomize", baseDir], { encoding: "utf8", timeout: 60_000 });
  if (result.error !== undefined) {
    if ((result.error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw result.error;
  }
  if (result.status !== 0) throw new Error(`kubectl kustomize failed:\n${result.stderr}`);
  return result.stdout;
};

// ---------------------------------------------------------------------------
// Helpers

const kindOf = (m: Manifest): string => m.obj.kind ?? "";
const nameOf = (m: Manifest): string => m.obj.metadata?.name ?? "";
const ofKind = (ms: ReadonlyArray<Manifest>, kind: string): Array<Manifest> =>
  ms.filter((m) => kindOf(m) === kind);

/** A selector selects `labels` if it is non-empty and every pair is present. */
const selects = (selector: Labels | undefined, labels: Labels | undefined): boolean =>
  selector !== undefined &&
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

const MEMORY_UNITS: Record<string, number> = {
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
};
const parseMemory = (q: IntOrString | undefined): number => {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(String(q ?? ""));
  if (m === null) throw new Error(`unsupported memory quantity: ${String(q)}`);
  return Number(m[1]) * (MEMORY_UNITS[m[2] ?? ""] ?? Number.NaN);
};
const parseCpu = (q: IntOrString | undefined): number => {
  const m = /^(\d+(?:\.\d+)?)(m)?$/.exec(String(q ?? ""));
  if (m === null) throw new Error(`unsupported cpu quantity: ${String(q)}`);
  return Number(m[1]) / (m[2] === "m" ? 1000 : 1);
};

const isZero = (v: IntOrString | undefined): boolean => v === 0 || v === "0" || v === "0%";
const isPositive = (v: IntOrString | undefined): boolean =>
  (typeof v === "number" && Number.isInteger(v) && v >= 1) ||
  (typeof v === "string" && /^\d+%$/.test(v) && parseInt(v, 10) > 0);

/** Seconds the preStop hook sleeps, or undefined when it does not sleep. */
const preStopSleepSeconds = (c: Container): number | undefined => {
  const preStop = c.lifecycle?.preStop;
  if (typeof preStop?.sleep?.seconds === "number") return preStop.sleep.seconds;
  const command = preStop?.exec?.command;
  if (command === undefined) return undefined;
  const m = /(?:^|[\s/])sleep\s+(\d+)\b/.exec(command.join(" "));
  return m === null ? undefined : Number(m[1]);
};

const containerPortNumbers = (c: Container): Array<number> =>
  (c.ports ?? []).map((p) => p.containerPort).filter((p): p is number => typeof p === "number");

/** Resolves a Service targetPort (name or number) against the pod's containers. */
const resolveTargetPort = (
  containers: ReadonlyArray<Container>,
  port: ServicePort,
): number | undefined => {
  const target = port.targetPort ?? port.port;
  for (const c of containers) {
    for (const p of c.ports ?? []) {
      if (typeof target === "string" ? p.name === target : p.containerPort === target) {
        return p.containerPort;
      }
    }
  }
  return undefined;
};

/** Where an env var's value comes from, after envFrom and env are applied. */
type EnvSource =
  | { readonly from: "literal"; readonly value: unknown }
  | { readonly from: "configMap"; readonly name: string; readonly value: unknown }
  | { readonly from: "secret"; readonly name: string | undefined; readonly key: string | undefined }
  | { readonly from: "other" };

const resolveEnv = (c: Container, configMaps: ReadonlyArray<Manifest>): Map<string, EnvSource> => {
  const env = new Map<string, EnvSource>();
  const configMap = (name: string | undefined): Manifest | undefined =>
    configMaps.find((m) => nameOf(m) === name);
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef === undefined) continue;
    const cm = configMap(from.configMapRef.name);
    for (const [k, v] of Object.entries(cm?.obj.data ?? {})) {
      env.set(`${from.prefix ?? ""}${k}`, { from: "configMap", name: nameOf(cm as Manifest), value: v });
    }
  }
  for (const e of c.env ?? []) {
    if (e.valueFrom?.secretKeyRef !== undefined) {
      const ref = e.valueFrom.secretKeyRef;
      env.set(e.name, { from: "secret", name: ref.name, key: ref.key });
    } else if (e.valueFrom?.configMapKeyRef !== undefined) {
      const ref = e.valueFrom.configMapKeyRef;
      env.set(e.name, {
        from: "configMap",
        name: ref.name ?? "",
        value: configMap(ref.name)?.obj.data?.[ref.key ?? ""],
      });
    } else if (e.valueFrom !== undefined) {
      env.set(e.name, { from: "other" });
    } else {
      env.set(e.name, { from: "literal", value: e.value });
    }
  }
  return env;
};

/** Secrets documented in deploy/base/<unit>/secrets.example.yaml, as "name/key". */
const documentedSecretKeys = (unit: string): Set<string> => {
  const path = join(baseDir, unit, "secrets.example.yaml");
  const keys = new Set<string>();
  if (!existsSync(path)) return keys;
  for (const obj of parseYamlStream(readFileSync(path, "utf8"), rel(path))) {
    if (obj.kind !== "Secret") continue;
    for (const k of Object.keys({ ...obj.data, ...obj.stringData })) {
      keys.add(`${obj.metadata?.name ?? ""}/${k}`);
    }
  }
  return keys;
};

// ---------------------------------------------------------------------------
// Checks

const kubectlOutput = kustomizeBuild();

const sources: Array<{
  readonly label: string;
  readonly skip: boolean;
  readonly load: () => Array<Manifest>;
}> = [
  { label: "source files (following kustomization resources)", skip: false, load: () => loadBase().manifests },
  {
    label: "kubectl kustomize output",
    skip: kubectlOutput === undefined,
    load: () =>
      parseYamlStream(kubectlOutput ?? "", "kubectl kustomize").map((obj) => ({
        source: "kubectl kustomize",
        obj,
      })),
  },
];

describe("deploy/base loader", () => {
  it("follows kustomization resources recursively and loads every unit's files", () => {
    const loaded = loadBase();
    const files = [...loaded.files].map(rel).sort();
    for (const unit of unitNames) {
      for (const f of ["configmap.yaml", "deployment.yaml", "service.yaml", "pdb.yaml"]) {
        expect(files).toContain(join("deploy", "base", unit, f));
      }
    }
    expect(loaded.kustomizations.map((k) => rel(k.path)).sort()).toEqual(
      [
        join("deploy", "base", "kustomization.yaml"),
        ...unitNames.map((u) => join("deploy", "base", u, "kustomization.yaml")),
      ].sort(),
    );
  });

  it("does not load the secrets example and applies the part-of label", () => {
    const loaded = loadBase();
    expect([...loaded.files].some((f) => f.endsWith("secrets.example.yaml"))).toBe(false);
    const root = loaded.kustomizations.find((k) => k.path === join(baseDir, "kustomization.yaml"));
    const labels = root?.doc["labels"];
    const commonLabels = root?.doc["commonLabels"] as Labels | undefined;
    const viaLabels =
      Array.isArray(labels) &&
      labels.some(
        (l: { pairs?: Labels }) => l.pairs?.["app.kubernetes.io/part-of"] === "scion",
      );
    expect(viaLabels || commonLabels?.["app.kubernetes.io/part-of"] === "scion").toBe(true);
  });

  it.each(unitNames.filter((u) => Object.keys(UNITS[u].secretEnv).length > 0))(
    "%s: secrets.example.yaml documents every referenced secret key",
    (unit) => {
      const documented = documentedSecretKeys(unit);
      for (const ref of Object.values(UNITS[unit].secretEnv)) {
        expect(documented).toContain(`${ref.name}/${ref.key}`);
      }
    },
  );
});

describe.each(sources)("manifests: $label", ({ load, skip }) => {
  let manifests: Array<Manifest> = [];
  beforeAll(() => {
    if (!skip) manifests = load();
  });

  describe.skipIf(skip)("whole base", () => {
    it("every document is a well-formed, uniquely named object", () => {
      expect(manifests.length).toBeGreaterThan(0);
      const ids = new Set<string>();
      for (const m of manifests) {
        expect(m.obj.apiVersion, m.source).toEqual(expect.any(String));
        expect(m.obj.kind, m.source).toEqual(expect.any(String));
        expect(nameOf(m), m.source).not.toBe("");
        const id = `${kindOf(m)}/${nameOf(m)}`;
        expect(ids.has(id), `duplicate ${id}`).toBe(false);
        ids.add(id);
      }
    });

    it("contains no Secret (secrets are created out of band)", () => {
      expect(ofKind(manifests, "Secret").map((m) => `${nameOf(m)} (${m.source})`)).toEqual([]);
    });

    it("contains a Deployment for exactly the known units", () => {
      expect(ofKind(manifests, "Deployment").map(nameOf).sort()).toEqual([...unitNames].sort());
    });

    it("no ConfigMap carries secret-looking keys", () => {
      for (const cm of ofKind(manifests, "ConfigMap")) {
        const bad = Object.keys(cm.obj.data ?? {}).filter((k) => SECRET_ENV_NAME.test(k));
        expect(bad, `${nameOf(cm)} (${cm.source})`).toEqual([]);
      }
    });
  });

  describe.skipIf(skip).each(unitNames)("%s", (unit) => {
    const expected = UNITS[unit];

    const deployment = (): Manifest => {
      const found = ofKind(manifests, "Deployment").filter((m) => nameOf(m) === unit);
      expect(found, `Deployment ${unit}`).toHaveLength(1);
      return found[0] as Manifest;
    };
    const deploymentSpec = (): DeploymentSpec => (deployment().obj.spec ?? {}) as DeploymentSpec;
    const podLabels = (): Labels => deploymentSpec().template?.metadata?.labels ?? {};
    const podSpec = (): PodSpec => deploymentSpec().template?.spec ?? {};
    const containers = (): ReadonlyArray<Container> => {
      const cs = podSpec().containers ?? [];
      expect(cs.length, "containers").toBeGreaterThan(0);
      return cs;
    };
    const mainContainer = (): Container => {
      const c = containers().find((x) => x.name === unit);
      expect(c, `container named ${unit}`).toBeDefined();
      return c as Container;
    };
    const otherUnitsPodLabels = (): Array<Labels> =>
      ofKind(manifests, "Deployment")
        .filter((m) => nameOf(m) !== unit)
        .map((m) => (m.obj.spec as DeploymentSpec).template?.metadata?.labels ?? {});

    it("Deployment selects its own pods (and only them) and is labelled", () => {
      const spec = deploymentSpec();
      expect(deployment().obj.apiVersion).toBe("apps/v1");
      expect(spec.selector?.matchExpressions).toBeUndefined();
      expect(selects(spec.selector?.matchLabels, podLabels())).toBe(true);
      expect(podLabels()["app.kubernetes.io/name"]).toBe(unit);
      expect(deployment().obj.metadata?.labels?.["app.kubernetes.io/name"]).toBe(unit);
      for (const other of otherUnitsPodLabels()) {
        expect(selects(spec.selector?.matchLabels, other)).toBe(false);
      }
    });

    it("runs the expected image and command", () => {
      const c = mainContainer();
      expect(c.image).toBe(expected.image);
      expect(c.command).toEqual(expected.command);
      const ports = Object.fromEntries((c.ports ?? []).map((p) => [p.name, p.containerPort]));
      expect(ports).toEqual(expected.ports);
    });

    it("has >= 2 replicas and a RollingUpdate with maxUnavailable 0", () => {
      const spec = deploymentSpec();
      expect(spec.replicas).toEqual(expect.any(Number));
      expect(spec.replicas).toBeGreaterThanOrEqual(2);
      expect(spec.strategy?.type).toBe("RollingUpdate");
      expect(isZero(spec.strategy?.rollingUpdate?.maxUnavailable)).toBe(true);
      // Both zero is rejected by the API server; absent defaults to 25%.
      expect(isZero(spec.strategy?.rollingUpdate?.maxSurge)).toBe(false);
    });

    it("uses gRPC readiness/liveness probes on a declared containerPort", () => {
      for (const c of containers()) {
        const ports = containerPortNumbers(c);
        const probes: Array<[string, Probe | undefined, boolean]> = [
          ["readinessProbe", c.readinessProbe, true],
          ["livenessProbe", c.livenessProbe, true],
          ["startupProbe", c.startupProbe, false],
        ];
        for (const [kind, probe, required] of probes) {
          if (probe === undefined && !required) continue;
          expect(probe, `${c.name}.${kind}`).toBeDefined();
          expect(probe?.grpc, `${c.name}.${kind}.grpc`).toBeDefined();
          expect(probe?.httpGet ?? probe?.tcpSocket ?? probe?.exec, `${c.name}.${kind}`).toBeUndefined();
          const port = probe?.grpc?.port;
          expect(port, `${c.name}.${kind}.grpc.port must be a number`).toEqual(expect.any(Number));
          expect(ports, `${c.name}.${kind} port`).toContain(port);
        }
      }
      expect(mainContainer().readinessProbe?.grpc?.port).toBe(expected.healthPort);
      expect(mainContainer().livenessProbe?.grpc?.port).toBe(expected.healthPort);
    });

    it("sleeps in preStop and allows time to drain after SIGTERM", () => {
      const grace = podSpec().terminationGracePeriodSeconds;
      expect(grace, "terminationGracePeriodSeconds").toEqual(expect.any(Number));
      for (const c of containers()) {
        const sleep = preStopSleepSeconds(c);
        expect(sleep, `${c.name} preStop sleep`).toEqual(expect.any(Number));
        expect(sleep).toBeGreaterThan(0);
        expect(grace).toBeGreaterThanOrEqual((sleep ?? 0) + DRAIN_SECONDS);
      }
    });

    it("sets cpu/memory requests and limits within budget", () => {
      for (const c of containers()) {
        const { requests, limits } = c.resources ?? {};
        for (const r of ["cpu", "memory"]) {
          expect(requests?.[r], `${c.name} requests.${r}`).toBeDefined();
          expect(limits?.[r], `${c.name} limits.${r}`).toBeDefined();
        }
        const memLimit = parseMemory(limits?.["memory"]);
        expect(memLimit).toBeLessThanOrEqual(MAX_MEMORY_LIMIT_BYTES);
        expect(parseMemory(requests?.["memory"])).toBeGreaterThan(0);
        expect(parseMemory(requests?.["memory"])).toBeLessThanOrEqual(memLimit);
        expect(parseCpu(requests?.["cpu"])).toBeGreaterThan(0);
        expect(parseCpu(requests?.["cpu"])).toBeLessThanOrEqual(parseCpu(limits?.["cpu"]));
      }
    });

    it("runs as non-root with a read-only root filesystem and no privilege escalation", () => {
      const pod = podSpec().securityContext ?? {};
      for (const c of containers()) {
        const sc = c.securityContext ?? {};
        expect(sc.runAsNonRoot ?? pod.runAsNonRoot, `${c.name} runAsNonRoot`).toBe(true);
        expect(sc.readOnlyRootFilesystem, `${c.name} readOnlyRootFilesystem`).toBe(true);
        expect(sc.allowPrivilegeEscalation, `${c.name} allowPrivilegeEscalation`).toBe(false);
      }
    });

    it("takes config from an existing ConfigMap and secrets only via secretKeyRef", () => {
      const configMaps = ofKind(manifests, "ConfigMap");
      for (const c of containers()) {
        const cmRefs = (c.envFrom ?? []).flatMap((f) => (f.configMapRef ? [f.configMapRef] : []));
        expect(cmRefs.length, `${c.name} envFrom configMapRef`).toBeGreaterThan(0);
        for (const ref of cmRefs) {
          expect(configMaps.map(nameOf), `${c.name} envFrom ConfigMap`).toContain(ref.name);
        }
        for (const e of c.env ?? []) {
          const cmRef = e.valueFrom?.configMapKeyRef;
          if (cmRef !== undefined) {
            const cm = configMaps.find((m) => nameOf(m) === cmRef.name);
            expect(cm, `${e.name}: ConfigMap ${cmRef.name}`).toBeDefined();
            expect(Object.keys(cm?.obj.data ?? {}), `${e.name}: key`).toContain(cmRef.key);
          }
          const secretRef = e.valueFrom?.secretKeyRef;
          if (secretRef !== undefined) {
            expect(secretRef.name, `${e.name} secretKeyRef.name`).toEqual(expect.any(String));
            expect(secretRef.key, `${e.name} secretKeyRef.key`).toEqual(expect.any(String));
            expect(secretRef.optional ?? false, `${e.name} secretKeyRef.optional`).toBe(false);
          }
          if (SECRET_ENV_NAME.test(e.name)) {
            expect(e.value, `${c.name}: ${e.name} must not have a literal value`).toBeUndefined();
            expect(secretRef, `${c.name}: ${e.name} must use secretKeyRef`).toBeDefined();
          }
        }
      }

      const env = resolveEnv(mainContainer(), configMaps);
      for (const [name, value] of Object.entries(expected.literalEnv)) {
        expect(env.get(name), name).toEqual({ from: "literal", value });
      }
      for (const [name, value] of Object.entries(expected.configEnv)) {
        const source = env.get(name);
        expect(source?.from, `${name} from ConfigMap`).toBe("configMap");
        const actual = source?.from === "configMap" ? source.value : undefined;
        if (value === null) expect(actual, name).toEqual(expect.stringMatching(/\S/));
        else expect(actual, name).toBe(value);
      }
      for (const [name, ref] of Object.entries(expected.secretEnv)) {
        expect(env.get(name), name).toEqual({ from: "secret", name: ref.name, key: ref.key });
      }
      // A literal PORT must agree with a declared containerPort.
      for (const portVar of ["PORT", "HEALTH_PORT"]) {
        const source = env.get(portVar);
        if (source?.from === "literal") {
          expect(containerPortNumbers(mainContainer()), portVar).toContain(Number(source.value));
        }
      }
    });

    it("has a ClusterIP Service that selects its pods and targets declared ports", () => {
      const services = ofKind(manifests, "Service").filter((m) => nameOf(m) === unit);
      expect(services, `Service ${unit}`).toHaveLength(1);
      const spec = (services[0]?.obj.spec ?? {}) as ServiceSpec;
      expect(spec.type ?? "ClusterIP").toBe("ClusterIP");
      expect(selects(spec.selector, podLabels()), "Service selector matches pod labels").toBe(true);
      for (const other of otherUnitsPodLabels()) {
        expect(selects(spec.selector, other), "Service selects another unit").toBe(false);
      }
      const ports = spec.ports ?? [];
      expect(ports.length).toBeGreaterThan(0);
      for (const p of ports) {
        expect(resolveTargetPort(containers(), p), `Service port ${p.name} targetPort`).toBeDefined();
      }
      expect(
        ports.map((p) => ({
          name: p.name,
          port: p.port,
          containerPort: resolveTargetPort(containers(), p),
          appProtocol: p.appProtocol,
        })),
      ).toEqual(expected.service);
    });

    it("has a PodDisruptionBudget that selects its pods and allows progress", () => {
      const pdbs = ofKind(manifests, "PodDisruptionBudget").filter((m) =>
        selects(((m.obj.spec ?? {}) as PdbSpec).selector?.matchLabels, podLabels()),
      );
      expect(pdbs, `PodDisruptionBudget for ${unit}`).toHaveLength(1);
      const pdb = pdbs[0] as Manifest;
      expect(pdb.obj.apiVersion).toBe("policy/v1");
      const spec = (pdb.obj.spec ?? {}) as PdbSpec;
      expect(spec.selector?.matchExpressions).toBeUndefined();
      for (const other of otherUnitsPodLabels()) {
        expect(selects(spec.selector?.matchLabels, other), "PDB selects another unit").toBe(false);
      }
      // Exactly one of minAvailable / maxUnavailable.
      expect((spec.minAvailable === undefined) !== (spec.maxUnavailable === undefined)).toBe(true);
      if (spec.minAvailable !== undefined) {
        expect(isPositive(spec.minAvailable), "minAvailable >= 1").toBe(true);
        // minAvailable equal to replicas would block every voluntary eviction.
        if (typeof spec.minAvailable === "number") {
          expect(spec.minAvailable).toBeLessThan(deploymentSpec().replicas ?? 0);
        } else {
          expect(parseInt(spec.minAvailable, 10)).toBeLessThan(100);
        }
      } else {
        expect(isPositive(spec.maxUnavailable), "maxUnavailable > 0").toBe(true);
      }
    });
  });
});
