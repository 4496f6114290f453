import type { JsonObject } from "@bufbuild/protobuf"
import type { Transport } from "@connectrpc/connect"
import { SqlClient } from "@effect/sql"
import type { MessageInitShape } from "@bufbuild/protobuf"
import {
  type Operation,
  OperationService,
  OperationStatus,
  type ReportOperationRequestSchema
} from "@scion/proto/scion/operation/v1/operation_pb"
import { Cause, Config, Context, Deferred, Duration, Effect, Exit, Fiber, FiberRef, Layer, Option, Schedule, Schema, type Scope } from "effect"
import { recordJob } from "../metrics.js"
import { CurrentRequestId, withRequestId } from "../request-id.js"
import { withRemoteParent } from "../tracing.js"
import { Bus, type BusError, type ConsumeOptions, currentTraceparent, type Delivery } from "../bus/Bus.js"
import { unitTransport, makeEffectClient, type EffectClient } from "../connect-client.js"
import { Code, hasReason, RpcError } from "../errors.js"
import { asService, isTransient, ServiceIdentity } from "../service-identity.js"

/** The operation unit's RPCs, as a worker uses them. */
export class OperationClient extends Context.Tag("@scion/kit/OperationClient")<OperationClient, EffectClient<typeof OperationService>>() {
  static fromTransport(transport: Transport): Layer.Layer<OperationClient> {
    return Layer.succeed(OperationClient, makeEffectClient(OperationService, transport))
  }

  /** OPERATION_URL (default http://127.0.0.1:50052) over HTTP/2 gRPC, scoped to the layer. */
  static readonly layerConfig: Layer.Layer<OperationClient> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("OPERATION_URL").pipe(Config.withDefault("http://127.0.0.1:50052"))
      return OperationClient.fromTransport(yield* unitTransport(url))
    }).pipe(Effect.orDie)
  )
}

/** The subject a unit's jobs of one type travel on: `jobs.<unit>.<type>`. */
export const jobSubject = (unit: string, type: string) => `jobs.${unit}.${type}`

/** A job on the wire: which operation it advances, in which org, and the handler's input. */
export const JobMessage = Schema.Struct({
  operation_id: Schema.String,
  org_id: Schema.String,
  payload: Schema.Unknown,
  /** The request that started the job: the worker's log lines carry it too. */
  request_id: Schema.optional(Schema.String),
  /** The span that enqueued the job (W3C): the job's span continues its trace. */
  traceparent: Schema.optional(Schema.String)
})
export type JobMessage = typeof JobMessage.Type

/**
 * Writes a job to the unit's outbox in the caller's transaction (ARCHITECTURE.md, "Asynchronous
 * work"): the relay publishes it with `Nats-Msg-Id` = the operation id, so a retried start never
 * runs the job twice. Writing the same operation's job again is a no-op.
 */
export const enqueueJob = (input: {
  readonly unit: string
  readonly type: string
  readonly operationId: string
  readonly orgId: string
  readonly payload: unknown
  readonly table?: string
}) =>
  Effect.flatMap(Effect.all([SqlClient.SqlClient, FiberRef.get(CurrentRequestId), currentTraceparent]), ([sql, requestId, traceparent]) => {
    const message: JobMessage = {
      operation_id: input.operationId,
      org_id: input.orgId,
      payload: input.payload,
      ...(Option.isSome(requestId) ? { request_id: requestId.value } : {}),
      ...(Option.isSome(traceparent) ? { traceparent: traceparent.value } : {})
    }
    return sql`
      insert into ${sql(input.table ?? "outbox")} (subject, msg_id, payload)
      values (${jobSubject(input.unit, input.type)}, ${input.operationId}, ${JSON.stringify(message)}::jsonb)
      on conflict (msg_id) do nothing`
  }).pipe(Effect.asVoid, Effect.withSpan("Worker.enqueueJob", { attributes: { unit: input.unit, type: input.type, operationId: input.operationId } }))

/** A handler's verdict that the work cannot succeed: the operation fails with this message, no retry. */
export class JobFailed extends Schema.TaggedError<JobFailed>()("JobFailed", { message: Schema.String }) {}

/** The operation ended while the job ran (the sweeper failed it, or another worker finished it). */
export class OperationEnded extends Schema.TaggedError<OperationEnded>()("OperationEnded", {
  operationId: Schema.String,
  status: Schema.String
}) {}

export interface ProgressUpdate {
  /** Raw machine token kept for older clients. */
  readonly stage?: string
  /** What a human sees. */
  readonly stageLabel?: string
  /** 0..100; lower than already recorded is ignored by the operation unit. */
  readonly progress?: number
  /** connector_engine_setup only; replaces the recorded object. */
  readonly setupStatus?: JsonObject
}

export interface Job<P> {
  readonly operationId: string
  readonly orgId: string
  readonly payload: P
  /** 1 on the first delivery; higher after a crash or a failed attempt (resume, don't repeat). */
  readonly attempt: number
  readonly maxAttempts: number
  /** Records a step on the operation (and counts as a heartbeat); sent once the operation is marked running. */
  readonly report: (update: ProgressUpdate) => Effect.Effect<void, OperationEnded | RpcError>
  /**
   * The operation marked running: fails with OperationEnded when it had ended already. Done before
   * `run` is called unless the handler starts early (JobHandler.startEarly), which awaits it before
   * it changes anything.
   */
  readonly started: Effect.Effect<void, OperationEnded | RpcError>
}

export interface JobHandler<P, I, E, R> {
  readonly unit: string
  readonly type: string
  readonly payload: Schema.Schema<P, I>
  /**
   * Idempotent per operation id: records each finished step in the unit's own tables so a
   * redelivery resumes. Succeeds with the operation's `result`; fails with JobFailed to fail the
   * operation; any other failure or defect is retried with backoff, and after the last attempt the
   * operation fails with a message saying so.
   */
  readonly run: (job: Job<P>) => Effect.Effect<JsonObject, E, R>
  /**
   * Run while the operation is being marked running instead of after: the handler's reads overlap
   * that round trip to the operation unit. Such a handler awaits `job.started` before its first
   * change, or undoes what it changed when `job.started` fails (an operation that had ended must
   * find nothing changed); reports wait for it themselves.
   */
  readonly startEarly?: boolean
  /** Jobs of this type handled at once by this process (default 1). */
  readonly concurrency?: number
  readonly maxAttempts?: number
  readonly backoff?: ReadonlyArray<Duration.DurationInput>
  /** Redelivery after this long without an ack or a heartbeat (default 30 s). */
  readonly ackWait?: Duration.DurationInput
  /** Heartbeat (in-progress ack + operation heartbeat) period while the handler runs (default 10 s). */
  readonly heartbeatInterval?: Duration.DurationInput
}

type ReportInit = MessageInitShape<typeof ReportOperationRequestSchema>


/** What the operation's error says when a job is given up: the failure's message, never a stack. */
const failureSummary = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value as { readonly message?: unknown; readonly _tag?: unknown }
    if (typeof error?.message === "string" && error.message !== "") return error.message
    if (typeof error?._tag === "string") return error._tag
  }
  return "an internal error (see the worker's logs)"
}

/**
 * Consumes `jobs.<unit>.<type>` and runs each job against its operation (ARCHITECTURE.md,
 * "Asynchronous work"): skip it if the operation already ended, mark it running, run the handler
 * with a heartbeat, finish it completed with the result or failed with the error, and ack only
 * after the terminal report. Every call to the operation unit uses this unit's service principal.
 */
export const runJobs = <P, I, E, R>(
  handler: JobHandler<P, I, E, R>
): Effect.Effect<void, BusError, Scope.Scope | R | Bus | OperationClient | ServiceIdentity> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const operations = yield* OperationClient
    const maxAttempts = handler.maxAttempts ?? 5
    const heartbeatInterval = Duration.decode(handler.heartbeatInterval ?? Duration.seconds(10))
    const decodePayload = Schema.decodeUnknown(handler.payload)
    const decodeMessage = Schema.decodeUnknownOption(JobMessage)
    const service = yield* ServiceIdentity

    // The operation unit restarting must not burn the job's attempts: transient errors are retried here.
    const call = <A>(effect: Effect.Effect<A, RpcError, ServiceIdentity>) =>
      asService(effect).pipe(Effect.retry({ while: isTransient, schedule: Schedule.exponential("100 millis").pipe(Schedule.upTo("20 seconds")) }))

    const report = (init: ReportInit): Effect.Effect<Operation, OperationEnded | RpcError, ServiceIdentity> =>
      call(operations.reportOperation(init)).pipe(
        Effect.map((response) => response.operation!),
        Effect.catchIf(
          (e): e is RpcError => e instanceof RpcError && e.code === Code.FailedPrecondition && hasReason(e, "OPERATION_TERMINAL"),
          (e) => Effect.fail(new OperationEnded({ operationId: init.id ?? "", status: e.metadata.status ?? "ended" }))
        )
      )

    /** After the start (a start that fails ends the race with the handler, so ends the handler too). */
    const heartbeats = (delivery: Delivery, operationId: string, started: Effect.Effect<void, OperationEnded | RpcError>) =>
      Effect.zipRight(
        // The first beat after an interval: the start itself just told both that the job runs.
        Effect.zipRight(started, Effect.sleep(heartbeatInterval)),
        Effect.gen(function* () {
          yield* delivery.working
          yield* report({ id: operationId }).pipe(Effect.catchTag("RpcError", (e) => Effect.logWarning("operation heartbeat failed", e)))
        }).pipe(Effect.repeat(Schedule.spaced(heartbeatInterval)), Effect.zipRight(Effect.never))
      )

    /** The attempts this process is running, by operation, with how each ended. */
    const running = new Map<string, Deferred.Deferred<void, unknown>>()

    const handle = (delivery: Delivery) =>
      Effect.gen(function* () {
        const message = decodeMessage(delivery.payload)
        if (Option.isNone(message)) {
          return yield* Effect.logError("job message is not a job; dropped").pipe(Effect.annotateLogs({ subject: delivery.subject }))
        }
        const { operation_id: operationId, org_id: orgId, request_id: requestId } = message.value
        const inFlight = running.get(operationId)
        if (inFlight !== undefined) {
          // Redelivered while this process still runs it (its ack wait lapsed under load): two
          // attempts of one job must not run side by side. This delivery keeps itself alive until
          // the running attempt ends, then ends the same way (acked, or back to the bus).
          yield* Effect.logInfo("job redelivered while it runs here: waiting for the running attempt").pipe(Effect.annotateLogs({ operation_id: operationId }))
          return yield* Effect.raceFirst(
            Deferred.await(inFlight),
            delivery.working.pipe(Effect.repeat(Schedule.spaced(heartbeatInterval)), Effect.zipRight(Effect.never))
          )
        }
        const ended = yield* Deferred.make<void, unknown>()
        running.set(operationId, ended)
        const started = performance.now()
        yield* run(delivery, message.value, operationId, orgId).pipe(
          withRequestId(requestId),
          Effect.annotateLogs("operation_id", operationId),
          // A failure goes back to the bus (nak or dead letter): "retried".
          Effect.onExit((exit) => recordJob(handler.unit, handler.type, Exit.isSuccess(exit) ? exit.value : "retried", (performance.now() - started) / 1000)),
          Effect.onExit((exit) =>
            Effect.sync(() => running.delete(operationId)).pipe(Effect.zipRight(Deferred.done(ended, Exit.isSuccess(exit) ? Exit.void : Exit.failCause(exit.cause))))
          )
        )
      })

    const run = (delivery: Delivery, message: JobMessage, operationId: string, orgId: string) =>
      Effect.gen(function* () {
        yield* Effect.annotateCurrentSpan({ operationId, orgId, attempt: delivery.deliveryCount })
        const payload = yield* decodePayload(message.payload).pipe(Effect.either)
        if (payload._tag === "Left") {
          yield* report({ id: operationId, status: OperationStatus.FAILED, error: "The job's input is not valid for this worker" })
          yield* Effect.logError("job payload invalid; operation failed", payload.left).pipe(Effect.annotateLogs({ operationId }))
          return "failed" as const
        }
        // One call both starts the operation (or, on a redelivery, says it still runs) and learns
        // whether it ended already: a terminal operation refuses it (OperationEnded: skipped, below).
        const starting = report({ id: operationId, status: OperationStatus.RUNNING }).pipe(Effect.asVoid)
        let started: Effect.Effect<void, OperationEnded | RpcError> = Effect.void
        if (handler.startEarly === true) started = Fiber.join(yield* Effect.fork(starting))
        else yield* starting
        const job: Job<P> = {
          operationId,
          orgId,
          payload: payload.right,
          attempt: delivery.deliveryCount,
          maxAttempts,
          started,
          report: (update) =>
            Effect.zipRight(started, report({
              id: operationId,
              ...(update.stage !== undefined ? { stage: update.stage } : {}),
              ...(update.stageLabel !== undefined ? { stageLabel: update.stageLabel } : {}),
              ...(update.progress !== undefined ? { progress: Math.max(0, Math.min(100, Math.round(update.progress))) } : {}),
              ...(update.setupStatus !== undefined ? { setupStatus: update.setupStatus } : {})
            })).pipe(Effect.asVoid, Effect.provideService(ServiceIdentity, service))
        }
        const outcome = yield* Effect.raceFirst(handler.run(job), heartbeats(delivery, operationId, started)).pipe(Effect.either)
        // Whatever the handler did, the operation must be running before it is ended.
        yield* started
        if (outcome._tag === "Right") {
          yield* report({ id: operationId, status: OperationStatus.COMPLETED, progress: 100, result: outcome.right })
          return "completed" as const
        }
        const error = outcome.left as unknown
        if (error instanceof JobFailed) {
          yield* report({ id: operationId, status: OperationStatus.FAILED, error: error.message })
          return "failed" as const
        }
        // Anything else goes back to the bus: nak with backoff, or dead letter on the last attempt.
        return yield* Effect.fail(error)
      }).pipe(
        // The operation ended under us (swept, or finished by an earlier delivery): nothing left to do.
        Effect.catchIf(
          (e): e is OperationEnded => e instanceof OperationEnded,
          (e) => Effect.logInfo(`job stopped: operation already ${e.status}`).pipe(Effect.annotateLogs({ operationId: e.operationId }), Effect.as("skipped" as const))
        ),
        withRemoteParent(`job ${handler.unit}.${handler.type}`, message.traceparent, { kind: "consumer" })
      )

    const onDeadLetter = (delivery: Delivery, cause: Cause.Cause<unknown>) =>
      Effect.gen(function* () {
        const message = decodeMessage(delivery.payload)
        if (Option.isNone(message)) return
        yield* report({
          id: message.value.operation_id,
          status: OperationStatus.FAILED,
          error: `Gave up after ${Math.min(delivery.deliveryCount, maxAttempts)} attempts: ${failureSummary(cause)}`
        }).pipe(
          Effect.catchAll((e) => Effect.logError("could not fail the operation of a dead-lettered job", e)),
          Effect.provideService(ServiceIdentity, service)
        )
      })

    const options: ConsumeOptions = {
      stream: "JOBS",
      durable: `${handler.unit}-${handler.type}`.replace(/[^A-Za-z0-9_-]/g, "_"),
      filterSubjects: [jobSubject(handler.unit, handler.type)],
      maxDeliver: maxAttempts,
      ...(handler.backoff !== undefined ? { backoff: handler.backoff } : {}),
      ...(handler.ackWait !== undefined ? { ackWait: handler.ackWait } : {}),
      concurrency: handler.concurrency ?? 1,
      onDeadLetter
    }
    yield* bus.consume(options, (delivery) => Effect.provideService(handle(delivery), ServiceIdentity, service))
    yield* Effect.logInfo(`worker consuming ${jobSubject(handler.unit, handler.type)}`)
  })

/** The worker for one job type, running for the life of the layer. */
export const JobWorker = {
  layer: <P, I, E, R>(handler: JobHandler<P, I, E, R>): Layer.Layer<never, never, R | Bus | OperationClient | ServiceIdentity> =>
    Layer.scopedDiscard(Effect.orDie(runJobs(handler)))
}
