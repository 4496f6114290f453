import { Clock, Effect } from "effect"
import { InvalidArgument } from "./errors.js"

export type BranchStatus = "creating" | "active" | "deleting" | "deleted" | "failed"

/** A branch as the unit keeps it (the row without the password envelope). */
export interface Branch {
  readonly id: string
  readonly orgId: string
  readonly connectorId: string
  readonly name: string
  readonly serviceType: "postgres"
  readonly status: BranchStatus
  readonly databaseName: string
  readonly roleName: string
  readonly engineHost: string | null
  readonly enginePort: number | null
  readonly poolerHost: string | null
  readonly poolerPort: number | null
  readonly createOperationId: string
  readonly deleteOperationId: string | null
  /** The reset last started (branch_reset), if any. */
  readonly resetOperationId: string | null
  readonly copiedAt: Date | null
  readonly roleCreatedAt: Date | null
  readonly readReadyAt: Date | null
  readonly writeReadyAt: Date | null
  readonly maskedReadyAt: Date | null
  /** The branch's sequences were moved past the data it holds (the create's sequences step). */
  readonly sequencesAlignedAt: Date | null
  readonly error: string | null
  /** The create accepted a degraded engine (stale data). */
  readonly allowStale: boolean
  /** The copy waits for the mirror to reach the source's position at acceptance. */
  readonly consistentWithSource: boolean
  /** The copy waits for the mirror to reach this source position. */
  readonly minSourceLsn: string | null
  /** The source WAL position the mirror had applied at the cut. */
  readonly sourceLsn: string | null
  /** The source time the copy is at least as fresh as. */
  readonly dataAsOf: Date | null
  /** Delete is refused while set (PATCH unsets it); the expiry sweeper passes it by. */
  readonly protected: boolean
  /** When the sweeper deletes the branch; null keeps it. */
  readonly expiresAt: Date | null
  /** The snapshot the branch was cut from; null for a branch of the live mirror. */
  readonly snapshotId: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** The connection URLs of a branch; null where they cannot be given. */
export interface BranchUrls {
  readonly branchUrl: string | null
  readonly pooledBranchUrl: string | null
  readonly pooledBranchPrismaUrl: string | null
}

export const noUrls: BranchUrls = { branchUrl: null, pooledBranchUrl: null, pooledBranchPrismaUrl: null }

/** Branch names: 1..63 of lowercase letters, digits, - and _, starting with a letter or digit. */
export const BRANCH_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/

/** Idempotency keys: 1..255 printable ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/

/** How long an idempotency key answers with its first request's handle. */
export const IDEMPOTENCY_WINDOW_HOURS = 24

export const SERVICE_TYPE = "postgres"

export interface CreateInput {
  readonly connectorId: string
  readonly name: string
  readonly serviceType: string
  readonly idempotencyKey: string | undefined
  readonly allowStale?: boolean | undefined
  readonly consistentWithSource?: boolean | undefined
  readonly minSourceLsn?: string | undefined
  /** At most one of the two: an instant, or seconds from acceptance. */
  readonly expiresAt?: Date | undefined
  readonly ttlSeconds?: number | undefined
  readonly snapshotId?: string | undefined
}

/** The longest a branch may be set to live: a year. */
export const MAX_TTL_SECONDS = 366 * 24 * 3600

/** An expiry must lie ahead, within a year. */
export const checkExpiry = (expiresAt: Date, now: number): Effect.Effect<Date, InvalidArgument> =>
  expiresAt.getTime() <= now
    ? Effect.fail(new InvalidArgument({ field: "expires_at", message: "expires_at must be in the future" }))
    : expiresAt.getTime() > now + MAX_TTL_SECONDS * 1000
      ? Effect.fail(new InvalidArgument({ field: "expires_at", message: "expires_at must be within a year" }))
      : Effect.succeed(expiresAt)

/** expires_at or ttl_seconds (not both) as the instant the branch expires, or null. */
export const expiryOf = (input: { readonly expiresAt?: Date | undefined; readonly ttlSeconds?: number | undefined }, now: number) => {
  if (input.expiresAt !== undefined && input.ttlSeconds !== undefined) {
    return Effect.fail(new InvalidArgument({ field: "ttl_seconds", message: "Send expires_at or ttl_seconds, not both" }))
  }
  if (input.ttlSeconds !== undefined) {
    if (!Number.isInteger(input.ttlSeconds) || input.ttlSeconds < 1 || input.ttlSeconds > MAX_TTL_SECONDS) {
      return Effect.fail(new InvalidArgument({ field: "ttl_seconds", message: `ttl_seconds must be a whole number from 1 to ${MAX_TTL_SECONDS}` }))
    }
    return Effect.succeed<Date | null>(new Date(now + input.ttlSeconds * 1000))
  }
  return input.expiresAt === undefined ? Effect.succeed<Date | null>(null) : checkExpiry(input.expiresAt, now)
}

/** PATCH /v1/branches/{id}: the fields to change; absent ones stay. expiresAt null clears it. */
export interface BranchPatch {
  readonly name?: string | undefined
  readonly protected?: boolean | undefined
  readonly expiresAt?: Date | null | undefined
}

export const checkBranchName = (name: string): Effect.Effect<string, InvalidArgument> =>
  BRANCH_NAME.test(name)
    ? Effect.succeed(name)
    : Effect.fail(new InvalidArgument({ field: "name", message: "name must be 1..63 characters of lowercase letters, digits, - and _, starting with a letter or a digit" }))

/** A pg_lsn as Postgres prints it: two hexadecimal numbers around a slash. */
export const SOURCE_LSN = /^[0-9A-Fa-f]{1,8}\/[0-9A-Fa-f]{1,8}$/

const required = (field: string, value: string) =>
  value.trim() === "" ? Effect.fail(new InvalidArgument({ field, message: `${field} is required` })) : Effect.succeed(value.trim())

/** The interface's 400s: missing fields, postgresql instead of postgres, a name that cannot be a branch name. */
export const validateCreate = (input: CreateInput) =>
  Effect.gen(function* () {
    const connectorId = yield* required("connector_id", input.connectorId)
    const name = yield* required("name", input.name)
    const serviceType = yield* required("service_type", input.serviceType)
    if (serviceType !== SERVICE_TYPE) {
      return yield* new InvalidArgument({
        field: "service_type",
        message:
          serviceType === "postgresql"
            ? 'service_type must be "postgres", not "postgresql": branches are Postgres databases; send service_type "postgres"'
            : `service_type ${JSON.stringify(serviceType)} is not supported: use "postgres"`
      })
    }
    yield* checkBranchName(name)
    let idempotencyKey: string | null = null
    if (input.idempotencyKey !== undefined) {
      if (!IDEMPOTENCY_KEY.test(input.idempotencyKey)) {
        return yield* new InvalidArgument({ field: "idempotency_key", message: "The idempotency key must be 1..255 printable ASCII characters without spaces" })
      }
      idempotencyKey = input.idempotencyKey
    }
    const minSourceLsn = input.minSourceLsn === undefined || input.minSourceLsn === "" ? null : input.minSourceLsn
    if (minSourceLsn !== null && !SOURCE_LSN.test(minSourceLsn)) {
      return yield* new InvalidArgument({ field: "min_source_lsn", message: "min_source_lsn must be a WAL position such as 0/16B3748 (pg_current_wal_lsn() on the source)" })
    }
    const snapshotId = input.snapshotId === undefined || input.snapshotId === "" ? null : input.snapshotId
    if (snapshotId !== null && !SNAPSHOT_ID.test(snapshotId)) {
      return yield* new InvalidArgument({ field: "snapshot_id", message: "snapshot_id must be a snapshot id (snap_…) from POST /v1/connectors/{connector_id}/snapshots" })
    }
    if (snapshotId !== null && (input.consistentWithSource === true || minSourceLsn !== null)) {
      return yield* new InvalidArgument({ field: "snapshot_id", message: "A branch of a snapshot holds the snapshot's data: consistent_with_source and min_source_lsn do not apply" })
    }
    return {
      connectorId,
      name,
      serviceType: SERVICE_TYPE,
      snapshotId,
      idempotencyKey,
      allowStale: input.allowStale === true,
      consistentWithSource: input.consistentWithSource === true,
      minSourceLsn,
      expiresAt: yield* expiryOf(input, yield* Clock.currentTimeMillis)
    } as const
  })

/** What an idempotency key is bound to: the same connector, service type and name. */
export const fingerprintOf = (input: { readonly connectorId: string; readonly serviceType: string; readonly name: string }) =>
  JSON.stringify([input.connectorId, input.serviceType, input.name])

/** Database and role names on the engine, from the branch id (ids are lowercase [0-9a-z_]). */
export const engineNamesOf = (branchId: string) => ({
  databaseName: `scion_${branchId}`,
  roleName: `scion_${branchId}_owner`
})

export const SSL_PARAMS = "sslmode=require&channel_binding=disable"

/**
 * branch_url: the branch role on the engine, TLS required and channel binding off (the engine's
 * certificate is self-signed; the URL must be used as returned). Pooled URLs go through the
 * engine's PgBouncer when one is configured: the plain one in transaction pooling terms, and one
 * with the parameters Prisma needs behind PgBouncer (pgbouncer=true disables prepared statements;
 * connection_limit=1 per serverless instance is Prisma's advice).
 */
export const urlsOf = (branch: Pick<Branch, "databaseName" | "roleName" | "engineHost" | "enginePort" | "poolerHost" | "poolerPort">, password: string): BranchUrls => {
  if (branch.engineHost === null || branch.enginePort === null || password === "") return noUrls
  const user = encodeURIComponent(branch.roleName)
  const secret = encodeURIComponent(password)
  const db = encodeURIComponent(branch.databaseName)
  const host = (h: string) => (h.includes(":") ? `[${h}]` : h)
  const branchUrl = `postgresql://${user}:${secret}@${host(branch.engineHost)}:${branch.enginePort}/${db}?${SSL_PARAMS}`
  if (branch.poolerHost === null || branch.poolerPort === null) return { branchUrl, pooledBranchUrl: null, pooledBranchPrismaUrl: null }
  const pooled = `postgresql://${user}:${secret}@${host(branch.poolerHost)}:${branch.poolerPort}/${db}?${SSL_PARAMS}`
  return { branchUrl, pooledBranchUrl: pooled, pooledBranchPrismaUrl: `${pooled}&pgbouncer=true&connection_limit=1` }
}

export type MaskingMethod = "hash" | "email" | "null" | "redact"
export const MASKING_METHODS: ReadonlyArray<MaskingMethod> = ["hash", "email", "null", "redact"]
export const isMaskingMethod = (value: string): value is MaskingMethod => (MASKING_METHODS as ReadonlyArray<string>).includes(value)

export interface MaskingRule {
  readonly schema: string
  readonly table: string
  readonly column: string
  readonly method: MaskingMethod
}

/** At most this many rules per connector. */
export const MAX_MASKING_RULES = 1000

const IDENT = /^[^\x00]{1,63}$/

export const validateMaskingRules = (rules: ReadonlyArray<{ schema: string; table: string; column: string; method: string }>) =>
  Effect.gen(function* () {
    if (rules.length > MAX_MASKING_RULES) return yield* new InvalidArgument({ field: "rules", message: `At most ${MAX_MASKING_RULES} masking rules per connector` })
    const seen = new Set<string>()
    const out: Array<MaskingRule> = []
    for (const [i, rule] of rules.entries()) {
      for (const field of ["schema", "table", "column"] as const) {
        if (!IDENT.test(rule[field])) return yield* new InvalidArgument({ field: `rules[${i}].${field}`, message: `rules[${i}].${field} must be 1..63 characters` })
      }
      if (!MASKING_METHODS.includes(rule.method as MaskingMethod)) {
        return yield* new InvalidArgument({ field: `rules[${i}].method`, message: `rules[${i}].method must be one of ${MASKING_METHODS.join(", ")}` })
      }
      const key = JSON.stringify([rule.schema, rule.table, rule.column])
      if (seen.has(key)) return yield* new InvalidArgument({ field: `rules[${i}]`, message: `rules[${i}] repeats ${rule.schema}.${rule.table}.${rule.column}` })
      seen.add(key)
      out.push({ schema: rule.schema, table: rule.table, column: rule.column, method: rule.method as MaskingMethod })
    }
    return out
  })

/** permissive: discovery's detections are suggestions; strict: branches wait until each is covered. */
export type MaskingPolicy = "permissive" | "strict"
export const MASKING_POLICIES: ReadonlyArray<MaskingPolicy> = ["permissive", "strict"]

export interface ColumnRef {
  readonly schema: string
  readonly table: string
  readonly column: string
}

/** A connector's masking configuration: the rules, the policy and the columns marked safe. */
export interface MaskingConfig {
  readonly rules: ReadonlyArray<MaskingRule>
  readonly policy: MaskingPolicy
  readonly safeColumns: ReadonlyArray<ColumnRef>
}

export const columnKey = (c: ColumnRef) => `${c.schema}.${c.table}.${c.column}`

export const validateMaskingPolicy = (policy: string | undefined, safeColumns: ReadonlyArray<ColumnRef>) =>
  Effect.gen(function* () {
    const chosen = policy === undefined || policy === "" ? "permissive" : policy
    if (!MASKING_POLICIES.includes(chosen as MaskingPolicy)) {
      return yield* new InvalidArgument({ field: "policy", message: `policy must be one of ${MASKING_POLICIES.join(", ")}` })
    }
    if (safeColumns.length > MAX_MASKING_RULES) return yield* new InvalidArgument({ field: "safe_columns", message: `At most ${MAX_MASKING_RULES} safe columns per connector` })
    for (const [i, column] of safeColumns.entries()) {
      for (const field of ["schema", "table", "column"] as const) {
        if (!IDENT.test(column[field])) return yield* new InvalidArgument({ field: `safe_columns[${i}].${field}`, message: `safe_columns[${i}].${field} must be 1..63 characters` })
      }
    }
    return { policy: chosen as MaskingPolicy, safeColumns: [...new Map(safeColumns.map((c) => [columnKey(c), { schema: c.schema, table: c.table, column: c.column }])).values()] }
  })

/** Under a strict policy: the suggested columns with neither a rule nor a mark as safe. */
export const uncoveredColumns = (config: MaskingConfig, suggestions: ReadonlyArray<ColumnRef>): ReadonlyArray<ColumnRef> => {
  if (config.policy !== "strict") return []
  const covered = new Set([...config.rules.map(columnKey), ...config.safeColumns.map(columnKey)])
  return suggestions.filter((s) => !covered.has(columnKey(s)))
}

export type SnapshotStatus = "creating" | "ready" | "deleting" | "deleted" | "failed"

/** A named, immutable copy of a connector's mirror: a template database on its engine. */
export interface Snapshot {
  readonly id: string
  readonly orgId: string
  readonly connectorId: string
  readonly name: string
  readonly status: SnapshotStatus
  readonly databaseName: string
  readonly sourceLsn: string | null
  readonly dataAsOf: Date | null
  readonly error: string | null
  readonly createOperationId: string
  readonly deleteOperationId: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** Snapshot ids as makeId("snap") makes them: lowercase, safe in a database name. */
export const SNAPSHOT_ID = /^snap_[0-9a-z]{20,40}$/

/** The snapshot's template database on the engine. */
export const snapshotDatabaseOf = (snapshotId: string) => `scion_${snapshotId}`

/** Snapshot names follow branch names' rules. */
export const checkSnapshotName = (name: string): Effect.Effect<string, InvalidArgument> =>
  BRANCH_NAME.test(name)
    ? Effect.succeed(name)
    : Effect.fail(new InvalidArgument({ field: "name", message: "name must be 1..63 characters of lowercase letters, digits, - and _, starting with a letter or a digit" }))

