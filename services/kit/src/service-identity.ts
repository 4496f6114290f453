import type { Transport } from "@connectrpc/connect"
import { timestampDate } from "@bufbuild/protobuf/wkt"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { Clock, Config, Context, Duration, Effect, Layer, Option, Redacted, Schedule, SynchronizedRef } from "effect"
import { makeEffectClient } from "./connect-client.js"
import { Code, type RpcError } from "./errors.js"
import { withPrincipalToken } from "./principal.js"

/** Failures worth another attempt: the peer is restarting or slow, not refusing. */
export const isTransient = (error: RpcError): boolean =>
  error.code === Code.Unavailable || error.code === Code.DeadlineExceeded || error.code === Code.ResourceExhausted

/**
 * This unit's own principal (kind "service"), for work that outlives the request that started it:
 * a worker reporting on an operation minutes later cannot use the user's 5-minute token. Identity
 * signs it in exchange for the deployment's SERVICE_CREDENTIAL; it is cached and renewed before it
 * expires, so a long job never sees an expired token.
 */
export class ServiceIdentity extends Context.Tag("@scion/kit/ServiceIdentity")<
  ServiceIdentity,
  {
    readonly serviceName: string
    /** A signed principal token valid for at least another minute (or a third of its life). */
    readonly token: Effect.Effect<string, RpcError>
  }
>() {
  /**
   * Asks identity over `transport` for `serviceName`'s principal, presenting SERVICE_CREDENTIAL.
   * Transient failures are retried briefly; the caller sees the last RpcError after that.
   */
  static make(serviceName: string, identity: Transport, credential: Redacted.Redacted<string>) {
    return Effect.map(renewingServiceIdentity(serviceName, identity, credential), ({ service }) => service)
  }

  /**
   * SERVICE_CREDENTIAL from config (required: a unit that runs workers cannot work without it).
   * The token is asked for as the unit starts and renewed before it is due, in the background:
   * no request waits for identity to sign one (traced: ~11 ms on a unit's first branch create).
   * A renewal that fails is tried again every few seconds; callers still ask on their own path
   * when the token they need is not there.
   */
  static layer(serviceName: string, identity: Transport): Layer.Layer<ServiceIdentity> {
    return Layer.scoped(
      ServiceIdentity,
      Effect.gen(function* () {
        const credential = yield* Config.redacted("SERVICE_CREDENTIAL")
        const { service, untilRenewal } = yield* renewingServiceIdentity(serviceName, identity, credential)
        const renewAhead = Effect.exit(service.token).pipe(
          Effect.flatMap((issued) =>
            issued._tag === "Success"
              ? Effect.flatMap(untilRenewal, (millis) => Effect.sleep(Duration.millis(Math.max(1_000, millis))))
              : Effect.zipRight(Effect.logDebug("service token not renewed ahead; trying again", issued.cause), Effect.sleep("3 seconds"))
          )
        )
        yield* Effect.forkScoped(Effect.forever(renewAhead))
        return service
      })
    ).pipe(Layer.orDie)
  }
}

/** The service, and how long until its cached token is due for renewal (0 when there is none). */
const renewingServiceIdentity = (serviceName: string, identity: Transport, credential: Redacted.Redacted<string>) =>
  Effect.gen(function* () {
    const auth = makeEffectClient(AuthService, identity)
    const cached = yield* SynchronizedRef.make(Option.none<{ readonly token: string; readonly renewAt: number }>())
    const issue = auth.issueServiceToken({ serviceName, credential: Redacted.value(credential) }).pipe(
      Effect.retry({ times: 3, schedule: Schedule.exponential("100 millis"), while: isTransient }),
      Effect.withSpan("ServiceIdentity.issue", { attributes: { serviceName } })
    )
    const token = SynchronizedRef.modifyEffect(cached, (current) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (Option.isSome(current) && now < current.value.renewAt) return [current.value.token, current] as const
        const issued = yield* issue
        const expiresAt = issued.expiresAt ? timestampDate(issued.expiresAt).getTime() : now
        const lifetime = Math.max(0, expiresAt - now)
        const renewAt = now + Math.max(0, lifetime - Math.max(60_000, lifetime / 3))
        return [issued.principalToken, Option.some({ token: issued.principalToken, renewAt })] as const
      })
    )
    const untilRenewal = Effect.zipWith(SynchronizedRef.get(cached), Clock.currentTimeMillis, (current, now) =>
      Option.match(current, { onNone: () => 0, onSome: ({ renewAt }) => Math.max(0, renewAt - now) })
    )
    return { service: ServiceIdentity.of({ serviceName, token }), untilRenewal }
  })

/** Runs `self` with this unit's service principal on every outgoing call. */
export const asService = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | RpcError, R | ServiceIdentity> =>
  Effect.flatMap(ServiceIdentity, (service) => Effect.flatMap(service.token, (token) => withPrincipalToken(token)(self)))
