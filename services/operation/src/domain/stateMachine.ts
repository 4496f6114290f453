import { Either } from "effect"
import { InvalidArgument, InvalidTransition, OperationTerminal } from "./errors.js"
import { isTerminal, type JsonObject, type Operation, type OperationStatus, type Report, SETUP_STATUS_TYPE } from "./models.js"

export const MAX_TEXT = 200
export const MAX_ERROR = 4000
/** Result and setup_status are small documents, not payloads. */
export const MAX_DOCUMENT_BYTES = 64 * 1024

/** The values a report leaves on the row; `start`/`complete` stamp started_at/completed_at once. */
export interface Changes {
  readonly status: OperationStatus
  readonly stage: string | null
  readonly stageLabel: string | null
  readonly progress: number | null
  readonly result: JsonObject | null
  readonly error: string | null
  readonly setupStatus: JsonObject | null
  readonly start: boolean
  readonly complete: boolean
}

export type Decision =
  /** An identical repeat of the report that ended the operation: nothing to write. */
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Update"; readonly changes: Changes }

type ReportError = InvalidArgument | InvalidTransition | OperationTerminal

/** JSON with object keys sorted, so equal documents compare equal whatever their key order. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v
  )

const sameJson = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b)

const invalid = (field: string, message: string) => Either.left(new InvalidArgument({ field, message }))

/** Field rules that hold whatever the operation's state. */
export const validateReport = (report: Report, type: Operation["type"]): Either.Either<void, InvalidArgument> => {
  if (report.progress !== undefined && (!Number.isInteger(report.progress) || report.progress < 0 || report.progress > 100)) {
    return invalid("progress", "progress must be an integer from 0 to 100")
  }
  if (report.stage !== undefined && report.stage.length > MAX_TEXT) return invalid("stage", `stage must be at most ${MAX_TEXT} characters`)
  if (report.stageLabel !== undefined && report.stageLabel.length > MAX_TEXT) {
    return invalid("stage_label", `stage_label must be at most ${MAX_TEXT} characters`)
  }
  if (report.setupStatus !== undefined && type !== SETUP_STATUS_TYPE) {
    return invalid("setup_status", `setup_status is only reported for ${SETUP_STATUS_TYPE} operations, not ${type}`)
  }
  if (report.status === "failed" && (report.error === undefined || report.error.trim() === "")) {
    return invalid("error", "a failed report needs an error message")
  }
  if (report.error !== undefined && report.status !== "failed") return invalid("error", "error is only reported with status failed")
  if (report.error !== undefined && report.error.length > MAX_ERROR) return invalid("error", `error must be at most ${MAX_ERROR} characters`)
  if (report.result !== undefined && report.status !== "completed") return invalid("result", "result is only reported with status completed")
  for (const [field, doc] of [["result", report.result], ["setup_status", report.setupStatus]] as const) {
    if (doc !== undefined && Buffer.byteLength(JSON.stringify(doc)) > MAX_DOCUMENT_BYTES) {
      return invalid(field, `${field} must be at most ${MAX_DOCUMENT_BYTES} bytes of JSON`)
    }
  }
  return Either.void
}

/** Whether every field the report names already holds the reported value. */
const repeats = (current: Operation, report: Report): boolean =>
  report.status === current.status &&
  (report.stage === undefined || report.stage === current.stage) &&
  (report.stageLabel === undefined || report.stageLabel === current.stageLabel) &&
  (report.progress === undefined || report.progress === current.progress) &&
  (report.error === undefined || report.error === current.error) &&
  (report.result === undefined || sameJson(report.result, current.result)) &&
  (report.setupStatus === undefined || sameJson(report.setupStatus, current.setupStatus))

/**
 * The state machine of the interface: pending → running → completed | failed (pending may also
 * end directly). Completed and failed never change; the identical repeat of the report that ended
 * an operation is accepted without effect, so a worker that retries its last report is safe.
 * Progress never goes down: a lower value is ignored, not refused, because reports from one
 * worker can arrive out of order and the percentage is best-effort anyway.
 */
export const decide = (current: Operation, report: Report): Either.Either<Decision, ReportError> =>
  Either.gen(function* () {
    yield* validateReport(report, current.type)
    if (isTerminal(current.status)) {
      if (repeats(current, report)) return { _tag: "Unchanged" } as const
      return yield* Either.left(new OperationTerminal({ operationId: current.id, status: current.status }))
    }
    const status = report.status ?? current.status
    if (status === "pending" && current.status === "running") {
      return yield* Either.left(new InvalidTransition({ operationId: current.id, from: current.status, to: status }))
    }
    const progress =
      report.progress === undefined ? current.progress : current.progress === null ? report.progress : Math.max(current.progress, report.progress)
    const changes: Changes = {
      status,
      stage: report.stage ?? current.stage,
      stageLabel: report.stageLabel ?? current.stageLabel,
      progress,
      result: report.result ?? current.result,
      error: report.error ?? current.error,
      setupStatus: report.setupStatus ?? current.setupStatus,
      start: current.startedAt === null && status !== "pending",
      complete: isTerminal(status)
    }
    return { _tag: "Update", changes } as const
  })
