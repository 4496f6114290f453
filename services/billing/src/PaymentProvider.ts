import { Config, Context, Duration, Effect, Layer, Redacted, Schema } from "effect"
import { BillingConfig } from "./config.js"
import { PaymentProviderUnavailable } from "./domain/errors.js"
import type { Plan } from "./domain/plans.js"

/** How a paid plan's checkout went: done at once, or a hosted page the user must visit. */
export type CheckoutStart =
  | { readonly _tag: "Completed" }
  | { readonly _tag: "Hosted"; readonly sessionId: string; readonly url: string }

/** Where a hosted checkout stands. */
export type CheckoutState = "open" | "complete" | "expired"

export interface StripeConfig {
  readonly apiKey: Redacted.Redacted<string>
  readonly apiUrl: string
  /** The page Stripe sends the user back to; `?checkout=success|canceled&org_id=…` is appended. */
  readonly returnUrl: string
  readonly timeout: Duration.Duration
}

export const stripeConfig = Config.all({
  apiKey: Config.redacted("STRIPE_API_KEY"),
  apiUrl: Config.string("STRIPE_API_URL").pipe(Config.withDefault("https://api.stripe.com")),
  returnUrl: Config.string("BILLING_CHECKOUT_RETURN_URL").pipe(Config.withDefault("http://localhost:8080/")),
  timeout: Config.duration("STRIPE_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))
})

/** The payment-provider port: paid plans go through it. */
export class PaymentProvider extends Context.Tag("@scion/billing/PaymentProvider")<
  PaymentProvider,
  {
    readonly name: string
    readonly startCheckout: (input: { readonly orgId: string; readonly plan: Plan }) => Effect.Effect<CheckoutStart, PaymentProviderUnavailable>
    readonly checkoutState: (sessionId: string) => Effect.Effect<CheckoutState, PaymentProviderUnavailable>
  }
>() {
  /** The default: checkout completes at once (no card, no redirect). For local use and tests. */
  static readonly local: Layer.Layer<PaymentProvider> = Layer.succeed(
    PaymentProvider,
    PaymentProvider.of({
      name: "local",
      startCheckout: () => Effect.succeed({ _tag: "Completed" }),
      checkoutState: () => Effect.succeed("complete")
    })
  )

  /** Stripe Checkout (STRIPE_API_KEY, STRIPE_API_URL, BILLING_CHECKOUT_RETURN_URL). */
  static readonly stripe: Layer.Layer<PaymentProvider> = Layer.effect(
    PaymentProvider,
    Effect.map(stripeConfig, (config) => makeStripeProvider(config))
  ).pipe(Layer.orDie)

  /** The adapter named by PAYMENT_PROVIDER (default local). */
  static readonly layerConfig: Layer.Layer<PaymentProvider, never, BillingConfig> = Layer.unwrapEffect(
    Effect.map(BillingConfig, (config) => (config.paymentProvider === "stripe" ? PaymentProvider.stripe : PaymentProvider.local))
  )
}

/** The fields of Stripe's Checkout Session object we read. */
const CheckoutSession = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("checkout.session"),
  url: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.Literal("open", "complete", "expired"))
})
const decodeSession = Schema.decodeUnknown(CheckoutSession)

const withQuery = (base: string, params: Record<string, string>) => {
  const url = new URL(base)
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
  return url.toString()
}

/**
 * Stripe's wire format: form-encoded bodies with bracketed keys, Bearer auth, JSON answers. A
 * subscription-mode session with inline price data, so no Stripe-side product setup is needed.
 */
export const makeStripeProvider = (config: StripeConfig) => {
  const unavailable = (cause: unknown) => new PaymentProviderUnavailable({ cause: cause instanceof Error ? cause.message : String(cause) })

  const call = (method: "GET" | "POST", path: string, form?: URLSearchParams) =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(`${config.apiUrl.replace(/\/$/, "")}${path}`, {
          method,
          signal,
          headers: {
            authorization: `Bearer ${Redacted.value(config.apiKey)}`,
            ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {})
          },
          ...(form ? { body: form.toString() } : {})
        })
        const body: unknown = await response.json().catch(() => null)
        if (!response.ok) {
          const message = (body as { error?: { message?: string } } | null)?.error?.message ?? `HTTP ${response.status}`
          throw new Error(`Stripe ${method} ${path}: ${message}`)
        }
        return body
      },
      catch: unavailable
    }).pipe(
      Effect.timeoutFail({ duration: config.timeout, onTimeout: () => unavailable(`Stripe ${method} ${path} timed out`) }),
      Effect.flatMap((body) => Effect.mapError(decodeSession(body), unavailable)),
      Effect.tapError((e) => Effect.logWarning("Stripe call failed").pipe(Effect.annotateLogs({ path, cause: e.cause }))),
      Effect.withSpan(`Stripe ${method} ${path.replace(/cs_[A-Za-z0-9_]+/, ":id")}`)
    )

  return PaymentProvider.of({
    name: "stripe",
    startCheckout: ({ orgId, plan }) => {
      const form = new URLSearchParams({
        mode: "subscription",
        client_reference_id: orgId,
        success_url: withQuery(config.returnUrl, { checkout: "success", org_id: orgId }),
        cancel_url: withQuery(config.returnUrl, { checkout: "canceled", org_id: orgId }),
        "line_items[0][quantity]": "1",
        "line_items[0][price_data][currency]": plan.currency,
        "line_items[0][price_data][unit_amount]": String(plan.monthlyPriceCents),
        "line_items[0][price_data][recurring][interval]": "month",
        "line_items[0][price_data][product_data][name]": `Scion ${plan.name}`,
        "metadata[org_id]": orgId,
        "metadata[plan_id]": plan.id,
        "subscription_data[metadata][org_id]": orgId,
        "subscription_data[metadata][plan_id]": plan.id
      })
      return call("POST", "/v1/checkout/sessions", form).pipe(
        Effect.flatMap((session) =>
          session.url === null ? Effect.fail(unavailable("Stripe returned a Checkout Session without a url")) : Effect.succeed<CheckoutStart>({ _tag: "Hosted", sessionId: session.id, url: session.url })
        )
      )
    },
    checkoutState: (sessionId) => call("GET", `/v1/checkout/sessions/${encodeURIComponent(sessionId)}`).pipe(Effect.map((session) => session.status ?? "open"))
  })
}
