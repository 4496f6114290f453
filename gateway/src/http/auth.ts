import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { anonymously, asCaller } from "../Authentication.js"
import { Unauthorized } from "../errors.js"
import { RateLimits } from "../RateLimits.js"
import * as present from "./present.js"

/** Anonymous endpoints draw from the client address's bucket first. */
const perAddress = Effect.flatMap(RateLimits, (limits) => Effect.flatMap(limits.clientAddress, (address) => Effect.as(limits.take("anonymous", address), { limits, address })))

export const AuthLive = group(Api, "auth", (handlers) =>
  handlers
    .handle("signUp", ({ payload }) =>
      Effect.zipRight(
        perAddress,
        anonymously((u) => u.auth.signUp({ email: payload.email, password: payload.password, fullName: payload.full_name })).pipe(
          Effect.map((r) => present.sessionGrant(r.session))
        )
      )
    )
    .handle("logIn", ({ payload }) =>
      Effect.gen(function* () {
        const { limits, address } = yield* perAddress
        // Failed logins slow down per account and per address (guessing passwords gets slow).
        yield* limits.loginAllowed(payload.email, address)
        return yield* anonymously((u) => u.auth.logIn({ email: payload.email, password: payload.password })).pipe(
          Effect.tapError((e) => (e instanceof Unauthorized ? limits.loginFailed(payload.email, address) : Effect.void)),
          Effect.tap(() => limits.loginSucceeded(payload.email)),
          Effect.map((r) => present.sessionGrant(r.session))
        )
      })
    )
    .handle("logOut", () => asCaller((u) => u.auth.logOut({})).pipe(Effect.asVoid))
    .handle("verifyEmail", ({ payload }) =>
      Effect.zipRight(perAddress, anonymously((u) => u.auth.verifyEmail({ token: payload.token })).pipe(Effect.map((r) => present.user(r.user))))
    )
)
