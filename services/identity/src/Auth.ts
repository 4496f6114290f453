import { AccessChange, Principal, PrincipalSigner, tracedFn } from "@scion/kit"
import { createHash, timingSafeEqual } from "node:crypto"
import { Clock, Effect, Option, Redacted } from "effect"
import { Access } from "./Access.js"
import { ApiKeysRepo } from "./ApiKeysRepo.js"
import { IdentityConfig } from "./config.js"
import { Database } from "./Database.js"
import {
  EmailTaken,
  InvalidArgument,
  InvalidCredentials,
  InvalidVerificationToken,
  ServiceCredentialInvalid,
  ServiceCredentialNotConfigured,
  Unauthenticated
} from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { SessionGrant, User } from "./domain/models.js"
import { effectivePermissions, knownRole } from "./domain/roles.js"
import { digest, hashPassword, hasValidChecksum, isApiKeyShaped, newSessionToken, newVerificationToken, verifyPassword } from "./domain/secrets.js"
import { boundedText, checkPassword, normalizeEmail } from "./domain/validation.js"
import { Mailer } from "./Mailer.js"
import { SessionsRepo } from "./SessionsRepo.js"
import { UsersRepo } from "./UsersRepo.js"

const SERVICE_NAME = /^[a-z][a-z0-9-]{0,39}$/

/**
 * What a service principal may do: create, read and report on any org's operations (the unit
 * that started the work already checked the user's permission). Nothing else: services hold no
 * org role, so every other org-scoped call still needs a user's or a key's principal.
 */
export const SERVICE_PERMISSIONS: ReadonlyArray<string> = ["operations.read", "operations.write"]

export interface Authenticated {
  readonly principal: Principal
  /** The principal signed for other units (x-scion-principal). */
  readonly token: string
  readonly expiresAt: Date
}

/** Sign-up, log-in and log-out, email verification, and bearer-token authentication. */
export class Auth extends Effect.Service<Auth>()("@scion/identity/Auth", {
  effect: Effect.gen(function* () {
    const config = yield* IdentityConfig
    const db = yield* Database
    const users = yield* UsersRepo
    const sessions = yield* SessionsRepo
    const apiKeys = yield* ApiKeysRepo
    const mailer = yield* Mailer
    const signer = yield* PrincipalSigner
    const access = yield* Access

    const startSession = (user: User) =>
      Effect.gen(function* () {
        const sessionToken = yield* newSessionToken
        const expiresAt = yield* sessions.create({ id: yield* Ids.session, userId: user.id, tokenDigest: digest(sessionToken), ttlDays: config.sessionTtlDays })
        return { user, sessionToken, expiresAt } satisfies SessionGrant
      })

    const sendVerification = (user: User) =>
      Effect.gen(function* () {
        const token = yield* newVerificationToken
        yield* users.createVerification({
          id: yield* Ids.emailVerification,
          userId: user.id,
          email: user.email,
          tokenDigest: digest(token),
          ttlHours: config.emailVerificationTtlHours
        })
        return token
      })

    const signUp = tracedFn("Auth.signUp")(function* (input: { email: string; password: string; fullName: string }) {
      const email = yield* normalizeEmail(input.email)
      const password = yield* checkPassword(input.password)
      const fullName = yield* boundedText("full_name", input.fullName)
      const passwordHash = yield* hashPassword(password)
      const { grant, verificationToken } = yield* db.transaction(
        Effect.gen(function* () {
          const user = yield* users.insert({ id: yield* Ids.user, email, fullName, passwordHash, verified: config.autoVerifyEmail })
          if (Option.isNone(user)) return yield* new EmailTaken({ email })
          const verificationToken = config.autoVerifyEmail ? Option.none() : Option.some(yield* sendVerification(user.value))
          return { grant: yield* startSession(user.value), verificationToken }
        })
      )
      // Mail leaves only once the user exists for sure.
      yield* Option.match(verificationToken, {
        onNone: () => Effect.void,
        onSome: (token) =>
          mailer.send({
            to: email,
            subject: "Verify your Scion email address",
            text: `Welcome to Scion, ${fullName}.\n\nVerify ${email} with this token (valid ${config.emailVerificationTtlHours} hours):\n\n${token}\n`,
            secrets: [token]
          })
      })
      yield* Effect.logInfo("user signed up").pipe(Effect.annotateLogs({ user_id: grant.user.id }))
      return grant
    })

    const logIn = tracedFn("Auth.logIn")(function* (input: { email: string; password: string }) {
      const email = input.email.trim().toLowerCase()
      const found = yield* users.findCredentials(email)
      // Unknown emails pay for one scrypt as well, so timing does not reveal which emails exist.
      const ok = yield* verifyPassword(input.password, Option.map(found, (f) => f.passwordHash))
      if (!ok || Option.isNone(found)) return yield* new InvalidCredentials()
      return yield* startSession(found.value.user)
    })

    const logOut = tracedFn("Auth.logOut")(function* (principal: Principal) {
      const { sessionId } = yield* access.session(principal)
      const change = new AccessChange({ session_id: sessionId })
      yield* db.transaction(Effect.zipRight(sessions.delete(sessionId), access.announce(change)))
      yield* access.forget(change)
    })

    const verifyEmail = tracedFn("Auth.verifyEmail")(function* (token: string) {
      const user = yield* users.consumeVerification(digest(token))
      if (Option.isNone(user)) return yield* new InvalidVerificationToken()
      return user.value
    })

    /** A principal for PRINCIPAL_TTL_SECONDS, or until `notAfter` (an expiring API key) if sooner. */
    const sign = (fields: Omit<ConstructorParameters<typeof Principal>[0], "exp">, notAfter: Date | null = null) =>
      Effect.map(Clock.currentTimeMillis, (now): Authenticated => {
        const ttlExp = Math.floor(now / 1000) + config.principalTtlSeconds
        const exp = notAfter === null ? ttlExp : Math.min(ttlExp, Math.floor(notAfter.getTime() / 1000))
        const principal = new Principal({ ...fields, exp })
        return { principal, token: signer.sign(principal), expiresAt: new Date(exp * 1000) }
      })

    // Keys whose use this process recorded in the last minute: the write happens off the request
    // path, once a minute per key however many requests arrive together.
    const recentlyTouched = new Map<string, number>()
    const recordUse = (keyId: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const last = recentlyTouched.get(keyId)
        if (last !== undefined && now - last < 60_000) return
        if (recentlyTouched.size > 10_000) recentlyTouched.clear()
        recentlyTouched.set(keyId, now)
        yield* apiKeys.touch(keyId).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("recording API key use failed", cause)),
          Effect.forkDaemon
        )
      })

    /**
     * The hot path: a bearer token to a signed principal with one indexed query. A key with a bad
     * checksum is refused before any lookup.
     */
    const authenticate = tracedFn("Auth.authenticate")(function* (bearerToken: string) {
      if (isApiKeyShaped(bearerToken)) {
        if (!hasValidChecksum(bearerToken)) return yield* new Unauthenticated()
        const found = yield* apiKeys.authenticate(digest(bearerToken))
        if (Option.isNone(found)) return yield* new Unauthenticated()
        const { key, stale } = found.value
        if (stale) yield* recordUse(key.id)
        const role = knownRole(key.roleId)
        return yield* sign({
          kind: "api_key",
          userId: key.createdBy,
          sessionId: null,
          apiKeyId: key.id,
          orgId: key.orgId,
          roleKey: role.key,
          permissions: effectivePermissions(role, key.scopes)
        }, key.expiresAt)
      }
      if (!bearerToken.startsWith("scion_sess_")) return yield* new Unauthenticated()
      const session = yield* sessions.findLiveByDigest(digest(bearerToken))
      if (Option.isNone(session)) return yield* new Unauthenticated()
      return yield* sign({
        kind: "user_session",
        userId: session.value.userId,
        sessionId: session.value.sessionId,
        apiKeyId: null,
        orgId: null,
        roleKey: null,
        permissions: []
      })
    })

    /** The caller's role and permissions in an org, failing unless it holds the permission. */
    const authorize = tracedFn("Auth.authorize")(function* (principal: Principal, orgId: string, permission: string) {
      const granted = yield* access.require(principal, orgId, permission)
      return { roleKey: granted.role.key, permissions: granted.permissions }
    })

    /**
     * A service principal for one of our units. The credential is compared as SHA-256 digests in
     * constant time, so neither its length nor its prefix leaks through timing.
     */
    const issueServiceToken = tracedFn("Auth.issueServiceToken")(function* (serviceName: string, credential: string) {
      if (!SERVICE_NAME.test(serviceName)) {
        return yield* new InvalidArgument({ field: "service_name", message: "service_name must be 1..40 of a-z 0-9 - starting with a letter" })
      }
      if (Option.isNone(config.serviceCredential)) return yield* new ServiceCredentialNotConfigured()
      const expected = createHash("sha256").update(Redacted.value(config.serviceCredential.value)).digest()
      const presented = createHash("sha256").update(credential).digest()
      if (!timingSafeEqual(expected, presented)) return yield* new ServiceCredentialInvalid()
      return yield* sign({
        kind: "service",
        service: serviceName,
        userId: null,
        sessionId: null,
        apiKeyId: null,
        orgId: null,
        roleKey: null,
        permissions: SERVICE_PERMISSIONS
      })
    })

    const verificationKeys = Effect.succeed([{ keyId: signer.keyId, publicKey: signer.publicKeyDer.toString("base64") }] as const)

    return { signUp, logIn, logOut, verifyEmail, authenticate, authorize, issueServiceToken, verificationKeys } as const
  })
}) {}
