#!/usr/bin/env node
// pnpm bench:rpc — what one hop between units costs: unary gRPC calls from one process to another
// through the kit (makeEffectClient over the direct HTTP/2 path, effectService on the server, the
// tracer off as in a unit without an exporter), next to @grpc/grpc-js (the stack's reference gRPC
// implementation) serving and calling the same method with the same messages, in the same run.
// Each side's CPU per call is read from the process itself; BENCH_CALLS calls per round (30000),
// BENCH_CONCURRENCY in flight (32), three rounds each, alternating kit and grpc-js; BENCH_NODE_FLAGS
// reach both servers (for example --cpu-prof).
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { UNIT_NODE_FLAGS } from "../../deploy/local/production-shape.mjs"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { effectService, http2Transport, listenHttp2, makeEffectClient, PrincipalVerifier } from "@scion/kit"
import { GetOperationRequestSchema, GetOperationResponseSchema, OperationService } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option, Scope } from "effect"

const CALLS = Number(process.env.BENCH_CALLS ?? 30000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)
const ROUNDS = 3
const PATH = `/${OperationService.typeName}/GetOperation`

/** What both servers answer: an operation with a few fields set, as a running job's would be. */
const operationOf = (id) => ({ operation: { id, progress: 50, stage: "copy", stageLabel: "Copying the mirror database (subscription paused)" } })

/** Servers, in a child process of their own: print the URL, then CPU since "reset" when asked. */
const serve = async (kind) => {
  let url
  if (kind === "kit") {
    const unexpected = Object.fromEntries(Object.keys(OperationService.method).map((name) => [name, () => Effect.dieMessage(`${name} is not served here`)]))
    const impl = { ...unexpected, getOperation: (request) => Effect.succeed(operationOf(request.id)) }
    // The server lives until the process ends; its URL is the first thing it reports.
    url = await new Promise((resolve) => {
      Effect.runFork(
        Effect.gen(function* () {
          const routes = yield* effectService(OperationService, impl, (error) => error).pipe(
            Effect.provideService(PrincipalVerifier, PrincipalVerifier.of({ verify: () => Effect.dieMessage("no principal is sent here") }))
          )
          const server = yield* listenHttp2({ port: 0, host: "127.0.0.1" })
          yield* server.install([routes], Option.none())
          resolve(server.url)
          return yield* Effect.never
        }).pipe(Effect.scoped, Effect.withTracerEnabled(false))
      )
    })
  } else {
    const server = new grpc.Server()
    server.addService(
      {
        getOperation: {
          path: PATH,
          requestStream: false,
          responseStream: false,
          requestSerialize: (message) => Buffer.from(toBinary(GetOperationRequestSchema, create(GetOperationRequestSchema, message))),
          requestDeserialize: (bytes) => fromBinary(GetOperationRequestSchema, bytes),
          responseSerialize: (message) => Buffer.from(toBinary(GetOperationResponseSchema, create(GetOperationResponseSchema, message))),
          responseDeserialize: (bytes) => fromBinary(GetOperationResponseSchema, bytes)
        }
      },
      { getOperation: (call, callback) => callback(null, operationOf(call.request.id)) }
    )
    const port = await new Promise((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))))
    url = `http://127.0.0.1:${port}`
  }
  process.stdout.write(`${url}\n`)
  let since = process.cpuUsage()
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk) => {
    for (const command of chunk.split("\n").filter(Boolean)) {
      if (command === "exit") process.exit(0)
      if (command === "reset") since = process.cpuUsage()
      if (command === "cpu") {
        const used = process.cpuUsage(since)
        process.stdout.write(`${used.user + used.system}\n`)
      }
    }
  })
}

const startServer = async (kind) => {
  // The units' V8 settings (deploy/local/production-shape.mjs); BENCH_NODE_FLAGS as in the other benches.
  const flags = [...UNIT_NODE_FLAGS, ...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean)]
  const child = spawn(process.execPath, [...flags, fileURLToPath(import.meta.url), "serve", kind], { stdio: ["pipe", "pipe", "inherit"] })
  const lines = []
  const waiting = []
  child.stdout.setEncoding("utf8")
  child.stdout.on("data", (chunk) => {
    for (const line of chunk.split("\n").filter(Boolean)) (waiting.shift() ?? ((l) => lines.push(l)))(line)
  })
  const next = () => new Promise((resolve) => (lines.length > 0 ? resolve(lines.shift()) : waiting.push(resolve)))
  const url = await next()
  return {
    url,
    reset: () => child.stdin.write("reset\n"),
    cpuMicros: async () => (child.stdin.write("cpu\n"), Number(await next())),
    stop: () => child.stdin.write("exit\n")
  }
}

/** `calls` calls, `CONCURRENCY` at a time, through `call(i)` (a promise). */
const drive = async (calls, call) => {
  let next = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < calls) await call(next++)
    })
  )
}

const measure = async (server, call) => {
  server.reset()
  const cpu = process.cpuUsage()
  const started = performance.now()
  await drive(CALLS, call)
  const elapsed = performance.now() - started
  const client = process.cpuUsage(cpu)
  const serverMicros = await server.cpuMicros()
  return { rate: (CALLS / elapsed) * 1000, client: (client.user + client.system) / CALLS, server: serverMicros / CALLS }
}

const kitCaller = (url) => {
  // The transport's scope is this process's: its connection lives until the bench exits.
  const transport = Effect.runSync(Effect.flatMap(Scope.make(), (scope) => Effect.provideService(http2Transport(url, "grpc"), Scope.Scope, scope)))
  const client = makeEffectClient(OperationService, transport)
  return (i) => Effect.runPromise(client.getOperation({ id: `op_${i}` }).pipe(Effect.withTracerEnabled(false)))
}

const grpcCaller = (url) => {
  const client = new grpc.Client(url.replace("http://", ""), grpc.credentials.createInsecure())
  const serialize = (message) => Buffer.from(toBinary(GetOperationRequestSchema, create(GetOperationRequestSchema, message)))
  const deserialize = (bytes) => fromBinary(GetOperationResponseSchema, bytes)
  return (i) => new Promise((resolve, reject) => client.makeUnaryRequest(PATH, serialize, deserialize, { id: `op_${i}` }, (error, response) => (error ? reject(error) : resolve(response))))
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

const main = async () => {
  const kit = await startServer("kit")
  const reference = await startServer("grpc-js")
  const callers = { kit: kitCaller(kit.url), "grpc-js": grpcCaller(reference.url) }
  const servers = { kit, "grpc-js": reference }
  // Warm both paths (JIT, connections) before anything is measured.
  for (const name of ["kit", "grpc-js"]) await drive(5000, callers[name])
  const results = { kit: [], "grpc-js": [] }
  for (let round = 0; round < ROUNDS; round++) for (const name of ["grpc-js", "kit"]) results[name].push(await measure(servers[name], callers[name]))
  console.log(`\nunary gRPC GetOperation, process to process, ${CONCURRENCY} in flight, ${CALLS} calls a round, median of ${ROUNDS}\n`)
  const summary = {}
  for (const name of ["grpc-js", "kit"]) {
    const rate = median(results[name].map((r) => r.rate))
    const client = median(results[name].map((r) => r.client))
    const server = median(results[name].map((r) => r.server))
    summary[name] = { rate, client, server }
    console.log(`${(name === "kit" ? "kit (direct path, Effect)" : "@grpc/grpc-js (baseline)").padEnd(28)} ${rate.toFixed(0).padStart(6)} calls/s   CPU a call: client ${client.toFixed(1).padStart(6)} µs, server ${server.toFixed(1).padStart(6)} µs`)
  }
  const ratio = (summary.kit.client + summary.kit.server) / (summary["grpc-js"].client + summary["grpc-js"].server)
  console.log(`\nCPU a call, kit / grpc-js: ${ratio.toFixed(2)}x (client ${(summary.kit.client / summary["grpc-js"].client).toFixed(2)}x, server ${(summary.kit.server / summary["grpc-js"].server).toFixed(2)}x)`)
  kit.stop()
  reference.stop()
  process.exit(0)
}

if (process.argv[2] === "serve") await serve(process.argv[3])
else await main()
