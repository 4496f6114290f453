import { type Bus, OutboxRelay, PrincipalSigner, PrincipalVerifier, unitDatabase } from "@scion/kit"
import { Effect, Layer } from "effect"
import { Access } from "./Access.js"
import { Accounts } from "./Accounts.js"
import { ApiKeys } from "./ApiKeys.js"
import { ApiKeysRepo } from "./ApiKeysRepo.js"
import { Auth } from "./Auth.js"
import { IdentityConfig } from "./config.js"
import { Database } from "./Database.js"
import { Invites } from "./Invites.js"
import { InvitesRepo } from "./InvitesRepo.js"
import { Mailer } from "./Mailer.js"
import { Orgs } from "./Orgs.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { SessionsRepo } from "./SessionsRepo.js"
import { UsersRepo } from "./UsersRepo.js"

/** The database of the unit: schema `identity`, migrations from ../migrations (relative to src/ or dist/). */
export const IdentityDatabase = unitDatabase({ schema: "identity", migrations: new URL("../migrations/", import.meta.url) })

/** Verifies principal tokens with the signer's own public key (identity verifies what it signs). */
export const VerifierFromSigner: Layer.Layer<PrincipalVerifier, never, PrincipalSigner> = Layer.effect(
  PrincipalVerifier,
  Effect.map(PrincipalSigner, (signer) => PrincipalVerifier.fromPublicKeys([{ keyId: signer.keyId, publicKeyDer: signer.publicKeyDer }]))
)

/**
 * Publishes identity's outbox (events.org.created, events.org.deleted, events.user.deleted) to the
 * bus: NatsBus in production, InMemoryBus in the embedded mode. Shares the unit's database pool.
 */
export const IdentityEventsRelay: Layer.Layer<never, never, Bus> = OutboxRelay.layer().pipe(Layer.provide(IdentityDatabase))

const Repos = Layer.mergeAll(UsersRepo.Default, SessionsRepo.Default, OrgsRepo.Default, InvitesRepo.Default, ApiKeysRepo.Default, OutboxRepo.Default, Database.Default)

const Keys = VerifierFromSigner.pipe(Layer.provideMerge(PrincipalSigner.layerConfig))

const Config = IdentityConfig.Default.pipe(Layer.orDie)

/** Everything identityRoutes needs, given a mailer. Tests provide a recording mailer here. */
export const IdentityServices = Layer.mergeAll(Auth.Default, Accounts.Default, Invites.Default, ApiKeys.Default).pipe(
  Layer.provideMerge(Orgs.Default),
  Layer.provideMerge(Access.Default),
  Layer.provideMerge(Repos),
  Layer.provideMerge(Keys),
  Layer.provideMerge(Config),
  Layer.provideMerge(IdentityDatabase)
)

/**
 * The identity unit with the mailer named by MAIL_ADAPTER: requires nothing but configuration.
 * It provides what identityRoutes needs, plus the signer and verifier of principal tokens.
 */
export const IdentityLive: Layer.Layer<Auth | Accounts | Orgs | Invites | ApiKeys | PrincipalSigner | PrincipalVerifier> = IdentityServices.pipe(
  Layer.provide(Mailer.layerConfig.pipe(Layer.provide(Config)))
)

export { identityRoutes } from "./rpc/routes.js"
export { IdentityConfig } from "./config.js"
export { MailRecorder, Mailer, RecordingMailer, type MailMessage } from "./Mailer.js"
export { Access, type OrgAccess } from "./Access.js"
export { Accounts } from "./Accounts.js"
export { ApiKeys } from "./ApiKeys.js"
export { Auth, type Authenticated } from "./Auth.js"
export { Invites } from "./Invites.js"
export { Orgs } from "./Orgs.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
export * from "./domain/roles.js"
export { hasValidChecksum, newApiKeySecret, type ApiKeyMode } from "./domain/secrets.js"
