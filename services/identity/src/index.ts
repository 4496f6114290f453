import { Bus, followAccessChanges, OutboxRelay, PrincipalSigner, PrincipalVerifier, unitDatabase } from "@scion/kit"
import { Effect, Layer } from "effect"
import { Access } from "./Access.js"
import { Accounts } from "./Accounts.js"
import { ApiKeys } from "./ApiKeys.js"
import { ApiKeysRepo } from "./ApiKeysRepo.js"
import { Auth } from "./Auth.js"
import { IdentityConfig } from "./config.js"
import { Database } from "./Database.js"
import { Entitlements } from "./Entitlements.js"
import { Invites } from "./Invites.js"
import { InvitesRepo } from "./InvitesRepo.js"
import { Mailer } from "./Mailer.js"
import { Orgs } from "./Orgs.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { Projects } from "./Projects.js"
import { ProjectsRepo } from "./ProjectsRepo.js"
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
 * Publishes identity's outbox (events.org.created, events.org.deleted, events.user.deleted,
 * events.project.deleted) to the
 * bus: NatsBus in production, InMemoryBus in the embedded mode. Shares the unit's database pool.
 */
export const IdentityEventsRelay: Layer.Layer<never, never, Bus> = OutboxRelay.layer({ wakeChannel: "identity_outbox" }).pipe(Layer.provide(IdentityDatabase))

const Repos = Layer.mergeAll(
  UsersRepo.Default,
  SessionsRepo.Default,
  OrgsRepo.Default,
  InvitesRepo.Default,
  ApiKeysRepo.Default,
  ProjectsRepo.Default,
  OutboxRepo.Default,
  Database.Default
)

const Keys = VerifierFromSigner.pipe(Layer.provideMerge(PrincipalSigner.layerConfig))

const Config = IdentityConfig.Default.pipe(Layer.orDie)

/**
 * Everything identityRoutes needs, given a mailer, with plan limits from `entitlements` (which may
 * use identity's own signer: billing is asked as identity's service principal).
 */
export const identityServices = <E>(entitlements: Layer.Layer<Entitlements, E, PrincipalSigner>) =>
  Layer.mergeAll(Auth.Default, Accounts.Default, Invites.Default, ApiKeys.Default, Projects.Default).pipe(
    Layer.provideMerge(Orgs.Default),
    Layer.provideMerge(Access.Default),
    Layer.provideMerge(Repos),
    Layer.provideMerge(entitlements),
    Layer.provideMerge(Keys),
    Layer.provideMerge(Config),
    Layer.provideMerge(IdentityDatabase)
  )

/** identityServices with no plan limits: identity's own domain tests. Tests provide a recording mailer. */
export const IdentityServices = identityServices(Entitlements.unlimited)

type IdentityUnit = Auth | Accounts | Orgs | Invites | ApiKeys | Projects | Access | PrincipalSigner | PrincipalVerifier

/**
 * Identity's own standing caches follow the AccessChange events (other replicas' changes; this
 * replica's are dropped the moment they commit).
 */
export const IdentityAccessFollower: Layer.Layer<never, never, Bus | Access> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const access = yield* Access
    yield* followAccessChanges(yield* Bus, access.caches)
  })
)

/**
 * The identity unit with the mailer named by MAIL_ADAPTER and plan limits from `entitlements`:
 * the embedded mode passes billing over an in-memory transport.
 */
export const identityLive = (entitlements: Layer.Layer<Entitlements, never, PrincipalSigner>): Layer.Layer<IdentityUnit> =>
  identityServices(entitlements).pipe(Layer.provide(Mailer.layerConfig.pipe(Layer.provide(Config))))

/**
 * The identity unit as a process runs it: requires nothing but configuration. Plan limits come
 * from billing at BILLING_URL. Provides what identityRoutes needs, plus the signer and verifier
 * of principal tokens.
 */
export const IdentityLive: Layer.Layer<IdentityUnit> = identityLive(Entitlements.billingConfig)

export { identityRoutes } from "./rpc/routes.js"
export { IdentityConfig } from "./config.js"
export { MailRecorder, Mailer, RecordingMailer, type MailMessage } from "./Mailer.js"
export { Access, type OrgAccess } from "./Access.js"
export { Accounts } from "./Accounts.js"
export { ApiKeys } from "./ApiKeys.js"
export { Auth, type Authenticated } from "./Auth.js"
export { Invites } from "./Invites.js"
export { Orgs } from "./Orgs.js"
export { Entitlements, type LimitedResource } from "./Entitlements.js"
export { Projects, projectDescription, projectName, PROJECT_DESCRIPTION_MAX, PROJECT_NAME_MAX } from "./Projects.js"
export { ProjectsRepo } from "./ProjectsRepo.js"
export * from "./domain/errors.js"
export * from "./domain/models.js"
export * from "./domain/roles.js"
export { hasValidChecksum, newApiKeySecret, type ApiKeyMode } from "./domain/secrets.js"
