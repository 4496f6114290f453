import { Duration, Effect, Option } from "effect"
import { quoteIdent } from "@scion/kit"
import { type Engine, EngineProvisioner } from "./EngineProvisioner.js"
import { engineRecord } from "./EngineSetupRepo.js"
import { type EngineSessionOptions, onMirrorUnderLock } from "./PgSession.js"

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
