/**
 * Every reason a unit can put on the wire has an answer at the gateway: a status in its table or
 * a handler that answers it with a body of its own. A reason the gateway lacks would fall back
 * silently to its Connect code's default status (issue 16, item 2: one source for the reasons).
 */
import { wireErrors as branchWireErrors } from "@scion/branch"
import { wireErrors as billingWireErrors } from "@scion/billing"
import { wireErrors as connectorWireErrors } from "@scion/connector"
import { reasonsAnsweredByHandlers, statusByReason } from "@scion/gateway"
import { wireErrors as identityWireErrors } from "@scion/identity"
import { wireErrors as operationWireErrors } from "@scion/operation"
import { describe, expect, it } from "vitest"

const tables = {
  identity: identityWireErrors,
  operation: operationWireErrors,
  billing: billingWireErrors,
  connector: connectorWireErrors,
  branch: branchWireErrors
} as const

const reasonsOf = (table: Record<string, { readonly reason: string }>) => Object.values(table).map((entry) => entry.reason)

describe("error reasons", () => {
  for (const [unit, table] of Object.entries(tables)) {
    it(`every reason the ${unit} unit sends has a status at the gateway`, () => {
      const answered = new Set<string>([...Object.keys(statusByReason), ...reasonsAnsweredByHandlers])
      const missing = reasonsOf(table as Record<string, { readonly reason: string }>).filter((reason) => !answered.has(reason))
      expect(missing, `${unit} reasons without a gateway status`).toEqual([])
      expect(reasonsOf(table as Record<string, { readonly reason: string }>).length).toBeGreaterThan(0)
    })
  }
})
