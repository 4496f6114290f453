import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from "node:crypto"
import { Config, Context, Effect, FiberRef, Layer, Option, Redacted, Schema } from "effect"

/** Header carrying the signed principal between units. Never trusted unsigned. */
export const PRINCIPAL_HEADER = "x-scion-principal"

/**
 * Who is calling: a dashboard session (a user), an org API key (an org, a role and its
 * effective permissions), or one of our own units acting for the platform (a worker reporting
 * on an operation long after the request that started it). A session's role depends on the org it
 * acts in, so units resolve it per request; an API key's is fixed and travels with it; a service
 * holds no org role, only the platform permissions identity granted it.
 */
export class Principal extends Schema.Class<Principal>("Principal")({
  kind: Schema.Literal("user_session", "api_key", "service"),
  /** The unit a service principal was issued to (kind "service" only). */
  service: Schema.optional(Schema.String),
  userId: Schema.NullOr(Schema.String),
  sessionId: Schema.NullOr(Schema.String),
  apiKeyId: Schema.NullOr(Schema.String),
  orgId: Schema.NullOr(Schema.String),
  roleKey: Schema.NullOr(Schema.String),
  permissions: Schema.Array(Schema.String),
  /** Expiry of this signed statement, epoch seconds. */
  exp: Schema.Number
}) {}

const PrincipalJson = Schema.parseJson(Principal)
const decodePrincipal = Schema.decodeUnknownOption(PrincipalJson)
const encodePrincipal = Schema.encodeSync(PrincipalJson)

export class InvalidPrincipal extends Schema.TaggedError<InvalidPrincipal>()("InvalidPrincipal", {
  reason: Schema.Literal("malformed", "unknown_key", "bad_signature", "expired")
}) {}

const keyIdOf = (publicKey: KeyObject): string =>
  createHash("sha256").update(publicKey.export({ type: "spki", format: "der" })).digest("base64url").slice(0, 16)

/** Verified tokens kept per process; past this, expired ones are dropped (or all, if none has). */
const VERIFIED_CACHE_SIZE = 10_000

/** Verifies principal tokens locally with identity's public keys. */
export class PrincipalVerifier extends Context.Tag("@scion/kit/PrincipalVerifier")<
  PrincipalVerifier,
  { readonly verify: (token: string) => Effect.Effect<Principal, InvalidPrincipal> }
>() {
  static fromPublicKeys(keys: ReadonlyArray<{ readonly keyId: string; readonly publicKeyDer: Buffer }>) {
    const byId = new Map(keys.map((k) => [k.keyId, createPublicKey({ key: k.publicKeyDer, format: "der", type: "spki" })]))
    // A caller sends the same token on every call for minutes (a worker's service principal, the
    // gateway's cached answer), so each token's signature is checked once and its principal kept
    // until it expires: an Ed25519 verify and a schema decode per RPC are a measurable share of it.
    const verified = new Map<string, Principal>()
    const remember = (token: string, principal: Principal) => {
      if (verified.size >= VERIFIED_CACHE_SIZE) {
        const now = Date.now()
        for (const [t, p] of verified) if (p.exp * 1000 < now) verified.delete(t)
        if (verified.size >= VERIFIED_CACHE_SIZE) verified.clear()
      }
      verified.set(token, principal)
    }
    return PrincipalVerifier.of({
      verify: (token) => {
        // A token seen before answers without a generator: this runs on every RPC a unit serves.
        const known = verified.get(token)
        if (known !== undefined) {
          if (known.exp * 1000 >= Date.now()) return Effect.succeed(known)
          verified.delete(token)
          return Effect.fail(new InvalidPrincipal({ reason: "expired" }))
        }
        return Effect.gen(function* () {
          const [version, keyId, payload, signature] = token.split(".")
          if (version !== "v1" || !keyId || !payload || !signature) return yield* new InvalidPrincipal({ reason: "malformed" })
          const key = byId.get(keyId)
          if (!key) return yield* new InvalidPrincipal({ reason: "unknown_key" })
          const ok = verify(null, Buffer.from(`${keyId}.${payload}`), key, Buffer.from(signature, "base64url"))
          if (!ok) return yield* new InvalidPrincipal({ reason: "bad_signature" })
          const principal = decodePrincipal(Buffer.from(payload, "base64url").toString("utf8"))
          if (Option.isNone(principal)) return yield* new InvalidPrincipal({ reason: "malformed" })
          if (principal.value.exp * 1000 < Date.now()) return yield* new InvalidPrincipal({ reason: "expired" })
          remember(token, principal.value)
          return principal.value
        })
      }
    })
  }
}

/** Signs principal tokens: identity only. */
export class PrincipalSigner extends Context.Tag("@scion/kit/PrincipalSigner")<
  PrincipalSigner,
  {
    readonly keyId: string
    readonly publicKeyDer: Buffer
    readonly sign: (principal: Principal) => string
  }
>() {
  static fromPrivateKey(privateKey: KeyObject) {
    const publicKey = createPublicKey(privateKey)
    const keyId = keyIdOf(publicKey)
    return PrincipalSigner.of({
      keyId,
      publicKeyDer: publicKey.export({ type: "spki", format: "der" }),
      sign: (principal) => {
        const payload = Buffer.from(encodePrincipal(principal)).toString("base64url")
        const signature = sign(null, Buffer.from(`${keyId}.${payload}`), privateKey).toString("base64url")
        return `v1.${keyId}.${payload}.${signature}`
      }
    })
  }

  /**
   * IDENTITY_SIGNING_KEY: an Ed25519 PKCS8 PEM. Without it (embedded mode, tests) an ephemeral key
   * is generated, which is fine while the signer and every verifier share one process.
   */
  static readonly layerConfig = Layer.effect(
    PrincipalSigner,
    Effect.gen(function* () {
      const pem = yield* Config.option(Config.redacted("IDENTITY_SIGNING_KEY"))
      const privateKey = Option.match(pem, {
        onNone: () => generateKeyPairSync("ed25519").privateKey,
        onSome: (value) => createPrivateKey(Redacted.value(value))
      })
      return PrincipalSigner.fromPrivateKey(privateKey)
    }).pipe(Effect.orDie)
  )
}

/** Who a request came from: its verified principal and the token it carried; none without one. */
export type CallerInfo = Option.Option<{ readonly principal: Principal; readonly token: string }>

/**
 * The caller of the request a fiber serves, set on the request's own fiber by the server bridge
 * (`effectService`); none outside a request. A fiber-local rather than a service in the fiber's
 * context: providing a service copies the whole context (two dozen services in identity) for
 * every request.
 */
export const CurrentCaller: FiberRef.FiberRef<CallerInfo> = FiberRef.unsafeMake<CallerInfo>(Option.none())

/** The verified principal of the request being served, if it carried one. */
export const Caller: Effect.Effect<CallerInfo> = FiberRef.get(CurrentCaller)

/**
 * The principal token sent on outgoing calls. The server bridge sets it from the incoming request,
 * so a unit calling another unit acts for its own caller without threading the token by hand.
 */
export const OutgoingPrincipal: FiberRef.FiberRef<Option.Option<string>> = FiberRef.unsafeMake(Option.none<string>())

export const withPrincipalToken = (token: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.locally(self, OutgoingPrincipal, Option.some(token))
