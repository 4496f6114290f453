import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { connect } from "nats"

/** A namespace for `NatsBus` streams (`<ns>_JOBS`, …) unique to one test file run. */
export const testNamespace = () => `t${randomBytes(4).toString("hex")}`

const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222"

/** Deletes the namespace's streams (their consumers go with them). */
export const deleteNamespace = (namespace: string) =>
  Effect.promise(async () => {
    const nc = await connect({ servers: natsUrl })
    const jsm = await nc.jetstreamManager()
    for (const name of ["JOBS", "EVENTS", "DLQ"]) await jsm.streams.delete(`${namespace}_${name}`).catch(() => false)
    await nc.close()
  })
