import { Either } from "effect"

/** What may be decided for a table without a replica identity (the interface's set). */
export const DECISIONS = ["exclude", "add_pk", "replica_identity_full"] as const
export type Decision = (typeof DECISIONS)[number]

const isDecision = (value: unknown): value is Decision => typeof value === "string" && (DECISIONS as ReadonlyArray<string>).includes(value)

/**
 * `replica_identity_preflight` (services/connector/README.md): the tables of the latest discovery
 * whose updates and deletes cannot replicate as they are, the decision for each, the ones no
 * decisions write has covered yet, and the write counter.
 */
export interface ReplicaIdentityPreflight {
  readonly tables_without_replica_identity: ReadonlyArray<string>
  readonly decisions: Readonly<Record<string, Decision>>
  readonly unresolved: ReadonlyArray<string>
  /** True when every such table has a decision (engine setup refuses otherwise). */
  readonly pass: boolean
  readonly decisions_version: number
}

const previousDecisions = (previous: unknown): Readonly<Record<string, Decision>> => {
  const decisions = (previous as { decisions?: unknown } | null)?.decisions
  if (typeof decisions !== "object" || decisions === null) return {}
  return Object.fromEntries(Object.entries(decisions).filter((entry): entry is [string, Decision] => isDecision(entry[1])))
}

/**
 * After a discovery: decisions made for tables that still lack a replica identity are kept; a
 * table no write has covered (new, or before any write) is unresolved.
 */
export const preflightAfterDiscovery = (missing: ReadonlyArray<string>, previous: unknown, decisionsVersion: number): ReplicaIdentityPreflight => {
  const kept = previousDecisions(previous)
  const decisions = Object.fromEntries(missing.filter((path) => kept[path] !== undefined).map((path) => [path, kept[path]!]))
  const unresolved = missing.filter((path) => decisions[path] === undefined)
  return { tables_without_replica_identity: missing, decisions, unresolved, pass: unresolved.length === 0, decisions_version: decisionsVersion }
}

/**
 * A decisions write replaces the whole set: every key must be a table of the latest discovery
 * without a replica identity and every value one of DECISIONS; tables left out are `exclude`.
 * Answers the new preflight or a message for the 400.
 */
export const applyDecisions = (
  missing: ReadonlyArray<string>,
  input: Readonly<Record<string, unknown>>,
  decisionsVersion: number
): Either.Either<ReplicaIdentityPreflight, string> => {
  const known = new Set(missing)
  for (const [key, value] of Object.entries(input)) {
    if (!known.has(key)) {
      return Either.left(`decisions key ${JSON.stringify(key)} is not a discovered table without a replica identity (database.schema.table); those are: ${missing.length === 0 ? "none" : missing.join(", ")}`)
    }
    if (!isDecision(value)) return Either.left(`decisions value for ${JSON.stringify(key)} must be one of ${DECISIONS.join(", ")}`)
  }
  const decisions = Object.fromEntries(missing.map((path) => [path, isDecision(input[path]) ? input[path] : "exclude"]))
  return Either.right({ tables_without_replica_identity: missing, decisions, unresolved: [], pass: true, decisions_version: decisionsVersion })
}
