import { randomBytes } from "node:crypto"
import { connect } from "nats"
import { describe, expect, it } from "vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { makeNatsBus, NatsBus, withoutCredentials } from "../src/bus/NatsBus.js"
import { busContract } from "./bus.contract.js"
import { deleteNamespace, testNamespace } from "./support.js"

// Streams `<ns>_JOBS`, `<ns>_EVENTS`, `<ns>_DLQ` on the machine's NATS, deleted after the file.
const namespace = testNamespace()
const layer = Layer.scopedDiscard(Effect.addFinalizer(() => deleteNamespace(namespace))).pipe(
  Layer.provideMerge(NatsBus.layer({ namespace })),
  Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error))
)

busContract("NatsBus", layer)

const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222"

describe("NatsBus with namespacedStreams", () => {
  it("namespaces only the named streams: jobs stay the unit's own, events land on the shared stream", async () => {
    const ns = testNamespace()
    const marker = randomBytes(6).toString("hex")
    try {
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const bus = yield* makeNatsBus(natsUrl, { namespace: ns, namespacedStreams: ["JOBS", "DLQ"] })
            yield* bus.publish({ subject: `jobs.contract.${marker}`, payload: { kind: "job" } })
            yield* bus.publish({ subject: `events.contract.${marker}`, payload: { kind: "event" } })
          })
        ).pipe(Effect.provide(Logger.minimumLogLevel(LogLevel.Error)))
      )
      const nc = await connect({ servers: natsUrl })
      try {
        const jsm = await nc.jetstreamManager()
        const job = await jsm.streams.getMessage(`${ns}_JOBS`, { last_by_subj: `${ns}.jobs.contract.${marker}` })
        expect(job.json()).toEqual({ kind: "job" })
        const event = await jsm.streams.getMessage("EVENTS", { last_by_subj: `events.contract.${marker}` })
        expect(event.json()).toEqual({ kind: "event" })
        // No namespaced EVENTS stream was made.
        await expect(jsm.streams.info(`${ns}_EVENTS`)).rejects.toThrow()
      } finally {
        await nc.close()
      }
    } finally {
      await Effect.runPromise(deleteNamespace(ns))
    }
  })
})

describe("NATS URLs in logs", () => {
  it("leave out users, passwords and tokens, keep hosts and ports", () => {
    expect(withoutCredentials("nats://scion:s3cret@nats-0:4222, tls://t0ken@nats-1:4443,nats://nats-2:4222")).toBe("nats://nats-0:4222,tls://nats-1:4443,nats://nats-2:4222")
  })

  it("a bus that cannot reach its server says where without the credentials", async () => {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => void lines.push(String(message)))
    const attempt = Effect.scoped(
      Effect.flatMap(makeNatsBus("nats://scion:s3cret@127.0.0.1:1", { requestTimeout: 700 }), (bus) => bus.publish({ subject: "jobs.test.unreachable", payload: {} }))
    ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Effect.exit)
    const exit = await Effect.runPromise(attempt)
    expect(exit._tag).toBe("Failure")
    expect(JSON.stringify(exit)).not.toContain("s3cret")
    expect(lines.join("\n")).toContain("127.0.0.1:1")
    expect(lines.join("\n")).not.toContain("s3cret")
  })
})
