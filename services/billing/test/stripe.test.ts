/**
 * The Stripe adapter against a small fake of Stripe's API on a real port: form-encoded
 * POST /v1/checkout/sessions with Bearer auth, Checkout Session JSON back, GET to read it.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { makeStripeProvider, PaymentProvider, PLANS, Subscriptions } from "../src/index.js"
import { billingTestLayer, newOrg, orgCreated } from "./support.js"

const API_KEY = "sk_test_fake_123"

interface Session {
  id: string
  object: "checkout.session"
  url: string
  status: "open" | "complete" | "expired"
  form: URLSearchParams
}

/** What the fake Stripe saw and holds. */
const stripe = { sessions: new Map<string, Session>(), unauthorized: 0, failNext: false }

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => resolve(body))
  })

const FakeStripe = Layer.scoped(
  PaymentProvider,
  Effect.gen(function* () {
    const server = yield* Effect.acquireRelease(
      Effect.async<Server>((resume) => {
        const server = createServer(async (req, res) => {
          const reply = (status: number, body: unknown) => {
            res.writeHead(status, { "content-type": "application/json" })
            res.end(JSON.stringify(body))
          }
          if (req.headers.authorization !== `Bearer ${API_KEY}`) {
            stripe.unauthorized++
            return reply(401, { error: { type: "invalid_request_error", message: "Invalid API Key provided" } })
          }
          if (req.method === "POST" && req.url === "/v1/checkout/sessions") {
            if (req.headers["content-type"] !== "application/x-www-form-urlencoded") return reply(400, { error: { message: "form body expected" } })
            if (stripe.failNext) {
              stripe.failNext = false
              return reply(500, { error: { type: "api_error", message: "Something went wrong" } })
            }
            const form = new URLSearchParams(await readBody(req))
            if (!form.get("success_url") || !form.get("mode")) return reply(400, { error: { message: "Missing required param: success_url." } })
            const id = `cs_test_${stripe.sessions.size + 1}`
            const session: Session = { id, object: "checkout.session", url: `https://checkout.stripe.com/c/pay/${id}`, status: "open", form }
            stripe.sessions.set(id, session)
            const { form: _, ...json } = session
            return reply(200, { ...json, mode: form.get("mode"), client_reference_id: form.get("client_reference_id") })
          }
          const match = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(req.url ?? "")
          if (req.method === "GET" && match) {
            const session = stripe.sessions.get(decodeURIComponent(match[1]!))
            if (!session) return reply(404, { error: { message: "No such checkout.session" } })
            const { form: _, ...json } = session
            return reply(200, json)
          }
          reply(404, { error: { message: "Unrecognized request URL" } })
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as AddressInfo).port
    return makeStripeProvider({
      apiKey: Redacted.make(API_KEY),
      apiUrl: `http://127.0.0.1:${port}`,
      returnUrl: "https://app.example.com/billing",
      timeout: "5 seconds" as never
    })
  })
)

describe("stripe checkout", () => {
  layer(billingTestLayer(FakeStripe), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("a paid plan opens a Checkout Session; the plan applies once Stripe says it is complete", () =>
      Effect.gen(function* () {
        const subscriptions = yield* Subscriptions
        const { orgId, owner } = yield* newOrg()
        yield* subscriptions.setUpOrg(orgCreated(orgId), `org.created.${orgId}`)
        const pending = yield* subscriptions.selectPlan(owner, orgId, "pro")
        expect(pending).toMatchObject({ planId: "free", status: "pending_checkout", pendingPlanId: "pro" })
        expect(pending.checkoutUrl).toMatch(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/)
        const session = [...stripe.sessions.values()].at(-1)!
        expect(Object.fromEntries(session.form)).toMatchObject({
          mode: "subscription",
          client_reference_id: orgId,
          "line_items[0][price_data][currency]": "usd",
          "line_items[0][price_data][unit_amount]": String(PLANS.pro.monthlyPriceCents),
          "line_items[0][price_data][recurring][interval]": "month",
          "line_items[0][quantity]": "1",
          "metadata[plan_id]": "pro",
          "metadata[org_id]": orgId
        })
        expect(session.form.get("success_url")).toBe(`https://app.example.com/billing?checkout=success&org_id=${orgId}`)
        expect(stripe.unauthorized).toBe(0)
        // Still open: the free plan applies.
        expect((yield* subscriptions.get(owner, orgId)).status).toBe("pending_checkout")
        expect((yield* subscriptions.checkEntitlement(owner, orgId, "connectors", 3)).allowed).toBe(false)
        session.status = "complete"
        const active = yield* subscriptions.get(owner, orgId)
        expect(active).toMatchObject({ planId: "pro", status: "active", pendingPlanId: null, checkoutUrl: null, creditsBalance: 1_000 + PLANS.pro.includedCredits })
      })
    )

    it.effect("an expired checkout leaves the org as it was; a provider failure is retryable and changes nothing", () =>
      Effect.gen(function* () {
        const subscriptions = yield* Subscriptions
        const { orgId, owner } = yield* newOrg()
        yield* subscriptions.setUpOrg(orgCreated(orgId), `org.created.${orgId}`)
        stripe.failNext = true
        expect(yield* Effect.flip(subscriptions.selectPlan(owner, orgId, "team"))).toMatchObject({ _tag: "PaymentProviderUnavailable" })
        expect(yield* subscriptions.get(owner, orgId)).toMatchObject({ planId: "free", status: "active" })
        yield* subscriptions.selectPlan(owner, orgId, "team")
        const session = [...stripe.sessions.values()].at(-1)!
        session.status = "expired"
        expect(yield* subscriptions.get(owner, orgId)).toMatchObject({ planId: "free", status: "active", pendingPlanId: null, checkoutUrl: null })
        // Downgrades and the free plan need no checkout.
        const before = stripe.sessions.size
        expect(yield* subscriptions.selectPlan(owner, orgId, "free")).toMatchObject({ planId: "free", status: "active" })
        expect(stripe.sessions.size).toBe(before)
      })
    )
  })
})
