/**
 * Every unit whose relay listens for its outbox (OutboxRelay `wakeChannel`) is notified, by its
 * own migrations' trigger, when an outbox row commits, and the notification carries a payload:
 * the relay's listener (@effect/sql-pg) drops empty ones. Until branch's 0010 and identity's 0004
 * both notified with '' and their relays only ever woke on their poll.
 */
import { BranchDatabase } from "@scion/branch"
import { ConnectorDatabase } from "@scion/connector"
import { IdentityDatabase } from "@scion/identity"
import { freshDatabase, withConfig } from "@scion/kit/testing"
import { Effect, Layer } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"

const units = [
  { unit: "branch", database: BranchDatabase, channel: "branch_outbox" },
  { unit: "identity", database: IdentityDatabase, channel: "identity_outbox" },
  { unit: "connector", database: ConnectorDatabase, channel: "connector_outbox" }
] as const

/** The payload of the first notification on `channel` after `commit` ran, as a listening session sees it. */
const notificationOf = async (url: string, channel: string, commit: (client: pg.Client) => Promise<unknown>) => {
  const listener = new pg.Client({ connectionString: url })
  const writer = new pg.Client({ connectionString: url })
  await Promise.all([listener.connect(), writer.connect()])
  try {
    const received = new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no notification on ${channel} within 5 s`)), 5_000)
      listener.on("notification", (message) => {
        if (message.channel !== channel) return
        clearTimeout(timer)
        resolve(message.payload ?? "")
      })
    })
    await listener.query(`listen "${channel}"`)
    await commit(writer)
    return await received
  } finally {
    await Promise.all([listener.end(), writer.end()])
  }
}

describe("outbox wake-ups", () => {
  for (const { unit, database, channel } of units) {
    it(`a committed ${unit} outbox row notifies ${channel} with a payload`, async () => {
      const payload = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const url = yield* freshDatabase(`scion_wake_${unit}`)
            // The unit's own migrations, as its process applies them at start.
            yield* Layer.build(database.pipe(Layer.provide(withConfig({ DATABASE_URL: url }))))
            return yield* Effect.promise(() =>
              notificationOf(url, channel, (client) =>
                client.query(`insert into "${unit}".outbox (subject, msg_id, payload) values ('events.test', $1, '{}'::jsonb)`, [`wake-${unit}-${Date.now()}`])
              )
            )
          })
        )
      )
      expect(payload).not.toBe("")
    })
  }
})
