import { randomBytes } from "node:crypto"
import { Duration, Effect, Either, Schedule } from "effect"
import type { PostgresDetails } from "../connectors/ConnectionDetails.js"
import { type Engine } from "./EngineProvisioner.js"
import { qualified } from "./MirrorSchema.js"
import { engineSession, PgStepFailed, sourceSession } from "./PgSession.js"
import { type PipelineNames } from "../replication/PipelineNames.js"
import { type MirrorPlan, stepFailed } from "./SetupPlan.js"
import { ReadinessRepo } from "./ReadinessRepo.js"

// Readiness evidence: what engine setup writes last (readiness_checks, append-only).

export interface ReadinessCheck {
  readonly check_name: string
  readonly table_path: string
  readonly status: "pass" | "fail"
  readonly message: string
}

const newAttemptId = () => `att_${Date.now().toString(36)}${randomBytes(6).toString("hex")}`

/**
 * One readiness attempt: per mirrored table, the table exists in the mirror, its initial copy is
 * complete, it can replicate updates and deletes on the source, and — once the mirror has caught
 * up with the source's current WAL position — it holds as many rows as the source. Rows are
 * appended to readiness_checks (append-only evidence) with the engine instance as pod_name.
 */
export const recordReadiness = (input: {
  readonly connectorId: string
  readonly pipeline: PipelineNames
  readonly engine: Engine
  readonly instance: string
  readonly details: PostgresDetails
  readonly plan: MirrorPlan
  readonly sourceOptions: { readonly applicationName: string; readonly connectMillis: number; readonly queryMillis: number }
  readonly engineOptions: { readonly applicationName: string; readonly connectMillis: number }
  readonly catchUpTimeout: Duration.Duration
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const evidence = yield* ReadinessRepo
      const pipeline = input.pipeline
      const attemptId = newAttemptId()
      const checks: Array<ReadinessCheck> = []
      const sessionFailure = (e: PgStepFailed) => stepFailed("readiness", e)
      const source = yield* sourceSession(input.details, input.details.password, input.sourceOptions).pipe(Effect.mapError(sessionFailure))
      const mirror = yield* engineSession(input.engine, pipeline.mirrorDatabase, input.engineOptions).pipe(Effect.mapError(sessionFailure))

      // Catch up: the slot has confirmed everything the source had written when we looked.
      const catchUp = Effect.gen(function* () {
        const [position] = yield* source.query<{ lsn: string }>("select pg_current_wal_lsn()::text as lsn").pipe(Effect.mapError(sessionFailure))
        return yield* source
          .query<{ caught_up: boolean }>("select coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) as caught_up from pg_replication_slots where slot_name = $1", [pipeline.slot, position?.lsn ?? "0/0"])
          .pipe(
            Effect.mapError(sessionFailure),
            Effect.flatMap(([row]) => (row?.caught_up === true ? Effect.void : Effect.fail("behind" as const))),
            Effect.retry(Schedule.spaced(Duration.millis(200)).pipe(Schedule.upTo(input.catchUpTimeout))),
            Effect.either
          )
      })
      let lag = yield* catchUp

      const subscribed = yield* mirror
        .query<{ relation: string; state: string }>(
          `select r.srrelid::regclass::text as relation, r.srsubstate::text as state from pg_subscription_rel r join pg_subscription s on s.oid = r.srsubid where s.subname = $1`,
          [pipeline.subscription]
        )
        .pipe(Effect.mapError(sessionFailure))
      const stateOf = new Map<string, string>()
      for (const row of subscribed) {
        const [regclass] = yield* mirror.query<{ oid: string }>("select $1::regclass::oid::text as oid", [row.relation]).pipe(Effect.mapError(sessionFailure))
        if (regclass !== undefined) stateOf.set(regclass.oid, row.state)
      }

      for (const { table } of input.plan.tables) {
        const name = qualified({ schema: table.path.split(".")[1]!, name: table.name })
        const [present] = yield* mirror.query<{ oid: string | null }>("select to_regclass($1)::oid::text as oid", [name]).pipe(Effect.mapError(sessionFailure))
        const oid = present?.oid ?? null
        checks.push(
          oid !== null
            ? { check_name: "mirror_table_present", table_path: table.path, status: "pass", message: "The table exists in the mirror" }
            : { check_name: "mirror_table_present", table_path: table.path, status: "fail", message: "The table is missing from the mirror" }
        )
        const state = oid === null ? undefined : stateOf.get(oid)
        checks.push(
          state === "r"
            ? { check_name: "initial_copy_complete", table_path: table.path, status: "pass", message: "Initial copy complete; the table is streaming changes" }
            : { check_name: "initial_copy_complete", table_path: table.path, status: "fail", message: `The table's subscription state is ${state ?? "absent"}, not ready` }
        )
        const [identity] = yield* source
          .query<{ ok: boolean }>(
            `select c.relreplident = 'f' or (c.relreplident = 'i' and exists (select 1 from pg_index where indrelid = c.oid and indisreplident))
                    or (c.relreplident = 'd' and exists (select 1 from pg_constraint where conrelid = c.oid and contype = 'p')) as ok
             from pg_class c where c.oid = $1::regclass`,
            [name]
          )
          .pipe(Effect.mapError(sessionFailure))
        checks.push(
          identity?.ok === true
            ? { check_name: "replica_identity", table_path: table.path, status: "pass", message: "Updates and deletes on the source replicate" }
            : { check_name: "replica_identity", table_path: table.path, status: "fail", message: "The source table has no replica identity: its updates and deletes cannot replicate" }
        )
        if (oid !== null) {
          // A table's own rows, as replication carries them: an inheritance parent publishes its own
          // rows only (its children are tables of their own), a partitioned table (published via its
          // root) every partition's. Either side may hold either kind (captured DDL is replayed):
          // the count each side's kind asks for, the other subquery never run.
          const countOn = (session: typeof source) =>
            session
              .query<{ n: string }>(
                `select (case when (select relkind from pg_class where oid = $1::regclass) = 'p' then (select count(*) from ${name})
                              else (select count(*) from only ${name}) end)::text as n`,
                [name]
              )
              .pipe(
              Effect.mapError(sessionFailure),
              Effect.map(([row]) => BigInt(row?.n ?? "0"))
            )
          // Both sides count at once: on large tables these scans are most of the readiness time,
          // and a quiet table answers equal here.
          const [first, firstMirror] = yield* Effect.all([countOn(source), countOn(mirror)], { concurrency: 2 })
          let equal = first === firstMirror
          let mirrorCount = firstMirror
          let low = first
          let high = first
          // A source being written to moves under the counts: bracket the mirror between a source
          // count taken before it caught up and one taken after it was counted.
          for (let round = 0; round < 2 && !equal; round++) {
            const before = yield* countOn(source)
            lag = yield* catchUp
            mirrorCount = yield* countOn(mirror)
            const after = yield* countOn(source)
            low = before < after ? before : after
            high = before < after ? after : before
            equal = before === mirrorCount && mirrorCount === after
          }
          const moving = low !== high
          const pass = equal || (moving && mirrorCount >= low && mirrorCount <= high)
          checks.push({
            check_name: "row_count_matches",
            table_path: table.path,
            status: pass ? "pass" : "fail",
            message: equal
              ? `${mirrorCount} rows on both sides`
              : pass
                ? `mirror ${mirrorCount} rows, within the source's ${low}..${high} while it was being written to`
                : `source ${low === high ? `${low}` : `${low}..${high}`} rows, mirror ${mirrorCount}${Either.isLeft(lag) ? " (the mirror had not caught up with the source)" : ""}`
          })
        }
      }

      yield* evidence.record(input.connectorId, attemptId, input.instance, checks)
      return { attemptId, checks }
    })
  )

