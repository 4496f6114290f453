/**
 * Whether a failure means a dependency (the unit's database, most often) is unreachable or
 * restarting rather than that the code is wrong: the caller should retry, so the RPC answers
 * Unavailable (the gateway's 503) instead of Internal (500). Looked for along the `cause` chain,
 * where @effect/sql's SqlError keeps the driver's error.
 */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND",
  "EPIPE",
  // SQLSTATE class 08 (connection exception), 57P01–57P03 (shutdown, crash, cannot connect now), 53300 (too many connections).
  "08000",
  "08001",
  "08003",
  "08004",
  "08006",
  "57P01",
  "57P02",
  "57P03",
  "53300"
])

const UNAVAILABLE_MESSAGES = /Connection terminated|connect ECONNREFUSED|the database system is (starting up|shutting down|in recovery mode)|timeout exceeded when trying to connect|Client has encountered a connection error/i

export const isDependencyUnavailable = (failure: unknown): boolean => {
  let current: unknown = failure
  for (let depth = 0; depth < 6 && current !== null && current !== undefined; depth++) {
    if (typeof current === "object") {
      const { code, message } = current as { code?: unknown; message?: unknown }
      if (typeof code === "string" && UNAVAILABLE_CODES.has(code)) return true
      if (typeof message === "string" && UNAVAILABLE_MESSAGES.test(message)) return true
      current = (current as { cause?: unknown }).cause
    } else {
      return typeof current === "string" && UNAVAILABLE_MESSAGES.test(current)
    }
  }
  return false
}
