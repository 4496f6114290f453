import { Layer, Logger, LogLevel } from "effect"
import { InMemoryBus } from "../src/bus/InMemoryBus.js"
import { busContract } from "./bus.contract.js"

busContract("InMemoryBus", InMemoryBus.layer.pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Error))))
