#!/usr/bin/env node
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { cli, exitCodeOf, reportError } from "./index.js"
import { CredentialStore } from "./credentials.js"

// The edge of the program: a failure is printed once, as the API said it, and becomes the exit code.
cli(process.argv).pipe(
  Effect.catchAll((error) => reportError(error).pipe(Effect.andThen(Effect.sync(() => (process.exitCode = exitCodeOf(error)))))),
  Effect.provide(Layer.provideMerge(CredentialStore.layer, NodeContext.layer)),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: false, disablePrettyLogger: true })
)
