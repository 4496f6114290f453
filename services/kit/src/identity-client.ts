import type { Transport } from "@connectrpc/connect"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { Config, Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { type AccessCache, followAccessChanges, makeAccessCache, scopeOf } from "./access-cache.js"
import { Bus } from "./bus/Bus.js"
import { unitTransport, makeEffectClient, type EffectClient } from "./connect-client.js"
import { Code, hasReason, type RpcError } from "./errors.js"
import { type Principal, PrincipalVerifier } from "./principal.js"
import { withSpanWhenTracing } from "./tracing.js"

/**
 * ACCESS_CACHE_SECONDS (default 60; 0 asks identity every time): how long a unit keeps identity's
 * grant for a caller in an org. Revocation does not wait for it: identity's AccessChange events
 * drop entries within the bound the README states; this is the backstop when an event is lost.
 */
export const accessCacheTtl = Config.integer("ACCESS_CACHE_SECONDS").pipe(
  Config.withDefault(60),
  Config.validate({ message: "ACCESS_CACHE_SECONDS must be 0 or more", validation: (n) => n >= 0 }),
  Config.map(Duration.seconds)
)

/**
 * What every unit asks identity: whether a caller holds a permission in an org, and the keys that
 * verify principal tokens; plus the grants it already gave, kept per caller and dropped when
 * identity announces a change. One tag for all units, so the embedded mode provides it once.
 */
export class IdentityClient extends Context.Tag("@scion/kit/IdentityClient")<
  IdentityClient,
  Pick<EffectClient<typeof AuthService>, "authorize" | "getVerificationKeys"> & {
    /** Identity's grants by caller, org and permission (`authorizeInOrg`). */
    readonly grants: AccessCache<void> | null
  }
>() {
  /**
   * Over any Connect transport (in-memory in the embedded mode); grants are cached for
   * ACCESS_CACHE_SECONDS and the cache follows identity's AccessChange events on the bus.
   */
  static fromTransport(transport: Transport): Layer.Layer<IdentityClient, never, Bus> {
    return Layer.scoped(
      IdentityClient,
      Effect.gen(function* () {
        const client = makeEffectClient(AuthService, transport)
        const ttl = yield* Effect.orDie(accessCacheTtl)
        if (Duration.toMillis(ttl) === 0) return IdentityClient.of({ ...client, grants: null })
        const grants = makeAccessCache<void>({ ttlMillis: Duration.toMillis(ttl) })
        yield* followAccessChanges(yield* Bus, [grants])
        return IdentityClient.of({ ...client, grants })
      })
    )
  }

  /** IDENTITY_URL (default http://127.0.0.1:50051) over HTTP/2 gRPC, scoped to the layer. */
  static readonly layerConfig: Layer.Layer<IdentityClient, never, Bus> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
      return IdentityClient.fromTransport(yield* unitTransport(url))
    }).pipe(Effect.orDie)
  )
}

/**
 * Verifies principal tokens with identity's public keys, fetched once at start: a unit that starts
 * before identity waits for it (backoff up to 2 s, a warning per attempt; health answers
 * NOT_SERVING meanwhile, kit `serveUnitLayer`) instead of exiting. A rotated signing key needs a
 * restart of the unit.
 */
export const VerifierFromIdentity: Layer.Layer<PrincipalVerifier, never, IdentityClient> = Layer.effect(
  PrincipalVerifier,
  Effect.gen(function* () {
    const identity = yield* IdentityClient
    const response = yield* identity.getVerificationKeys({}).pipe(
      Effect.tapError((error) =>
        Effect.logWarning("waiting for identity: fetching its verification keys failed; retrying").pipe(Effect.annotateLogs({ code: error.codeName, detail: error.message }))
      ),
      Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds"))))
    )
    return PrincipalVerifier.fromPublicKeys(response.keys.map((k) => ({ keyId: k.keyId, publicKeyDer: Buffer.from(k.publicKey, "base64") })))
  }).pipe(Effect.orDie)
)

/** Identity's answer when it did not grant: units map it onto their own errors. */
export class AccessRefused extends Schema.TaggedError<AccessRefused>()("AccessRefused", {
  reason: Schema.Literal("not_a_member", "permission_denied", "unauthenticated")
}) {}

/** Identity could not answer (down, timing out, or an error of its own). */
export class IdentityUnreachable extends Schema.TaggedError<IdentityUnreachable>()("IdentityUnreachable", { cause: Schema.String }) {}

/**
 * Whether the principal holds `permission` in `orgId`. An API key acts only in its own org
 * (refused here without a call); everything else is identity's answer for the caller whose token
 * the request carried: asked once, then kept (grants only) until identity announces that the
 * session, key, membership or org changed, the entry's time runs out, or the token expires.
 * Service principals hold no org role: a unit decides what its own services may do before calling
 * this.
 */
export const authorizeInOrg = (
  principal: Principal,
  orgId: string,
  permission: string
): Effect.Effect<void, AccessRefused | IdentityUnreachable, IdentityClient> => {
  if (principal.kind === "service" || (principal.kind === "api_key" && principal.orgId !== orgId)) {
    return Effect.fail(new AccessRefused({ reason: "not_a_member" }))
  }
  return Effect.flatMap(IdentityClient, (identity) => {
    const ask = identity.authorize({ orgId, permission }).pipe(Effect.asVoid)
    if (identity.grants === null) return ask
    const subject = principal.kind === "api_key" ? `k:${principal.apiKeyId}` : `s:${principal.sessionId}`
    return identity.grants.getOrLookup(`${subject}\u0000${orgId}\u0000${permission}`, scopeOf(principal, orgId), principal.exp * 1000, ask)
  }).pipe(
    Effect.catchTag("RpcError", (error: RpcError): Effect.Effect<void, AccessRefused | IdentityUnreachable> => {
      switch (error.code) {
        case Code.PermissionDenied:
          return Effect.fail(new AccessRefused({ reason: hasReason(error, "PERMISSION_DENIED") ? "permission_denied" : "not_a_member" }))
        case Code.Unauthenticated:
          return Effect.fail(new AccessRefused({ reason: "unauthenticated" }))
        default:
          return Effect.zipRight(
            Effect.logWarning("identity could not authorize").pipe(Effect.annotateLogs({ code: error.codeName, reason: error.reason })),
            Effect.fail(new IdentityUnreachable({ cause: `${error.codeName}: ${error.reason}` }))
          )
      }
    }),
    withSpanWhenTracing("authorizeInOrg", { attributes: { orgId, permission } })
  )
}
