import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { CustomerStatus, SubscriptionRecord, SubscriptionStatus } from "./domain/models.js"
import type { PlanId } from "./domain/plans.js"

interface SubscriptionRow {
  readonly org_id: string
  readonly plan_id: PlanId
  readonly status: SubscriptionStatus
  readonly current_period_start: Date
  readonly current_period_end: Date
  readonly cancel_at_period_end: boolean
  readonly canceled_at: Date | null
  readonly pending_plan_id: PlanId | null
  readonly checkout_session_id: string | null
  readonly checkout_url: string | null
  readonly customer_status: CustomerStatus
}

const toRecord = (row: SubscriptionRow): SubscriptionRecord => ({
  orgId: row.org_id,
  planId: row.plan_id,
  status: row.status,
  currentPeriodStart: row.current_period_start,
  currentPeriodEnd: row.current_period_end,
  cancelAtPeriodEnd: row.cancel_at_period_end,
  canceledAt: row.canceled_at,
  pendingPlanId: row.pending_plan_id,
  checkoutSessionId: row.checkout_session_id,
  checkoutUrl: row.checkout_url,
  customerStatus: row.customer_status
})

export type CreditKind = "free_tier_grant" | "plan_grant"

/** Customers, subscriptions and the credit ledger. SQL failures are defects here, at the repository edge. */
export class BillingRepo extends Effect.Service<BillingRepo>()("@scion/billing/BillingRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const select = (orgId: string, lock: boolean) =>
      sql<SubscriptionRow>`
        select s.*, c.status as customer_status
        from subscriptions s join customers c on c.org_id = s.org_id
        where s.org_id = ${orgId}
        ${lock ? sql.literal("for update of s") : sql.literal("")}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord)),
        Effect.orDie
      )

    return {
      /** False when the org already has a customer (the event was consumed before). */
      insertCustomer: (orgId: string, eventId: string) =>
        sql`insert into customers (org_id, created_event_id) values (${orgId}, ${eventId})
            on conflict do nothing returning org_id`.pipe(Effect.map((rows) => rows.length === 1), Effect.orDie),

      insertSubscription: (record: SubscriptionRecord) =>
        sql`insert into subscriptions (org_id, plan_id, status, current_period_start, current_period_end)
            values (${record.orgId}, ${record.planId}, ${record.status}, ${record.currentPeriodStart}, ${record.currentPeriodEnd})
            on conflict (org_id) do nothing`.pipe(Effect.asVoid, Effect.orDie),

      /** Appends a ledger entry; false when one with this source key exists (a repeat). */
      appendCredit: (entry: { readonly orgId: string; readonly amountCents: number; readonly kind: CreditKind; readonly sourceKey: string }) =>
        sql`insert into credit_ledger (org_id, amount_cents, kind, source_key)
            values (${entry.orgId}, ${entry.amountCents}, ${entry.kind}, ${entry.sourceKey})
            on conflict (source_key) do nothing returning id`.pipe(Effect.map((rows) => rows.length === 1), Effect.orDie),

      /** Closes the org's customer (creating a closed one when the delete came first). */
      closeCustomer: (orgId: string, at: Date) =>
        sql`insert into customers (org_id, status, closed_at) values (${orgId}, 'closed', ${at})
            on conflict (org_id) do update set status = 'closed', closed_at = coalesce(customers.closed_at, excluded.closed_at)`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),

      find: (orgId: string) => select(orgId, false),
      /** The subscription locked for the rest of the transaction. */
      findForUpdate: (orgId: string) => select(orgId, true),

      save: (record: SubscriptionRecord) =>
        sql`update subscriptions set
              plan_id = ${record.planId}, status = ${record.status},
              current_period_start = ${record.currentPeriodStart}, current_period_end = ${record.currentPeriodEnd},
              cancel_at_period_end = ${record.cancelAtPeriodEnd}, canceled_at = ${record.canceledAt},
              pending_plan_id = ${record.pendingPlanId}, checkout_session_id = ${record.checkoutSessionId},
              checkout_url = ${record.checkoutUrl}, updated_at = now()
            where org_id = ${record.orgId}`.pipe(Effect.asVoid, Effect.orDie),

      /** Sum of the org's ledger in US cents. */
      balance: (orgId: string) =>
        sql<{ readonly balance: string }>`select coalesce(sum(amount_cents), 0)::text as balance from credit_ledger where org_id = ${orgId}`.pipe(
          Effect.map((rows) => Number(rows[0]?.balance ?? "0")),
          Effect.orDie
        )
    }
  })
}) {}
