import { Effect } from "effect"
import type { PgSession } from "../engine/PgSession.js"

/**
 * A pipeline's logical slot on the source, as the monitor, the drift pass and setup read it. A
 * slot the source invalidated (its WAL removed past `max_slot_wal_keep_size`, idle past
 * `idle_replication_slot_timeout`, …) still shows in `pg_replication_slots` but can stream no
 * more: for Scion it is lost like a dropped one. Read through `to_jsonb`
 * so that sources without `wal_status` (before 13) or `invalidation_reason` (before 17) answer too.
 */
export type SlotState = "usable" | "invalidated" | "missing"

export interface SlotPosition {
  /** The source's current WAL position. */
  readonly current: string
  /** What the slot's consumer confirmed; null when the slot is missing. */
  readonly confirmed: string | null
  /** Bytes of WAL the slot is behind; null when it cannot stream (missing or invalidated). */
  readonly lag: number | null
  readonly state: SlotState
}

const INVALIDATED = "coalesce(pg_catalog.to_jsonb(s) ->> 'wal_status' = 'lost' or pg_catalog.to_jsonb(s) ->> 'invalidation_reason' is not null, false)"

export const slotPosition = (source: PgSession, slotName: string) =>
  source
    .query<{ current: string; confirmed: string | null; lag: string | null; present: boolean; invalidated: boolean }>(
      `select pg_catalog.pg_current_wal_lsn()::text as current, s.confirmed_flush_lsn::text as confirmed,
              pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::text as lag,
              s.slot_name is not null as present,
              ${INVALIDATED} as invalidated
       from (select 1) one left join pg_catalog.pg_replication_slots s on s.slot_name = $1`,
      [slotName]
    )
    .pipe(
      Effect.map(([row]): SlotPosition => {
        const state: SlotState = row?.present !== true ? "missing" : row.invalidated ? "invalidated" : "usable"
        return { current: row?.current ?? "0/0", confirmed: row?.confirmed ?? null, lag: state === "usable" ? Number(row?.lag ?? 0) : null, state }
      })
    )

/**
 * Drops the slot if the source invalidated it (a usable one stays): done only where the mirror
 * starts over from a full copy, so that setup makes a new one.
 */
export const dropInvalidatedSlot = (source: PgSession, slotName: string) =>
  source
    .query(`select pg_catalog.pg_drop_replication_slot(s.slot_name) from pg_catalog.pg_replication_slots s where s.slot_name = $1 and ${INVALIDATED}`, [slotName])
    .pipe(Effect.map((rows) => rows.length > 0))

/** The detail of a slot_lost quarantine. */
export const slotLostDetail = (slotName: string) =>
  `The replication slot ${slotName} no longer exists on the source, or the source invalidated it (its WAL removed, or idle too long): the mirror must be copied again`
