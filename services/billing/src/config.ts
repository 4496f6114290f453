import { Config, Effect } from "effect"

/** Every setting of the billing unit, read once (Stripe's are read by its adapter only). */
export const billingConfig = Config.all({
  /** `local` completes checkout at once; `stripe` opens a hosted Stripe Checkout Session. */
  paymentProvider: Config.literal("local", "stripe")("PAYMENT_PROVIDER").pipe(Config.withDefault("local" as const)),
  /**
   * The durable consumer of events.org.* on the EVENTS stream. Replicas share one name (each
   * event is handled once); tests give every system its own.
   */
  eventsDurable: Config.string("BILLING_EVENTS_DURABLE").pipe(Config.withDefault("billing")),
  /** Where a new durable starts: `all` (everything the stream still holds) or `new`. */
  eventsDeliverPolicy: Config.literal("all", "new")("BILLING_EVENTS_DELIVER_POLICY").pipe(Config.withDefault("all" as const)),
  /** When set, NATS removes the durable after this many idle seconds (throwaway test systems). */
  eventsInactiveSeconds: Config.option(Config.integer("BILLING_EVENTS_INACTIVE_SECONDS"))
})

export class BillingConfig extends Effect.Service<BillingConfig>()("@scion/billing/BillingConfig", {
  effect: billingConfig
}) {}
