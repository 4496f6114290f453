/**
 * Every reason a unit can put on the wire has an HTTP status at the gateway: in its status table,
 * or answered by a handler with a body of its own. A reason missing from both would fall back to
 * the Connect code's default status without anyone noticing; this test notices.
 */
import { describe, expect, it } from "vitest"
import { reasonsAnsweredByHandlers, statusByReason } from "../../gateway/src/errors.js"
import { wireErrors as billing } from "../../services/billing/src/domain/errors.js"
import { wireErrors as branch } from "../../services/branch/src/domain/errors.js"
import { wireErrors as connector } from "../../services/connector/src/domain/errors.js"
import { wireErrors as identity } from "../../services/identity/src/domain/errors.js"
import { wireErrors as operation } from "../../services/operation/src/domain/errors.js"

const reasonsOf = (table: Record<string, { readonly reason: string }>) => Object.values(table).map((entry) => entry.reason)

describe("error reasons across the wire", () => {
  const known = new Set<string>([...Object.keys(statusByReason), ...reasonsAnsweredByHandlers])
  for (const [unit, table] of Object.entries({ identity, operation, billing, connector, branch })) {
    it(`every reason the ${unit} unit sends has a status at the gateway`, () => {
      const reasons = reasonsOf(table as Record<string, { readonly reason: string }>)
      expect(reasons.length).toBeGreaterThan(0)
      expect(reasons.filter((reason) => !known.has(reason))).toEqual([])
    })
  }

  it("the handlers' own reasons are not also in the status table", () => {
    expect(reasonsAnsweredByHandlers.filter((reason) => Object.hasOwn(statusByReason, reason))).toEqual([])
  })
})
