import type { Transport } from "@connectrpc/connect"
import { Code, type EffectClient, grpcTransport, makeEffectClient, type Principal, PrincipalVerifier, type RpcError } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { Config, Context, Effect, Layer, Schedule } from "effect"
import { IdentityUnavailable, Unauthenticated } from "./domain/errors.js"

/** The identity calls this unit makes: authorization questions and the principal-verifying keys. */
export class IdentityClient extends Context.Tag("@scion/operation/IdentityClient")<
  IdentityClient,
  Pick<EffectClient<typeof AuthService>, "authorize" | "getVerificationKeys">
>() {
  /** Over any Connect transport (in-memory in the embedded mode). */
  static fromTransport(transport: Transport): Layer.Layer<IdentityClient> {
    return Layer.succeed(IdentityClient, makeEffectClient(AuthService, transport))
  }

  /** IDENTITY_URL (default http://127.0.0.1:50051) over HTTP/2 gRPC, scoped to the layer. */
  static readonly layerConfig: Layer.Layer<IdentityClient> = Layer.unwrapScoped(
    Effect.gen(function* () {
      const url = yield* Config.string("IDENTITY_URL").pipe(Config.withDefault("http://127.0.0.1:50051"))
      return IdentityClient.fromTransport(yield* grpcTransport(url))
    }).pipe(Effect.orDie)
  )
}

/**
 * Verifies principal tokens with identity's public keys, fetched once at start (retried while
 * identity is still starting). A rotated signing key needs a restart of this unit.
 */
export const VerifierFromIdentity: Layer.Layer<PrincipalVerifier, never, IdentityClient> = Layer.effect(
  PrincipalVerifier,
  Effect.gen(function* () {
    const identity = yield* IdentityClient
    const response = yield* identity.getVerificationKeys({}).pipe(
      Effect.tapError((error) => Effect.logWarning("fetching identity's verification keys failed; retrying").pipe(Effect.annotateLogs({ code: error.codeName }))),
      Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")), Schedule.upTo("60 seconds")))
    )
    return PrincipalVerifier.fromPublicKeys(response.keys.map((k) => ({ keyId: k.keyId, publicKeyDer: Buffer.from(k.publicKey, "base64") })))
  }).pipe(Effect.orDie)
)

/** The permission that makes a session caller a reader of an org's operations. */
export const OPERATIONS_READ = "operations.read"

/** The platform permission of service principals that create and report operations in any org. */
export const OPERATIONS_WRITE = "operations.write"

/**
 * Whether a principal may act on an org's operations: identity answers (Authorize with
 * operations.read, which every role holds, so it amounts to membership) for the caller whose token
 * the request carried. API keys ask too, although their token names their org: identity re-reads
 * the key, so a revoked key is refused on the very next request rather than when its signed
 * principal expires.
 */
export class OrgAccess extends Context.Tag("@scion/operation/OrgAccess")<
  OrgAccess,
  { readonly isMember: (principal: Principal, orgId: string) => Effect.Effect<boolean, Unauthenticated | IdentityUnavailable> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        isMember: (principal, orgId) => {
          // A service principal is one of our own workers, signed by identity for the platform:
          // the unit that started the work checked the user's permission when it did.
          if (principal.kind === "service") return Effect.succeed(principal.permissions.includes(OPERATIONS_WRITE))
          if (principal.kind === "api_key" && principal.orgId !== orgId) return Effect.succeed(false)
          return identity.authorize({ orgId, permission: OPERATIONS_READ }).pipe(
            Effect.as(true),
            Effect.catchTag("RpcError", (error: RpcError): Effect.Effect<boolean, Unauthenticated | IdentityUnavailable> => {
              switch (error.code) {
                case Code.PermissionDenied:
                  return Effect.succeed(false)
                case Code.Unauthenticated:
                  return Effect.fail(new Unauthenticated())
                default:
                  return Effect.zipRight(
                    Effect.logWarning("identity could not authorize").pipe(Effect.annotateLogs({ code: error.codeName, reason: error.reason })),
                    Effect.fail(new IdentityUnavailable({ cause: `${error.codeName}: ${error.reason}` }))
                  )
              }
            }),
            Effect.withSpan("OrgAccess.isMember", { attributes: { orgId } })
          )
        }
      })
    )
  )
}
