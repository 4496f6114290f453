import { Effect, Layer, Logger, LogLevel } from "effect"
import { NatsBus } from "../src/bus/NatsBus.js"
import { busContract } from "./bus.contract.js"
import { deleteNamespace, testNamespace } from "./support.js"

// Streams `<ns>_JOBS`, `<ns>_EVENTS`, `<ns>_DLQ` on the machine's NATS, deleted after the file.
const namespace = testNamespace()
const layer = Layer.scopedDiscard(Effect.addFinalizer(() => deleteNamespace(namespace))).pipe(
  Layer.provideMerge(NatsBus.layer({ namespace })),
  Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error))
)

busContract("NatsBus", layer)
