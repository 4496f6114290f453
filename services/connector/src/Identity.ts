import type { Transport } from "@connectrpc/connect"
import { Code, type EffectClient, grpcTransport, makeEffectClient, type Principal, PrincipalVerifier, type RpcError } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { Config, Context, Effect, Layer, Schedule } from "effect"
import { IdentityUnavailable, NotAMember, PermissionDenied, Unauthenticated } from "./domain/errors.js"

/** The identity calls this unit makes: authorization questions and the principal-verifying keys. */
export class IdentityClient extends Context.Tag("@scion/connector/IdentityClient")<
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

export type EnvironmentPermission = "environments.read" | "environments.manage"

/** ARCHITECTURE.md's connector permissions (delete and admin join with deletion and selection). */
export type ConnectorPermission = "connectors.read" | "connectors.create" | "connectors.update" | "connectors.delete" | "connectors.admin"

export type AccessError = Unauthenticated | NotAMember | PermissionDenied | IdentityUnavailable

/**
 * Whether a principal holds a permission in an org: identity answers (Authorize) for the caller
 * whose token the request carried, re-reading sessions and keys, so a revoked key or a removed
 * member is refused on the very next request. The unit never trusts an org id a request claims.
 */
export class OrgAccess extends Context.Tag("@scion/connector/OrgAccess")<
  OrgAccess,
  { readonly require: (principal: Principal, orgId: string, permission: EnvironmentPermission | ConnectorPermission) => Effect.Effect<void, AccessError> }
>() {
  static readonly live: Layer.Layer<OrgAccess, never, IdentityClient> = Layer.effect(
    OrgAccess,
    Effect.map(IdentityClient, (identity) =>
      OrgAccess.of({
        require: (principal, orgId, permission) => {
          // Services act for the platform and hold no role in any org; an API key names its org.
          if (principal.kind === "service") return Effect.fail(new NotAMember({ orgId }))
          if (principal.kind === "api_key" && principal.orgId !== orgId) return Effect.fail(new NotAMember({ orgId }))
          return identity.authorize({ orgId, permission }).pipe(
            Effect.asVoid,
            Effect.catchTag("RpcError", (error: RpcError): Effect.Effect<void, AccessError> => {
              switch (error.code) {
                case Code.PermissionDenied:
                  return error.reason === "PERMISSION_DENIED" ? Effect.fail(new PermissionDenied({ orgId, permission })) : Effect.fail(new NotAMember({ orgId }))
                case Code.Unauthenticated:
                  return Effect.fail(new Unauthenticated())
                default:
                  return Effect.zipRight(
                    Effect.logWarning("identity could not authorize").pipe(Effect.annotateLogs({ code: error.codeName, reason: error.reason })),
                    Effect.fail(new IdentityUnavailable({ cause: `${error.codeName}: ${error.reason}` }))
                  )
              }
            }),
            Effect.withSpan("OrgAccess.require", { attributes: { orgId, permission } })
          )
        }
      })
    )
  )
}
