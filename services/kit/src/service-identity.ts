import type { Transport } from "@connectrpc/connect"
import { timestampDate } from "@bufbuild/protobuf/wkt"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { Clock, Config, Context, Effect, Layer, Option, Redacted, Schedule, SynchronizedRef } from "effect"
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
    return Effect.gen(function* () {
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
      return ServiceIdentity.of({ serviceName, token })
    })
  }

  /** SERVICE_CREDENTIAL from config (required: a unit that runs workers cannot work without it). */
  static layer(serviceName: string, identity: Transport): Layer.Layer<ServiceIdentity> {
    return Layer.effect(
      ServiceIdentity,
      Effect.flatMap(Config.redacted("SERVICE_CREDENTIAL"), (credential) => ServiceIdentity.make(serviceName, identity, credential))
    ).pipe(Layer.orDie)
  }
}

/** Runs `self` with this unit's service principal on every outgoing call. */
export const asService = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | RpcError, R | ServiceIdentity> =>
  Effect.flatMap(ServiceIdentity, (service) => Effect.flatMap(service.token, (token) => withPrincipalToken(token)(self)))
