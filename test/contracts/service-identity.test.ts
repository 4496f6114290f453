/**
 * A unit's service principal (kit `ServiceIdentity.layer`, what its workers call other units with)
 * is asked for as the unit starts and renewed before it is due, off every caller's path: a
 * worker's first call does not wait for identity to sign one (traced: ~11 ms of a unit's first
 * branch create). Identity here is the real unit on a database of its own, served over HTTP/2 gRPC.
 */
import { describe, expect, it } from "@effect/vitest"
import { identityRoutes } from "@scion/identity"
import { grpcTransport, PrincipalVerifier, serveHttp2, ServiceIdentity } from "@scion/kit"
import { withConfig } from "@scion/kit/testing"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { IdentityUnit, SERVICE_CREDENTIAL } from "../support/units.js"

describe("a unit's service principal", () => {
  it.live(
    "is in hand from the unit's start: with identity gone afterwards, the first call still carries it",
    () =>
      Effect.gen(function* () {
        const identity = yield* Scope.make()
        const transport = yield* Effect.gen(function* () {
          const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* identityRoutes })
          return yield* grpcTransport(served.url)
        }).pipe(Scope.extend(identity))
        const unit = yield* Layer.build(ServiceIdentity.layer("copier", transport).pipe(Layer.provide(withConfig({ SERVICE_CREDENTIAL }))))
        // Nothing asks for the token while identity is up.
        yield* Effect.sleep("1 second")
        yield* Scope.close(identity, Exit.void)
        const token = yield* Context.get(unit, ServiceIdentity).token
        const principal = yield* (yield* PrincipalVerifier).verify(token)
        expect(principal).toMatchObject({ kind: "service", service: "copier" })
      }).pipe(Effect.provide(IdentityUnit), Effect.scoped),
    60_000
  )
})
