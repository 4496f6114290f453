import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { anonymously, asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const AuthLive = HttpApiBuilder.group(Api, "auth", (handlers) =>
  handlers
    .handle("signUp", ({ payload }) =>
      anonymously((u) => u.auth.signUp({ email: payload.email, password: payload.password, fullName: payload.full_name })).pipe(
        Effect.map((r) => present.sessionGrant(r.session))
      )
    )
    .handle("logIn", ({ payload }) =>
      anonymously((u) => u.auth.logIn({ email: payload.email, password: payload.password })).pipe(Effect.map((r) => present.sessionGrant(r.session)))
    )
    .handle("logOut", () => asCaller((u) => u.auth.logOut({})).pipe(Effect.asVoid))
    .handle("verifyEmail", ({ payload }) => anonymously((u) => u.auth.verifyEmail({ token: payload.token })).pipe(Effect.map((r) => present.user(r.user))))
)
