import { Duration, Effect, Option } from "effect"
import { quoteIdent } from "@scion/kit"
import { type Engine, EngineProvisioner } from "./EngineProvisioner.js"
import { engineRecord } from "./EngineSetupRepo.js"
import { qualified } from "./MirrorSchema.js"
import { type EngineSessionOptions, onMirrorUnderLock, type PgSession } from "./PgSession.js"

const connectorSession: EngineSessionOptions = { applicationName: "scion-connector", connectMillis: Duration.toMillis(Duration.seconds(10)) }

/**
 * Enables or disables the connector's subscription on its engine. Answers false when there is no
 * engine or subscription to change (nothing set up, or the engine is gone); an engine that cannot
 * be reached is an error.
 */
export const setSubscriptionEnabled = (connectorId: string, enabled: boolean) =>
  Effect.gen(function* () {
    const record = yield* engineRecord(connectorId)
    if (Option.isNone(record)) return false
    const provisioner = yield* EngineProvisioner
    const engine = yield* provisioner.start(connectorId).pipe(
      Effect.map(Option.some),
      Effect.catchTag("EngineNotFound", () => Effect.succeed(Option.none()))
    )
    if (Option.isNone(engine)) return false
    return yield* onMirrorUnderLock(engine.value, record.value.mirror_database, connectorSession, (mirror) =>
      Effect.gen(function* () {
        const [row] = yield* mirror.query("select 1 from pg_subscription where subname = $1", [record.value.subscription_name])
        if (row === undefined) return false
        yield* mirror.query(`alter subscription ${quoteIdent(record.value.subscription_name)} ${enabled ? "enable" : "disable"}`)
        return true
      })
    )
  }).pipe(Effect.withSpan("EngineReplication.setSubscriptionEnabled", { attributes: { connectorId, enabled } }))

/**
 * Drops a subscription without touching its slot (`slot_name = none` first: the slot is the
 * source's, dropped there or kept), under the engine's subscription lock, on a session of the
 * mirror opened once the lock is held. Absent is fine.
 */
export const dropSubscriptionKeepingSlot = (engine: Engine, mirrorDatabase: string, subscriptionName: string, applicationName: string) =>
  onMirrorUnderLock(engine, mirrorDatabase, { applicationName, connectMillis: Duration.toMillis(Duration.seconds(10)) }, (mirror) =>
    Effect.gen(function* () {
      const [present] = yield* mirror.query("select 1 from pg_subscription where subname = $1", [subscriptionName])
      if (present === undefined) return
      const subscription = quoteIdent(subscriptionName)
      yield* mirror.query(`alter subscription ${subscription} disable`)
      yield* mirror.query(`alter subscription ${subscription} set (slot_name = none)`)
      yield* mirror.query(`drop subscription ${subscription}`)
    })
  )

/**
 * Empties the mirror's copies of the source's tables before a full copy (a reset, a restore): the
 * tables as the mirror follows them now (`scion.mirror_tables`, which follows renames and moves)
 * and as the last setup recorded them (`recordedPaths`, `database.schema.table`), those that exist;
 * with `captureLog`, the capture log and heartbeat too. The recorded paths alone named a table
 * renamed since by its old name, and the truncate failed the reset.
 */
export const emptyMirroredTables = (mirror: PgSession, recordedPaths: ReadonlyArray<string>, captureLog: boolean) =>
  Effect.gen(function* () {
    const recorded = recordedPaths.map((path) => {
      const [, schema = "", name = ""] = path.split(".")
      return qualified({ schema, name })
    })
    const [present] = yield* mirror.query<{ followed: boolean; log: boolean }>(
      "select to_regclass('scion.mirror_tables') is not null as followed, to_regclass('scion.schema_log') is not null as log"
    )
    const followed =
      present?.followed === true
        ? yield* mirror.query<{ path: string }>("select pg_catalog.format('%I.%I', schema_name, table_name) as path from scion.mirror_tables")
        : []
    const [existing] = yield* mirror.query<{ tables: ReadonlyArray<string> }>(
      "select array(select distinct pg_catalog.format('%I.%I', n.nspname, c.relname) from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid in (select pg_catalog.to_regclass(p) from unnest($1::text[]) p)) as tables",
      [[...recorded, ...followed.map((table) => table.path)]]
    )
    const tables = [...(existing?.tables ?? []), ...(captureLog && present?.log === true ? ["scion.schema_log", "scion.heartbeat"] : [])]
    if (tables.length > 0) yield* mirror.query(`truncate ${tables.join(", ")}`)
    // The full copy that follows copies again every table a change rewrote.
    yield* mirror.query("do $$ begin if to_regclass('scion.recopy_requests') is not null then delete from scion.recopy_requests; end if; end $$")
  })
