import type { SqlClient } from "@effect/sql"
import { type Bus, type PrincipalVerifier, unitDatabase } from "@scion/kit"
import { Layer } from "effect"
import { BillingRepo } from "./BillingRepo.js"
import { BillingConfig } from "./config.js"
import { IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
import { OrgEventsConsumer } from "./OrgEvents.js"
import { PaymentProvider } from "./PaymentProvider.js"
import { Subscriptions } from "./Subscriptions.js"

/** The database of the unit: schema `billing`, migrations from ../migrations. */
export const BillingDatabase = unitDatabase({ schema: "billing", migrations: new URL("../migrations/", import.meta.url) })

const Config = BillingConfig.Default.pipe(Layer.orDie)

/**
 * The billing services given an OrgAccess policy and a PaymentProvider. Tests provide a fake
 * OrgAccess and the provider they exercise here.
 */
export const BillingServices: Layer.Layer<Subscriptions | BillingRepo | BillingConfig | SqlClient.SqlClient, never, OrgAccess | PaymentProvider> = Subscriptions.Default.pipe(
  Layer.provideMerge(BillingRepo.Default),
  Layer.provideMerge(Config),
  Layer.provideMerge(BillingDatabase)
)

/**
 * The billing unit, given a client of identity and a bus: production uses
 * `IdentityClient.layerConfig` + `NatsBus.layer()`; the embedded mode an in-memory transport and
 * the shared `InMemoryBus`. The org-events consumer is running before the layer is built, so a
 * unit reporting healthy already listens. Provides what billingRoutes needs.
 */
export const BillingLive: Layer.Layer<Subscriptions | PrincipalVerifier, never, IdentityClient | Bus> = Layer.merge(OrgEventsConsumer, VerifierFromIdentity).pipe(
  Layer.provideMerge(BillingServices),
  Layer.provide(Layer.merge(OrgAccess.live, PaymentProvider.layerConfig.pipe(Layer.provide(Config))))
)

export { billingRoutes } from "./rpc/routes.js"
export { BillingConfig } from "./config.js"
export { BillingRepo } from "./BillingRepo.js"
export { BILLING_MANAGE, BILLING_READ, IdentityClient, OrgAccess, VerifierFromIdentity } from "./Identity.js"
export { handleOrgEvent, ORG_EVENTS_FILTER, OrgEventsConsumer } from "./OrgEvents.js"
export { makeStripeProvider, PaymentProvider, stripeConfig, type CheckoutStart, type CheckoutState, type StripeConfig } from "./PaymentProvider.js"
export { Subscriptions } from "./Subscriptions.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
export * from "./domain/plans.js"
export * from "./domain/subscription.js"
