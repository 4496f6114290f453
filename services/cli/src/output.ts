import type { Operation } from "@scion/sdk"
import { Console, Effect } from "effect"
import { CliSession } from "./session.js"

const cell = (value: unknown): string => {
  if (value === null || value === undefined) return "-"
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  return JSON.stringify(value)
}

/** A column: its header and how to read it from a row. */
export type Column<A> = readonly [header: string, read: (row: A) => unknown]

/** Rows as an aligned table for people. */
export const renderTable = <A>(rows: ReadonlyArray<A>, columns: ReadonlyArray<Column<A>>): string => {
  const cells = rows.map((row) => columns.map(([, read]) => cell(read(row))))
  const widths = columns.map(([header], i) => Math.max(header.length, ...cells.map((r) => r[i]!.length)))
  const line = (values: ReadonlyArray<string>) => values.map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!))).join("  ").trimEnd()
  return [line(columns.map(([header]) => header.toUpperCase())), ...cells.map(line)].join("\n")
}

/** Prints the API's JSON with --json, else a table (or a line saying there is nothing). */
export const printList = <A>(value: unknown, rows: ReadonlyArray<A>, columns: ReadonlyArray<Column<A>>, empty: string) =>
  Effect.gen(function* () {
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify(value, null, 2))
    yield* Console.log(rows.length === 0 ? empty : renderTable(rows, columns))
  })

/** Prints one resource: its JSON with --json, else "field  value" lines. */
export const printResource = (value: object, fields?: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify(value, null, 2))
    const record = value as Record<string, unknown>
    const keys = fields ?? Object.keys(record)
    const width = Math.max(...keys.map((k) => k.length))
    yield* Console.log(keys.map((k) => `${k.padEnd(width)}  ${cell(record[k])}`).join("\n"))
  })

/** Prints a line for people; with --json, the value instead. */
export const printMessage = (message: string, value: unknown) =>
  Effect.flatMap(CliSession, (session) => Console.log(session.json ? JSON.stringify(value, null, 2) : message))

const BAR_WIDTH = 30

/**
 * Reports an operation's progress on stderr (stdout stays for the result, e.g. --output url):
 * a bar redrawn in place with stage_label and progress when stdout is a terminal, plain lines
 * otherwise (CI logs).
 */
export const progressReporter = () => {
  const interactive = process.stdout.isTTY === true
  let drawn = false
  const report = (operation: Operation) => {
    const stage = operation.stage_label ?? (operation.status === "pending" ? "Waiting to start" : operation.status)
    if (interactive) {
      const percent = operation.progress ?? (operation.status === "completed" ? 100 : 0)
      const filled = Math.round((percent / 100) * BAR_WIDTH)
      process.stderr.write(`\r\x1b[2K[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${String(percent).padStart(3)}% ${stage}`)
      drawn = true
      if (operation.status === "completed" || operation.status === "failed") {
        process.stderr.write("\n")
        drawn = false
      }
    } else {
      process.stderr.write(`${operation.id} ${operation.status}${operation.progress === null ? "" : ` ${operation.progress}%`} ${stage}\n`)
    }
  }
  /** Ends a bar that an error interrupted, so the error starts on its own line. */
  const finish = Effect.sync(() => {
    if (drawn) process.stderr.write("\n")
    drawn = false
  })
  return { report, finish }
}
