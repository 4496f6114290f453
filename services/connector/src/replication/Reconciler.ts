import { Effect, Option } from "effect"
import { quoteIdent } from "@scion/kit"
import type { PgSession, PgStepFailed } from "../engine/PgSession.js"
import type { SchemaChangesRepo } from "./SchemaChangesRepo.js"
import { snapshotOf } from "./SourceCapture.js"

/**
 * Drift reconciliation (services/connector/README.md, "Schema changes"), for sources whose role
 * may not create event triggers: each monitor round, every mirrored table's catalog on the source
 * is compared with the snapshot the mirror last followed (columns by attnum, so a rename is a
 * rename) and the mirror is altered by the same diff the capture path applies.
 *
 * Without capture, DDL and rows are not ordered, so only additive changes (new columns, indexes,
 * constraints) are applied at once: rows written before them never mind an extra column. Anything
 * else (a drop, a rename, a type change, a dropped table) waits until the mirror has applied the
 * source up to the position where the change was first seen — older rows have the old shape — or
 * until the apply is failing, which means newer rows need the new shape. What cannot be applied
 * is answered as a drift for the monitor to quarantine, naming the table, the change and the remedy.
 */

interface Snapshot extends Record<string, unknown> {
  readonly relid: number
  readonly schema: string
  readonly name: string
  readonly columns: ReadonlyArray<Record<string, unknown> & { readonly attnum: number; readonly name: string }>
  readonly constraints: ReadonlyArray<Record<string, unknown> & { readonly name: string }>
  readonly indexes: ReadonlyArray<Record<string, unknown> & { readonly name: string }>
}

/** A change that could not be applied on the mirror. */
export interface Drift {
  readonly table: string
  readonly change: string
  readonly error: string
}

export interface ReconcileOutcome {
  readonly applied: number
  /** Changes seen that wait for the mirror to catch up (apply errors meanwhile are likely theirs). */
  readonly pending: number
  readonly drift: Option.Option<Drift>
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

const byKey = <T extends Record<string, unknown>>(items: ReadonlyArray<T>, key: keyof T) => new Map(items.map((i) => [String(i[key]), i]))

/** Only additions: every column, constraint and index the mirror follows is still there, unchanged. */
export const isAdditive = (prev: Snapshot, next: Snapshot) => {
  if (prev.schema !== next.schema || prev.name !== next.name) return false
  const columns = byKey(next.columns, "attnum")
  const constraints = byKey(next.constraints, "name")
  const indexes = byKey(next.indexes, "name")
  return (
    prev.columns.every((c) => same(c, columns.get(String(c.attnum)))) &&
    prev.constraints.every((c) => same(c, constraints.get(c.name))) &&
    prev.indexes.every((i) => same(i, indexes.get(i.name)))
  )
}

/** What changed, in words, for the schema-changes list and a quarantine's detail. */
export const describeChange = (prev: Snapshot, next: Snapshot | null) => {
  if (next === null) return `table ${prev.schema}.${prev.name} dropped`
  const parts: Array<string> = []
  if (prev.schema !== next.schema || prev.name !== next.name) parts.push(`renamed to ${next.schema}.${next.name}`)
  const before = byKey(prev.columns, "attnum")
  const after = byKey(next.columns, "attnum")
  for (const [attnum, column] of after) {
    const old = before.get(attnum)
    if (old === undefined) parts.push(`column ${column.name} added`)
    else if (old.name !== column.name) parts.push(`column ${old.name} renamed to ${column.name}`)
    else if (!same(old, column)) parts.push(`column ${column.name} changed`)
  }
  for (const [attnum, column] of before) if (!after.has(attnum)) parts.push(`column ${column.name} dropped`)
  const constraintsBefore = byKey(prev.constraints, "name")
  for (const c of next.constraints) if (!same(constraintsBefore.get(c.name), c)) parts.push(`constraint ${c.name} added or changed`)
  for (const c of prev.constraints) if (!next.constraints.some((n) => n.name === c.name)) parts.push(`constraint ${c.name} dropped`)
  const indexesBefore = byKey(prev.indexes, "name")
  for (const i of next.indexes) if (!same(indexesBefore.get(i.name), i)) parts.push(`index ${i.name} added or changed`)
  for (const i of prev.indexes) if (!next.indexes.some((n) => n.name === i.name)) parts.push(`index ${i.name} dropped`)
  return parts.length === 0 ? "definition changed" : parts.join(", ")
}

/**
 * One reconciliation pass over an engine's mirrored tables. `erroring` says the subscription's
 * apply has been failing since the last round (newer rows need a shape the mirror lacks).
 */
export const reconcile = (input: {
  readonly connectorId: string
  readonly slotName: string
  readonly source: PgSession
  readonly mirror: PgSession
  readonly erroring: boolean
  readonly changes: SchemaChangesRepo
  /**
   * Runs a change to the mirror under the engine's subscription lock, or answers None when a
   * branch batch holds it (the change waits for the next round): a batch reads the paused
   * mirror's schema once for all its copies.
   */
  readonly underCopyLock: <A, E>(change: Effect.Effect<A, E>) => Effect.Effect<Option.Option<A>, E | PgStepFailed>
}): Effect.Effect<ReconcileOutcome, PgStepFailed> =>
  Effect.gen(function* () {
    const { source, mirror } = input
    yield* source.query("set search_path = pg_catalog")
    const [position] = yield* source.query<{ current: string; confirmed: string | null }>(
      "select pg_current_wal_lsn()::text as current, (select confirmed_flush_lsn::text from pg_replication_slots where slot_name = $1) as confirmed",
      [input.slotName]
    )
    const mapped = yield* mirror.query<{ source_relid: string; snapshot: Snapshot; reconcile_after: string | null }>(
      "select source_relid::text as source_relid, snapshot, reconcile_after::text as reconcile_after from scion.mirror_tables order by source_relid"
    )
    let applied = 0
    let pending = 0
    for (const table of mapped) {
      const next = (yield* snapshotOf(source, table.source_relid)) as Snapshot | null
      if (next !== null && same(table.snapshot, next)) continue
      const label = `${table.snapshot.schema}.${table.snapshot.name}`
      const change = describeChange(table.snapshot, next)
      if (next === null || !isAdditive(table.snapshot, next)) {
        if (table.reconcile_after === null) {
          // First seen now: rows the mirror has yet to apply may still have the old shape.
          yield* mirror.query("update scion.mirror_tables set reconcile_after = $2::pg_lsn where source_relid = $1::bigint", [table.source_relid, position?.current ?? "0/0"])
          if (!input.erroring) {
            pending++
            continue
          }
        } else if (!input.erroring) {
          const [reached] = yield* mirror.query<{ reached: boolean }>("select coalesce($1::pg_lsn >= $2::pg_lsn, false) as reached", [position?.confirmed ?? null, table.reconcile_after])
          if (reached?.reached !== true) {
            pending++
            continue
          }
        }
      }
      const apply =
        next === null
          ? Effect.gen(function* () {
              const drop = `drop table if exists ${quoteIdent(table.snapshot.schema)}.${quoteIdent(table.snapshot.name)} cascade`
              yield* mirror.query(drop)
              yield* mirror.query("delete from scion.mirror_tables where source_relid = $1::bigint", [table.source_relid])
              return [drop]
            })
          : Effect.gen(function* () {
              const [row] = yield* mirror.query<{ actions: ReadonlyArray<string> }>("select scion.alter_table($1::jsonb, $2::jsonb) as actions", [
                JSON.stringify(table.snapshot),
                JSON.stringify(next)
              ])
              yield* mirror.query(
                "update scion.mirror_tables set schema_name = $2, table_name = $3, snapshot = $4::jsonb, reconcile_after = null where source_relid = $1::bigint",
                [table.source_relid, next.schema, next.name, JSON.stringify(next)]
              )
              return row?.actions ?? []
            })
      // One transaction on the mirror: the table and the snapshot it follows move together.
      // (The lock's own failure, the engine unreachable, ends the round: it is no drift.)
      const locked = yield* input.underCopyLock(Effect.either(mirror.query("begin").pipe(Effect.zipRight(apply), Effect.tap(() => mirror.query("commit")))))
      if (Option.isNone(locked)) {
        // A branch batch is copying the mirror: the change goes in next round.
        pending++
        continue
      }
      const outcome = locked.value
      if (outcome._tag === "Left") {
        yield* mirror.query("rollback").pipe(Effect.ignore)
        yield* input.changes.recordReconciled(input.connectorId, { commandTag: "ALTER TABLE", objectIdentity: label, status: "failed", actions: [], error: outcome.left.reason })
        return { applied, pending, drift: Option.some({ table: label, change, error: outcome.left.reason }) }
      }
      applied++
      yield* input.changes.recordReconciled(input.connectorId, {
        commandTag: next === null ? "DROP TABLE" : "ALTER TABLE",
        objectIdentity: label,
        status: "reconciled",
        actions: outcome.right,
        error: null
      })
      yield* Effect.logInfo("schema drift reconciled").pipe(Effect.annotateLogs({ connector_id: input.connectorId, table: label, change }))
    }
    return { applied, pending, drift: Option.none() }
  }).pipe(Effect.withSpan("Reconciler.reconcile", { attributes: { connectorId: input.connectorId } }))
