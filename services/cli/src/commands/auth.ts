import { Command, Options, Prompt } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { type ApiClient, makeApiClient, ScionApi } from "@scion/sdk"
import { Config, Console, Effect, Option, Redacted } from "effect"
import { CredentialStore } from "../credentials.js"
import { printResource } from "../output.js"
import { CliSession, common, requireToken, withSession } from "../session.js"

const email = Options.text("email").pipe(Options.optional, Options.withDescription("Your email (asked when left out)"))
const password = Options.redacted("password").pipe(
  Options.optional,
  Options.withDescription("Your password (default: SCION_PASSWORD; asked, hidden, when neither is set)")
)

const orAsk = (value: Option.Option<string>, message: string) => Option.match(value, { onSome: Effect.succeed, onNone: () => Prompt.text({ message }) })

const passwordOf = (value: Option.Option<Redacted.Redacted<string>>) =>
  Effect.gen(function* () {
    if (Option.isSome(value)) return Redacted.value(value.value)
    const fromEnv = yield* Config.option(Config.nonEmptyString("SCION_PASSWORD")).pipe(Effect.orDie)
    if (Option.isSome(fromEnv)) return fromEnv.value
    return Redacted.value(yield* Prompt.password({ message: "Password" }))
  })

/** Remembers a new session (and its default org) in the credentials file. */
const remember = (grant: { readonly session_token: string; readonly user: { readonly email: string } }, defaultOrg: Option.Option<string>) =>
  Effect.gen(function* () {
    const store = yield* CredentialStore
    const session = yield* CliSession
    const stored = yield* store.read
    const orgId = Option.getOrUndefined(Option.orElse(defaultOrg, () => (stored.email === grant.user.email ? Option.fromNullable(stored.org_id) : Option.none())))
    yield* store.write({ api_url: session.apiUrl, token: grant.session_token, email: grant.user.email, ...(orgId === undefined ? {} : { org_id: orgId }) })
    return orgId
  })

const signup = Command.make(
  "signup",
  { email, password, name: Options.text("name").pipe(Options.optional, Options.withDescription("Your full name")), ...common },
  ({ email, password, name, ...input }) =>
    Effect.gen(function* () {
      const api = yield* ScionApi
      const grant = yield* api.auth.signUp({
        payload: { email: yield* orAsk(email, "Email"), password: yield* passwordOf(password), full_name: yield* orAsk(name, "Full name") }
      })
      yield* remember(grant, Option.none())
      yield* Console.log(`Signed up and logged in as ${grant.user.email}. Next: scion orgs create <name>`)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Create an account and log in"))

const login = Command.make("login", { email, password, ...common }, ({ email, password, ...input }) =>
  Effect.gen(function* () {
    const api = yield* ScionApi
    const grant = yield* api.auth.logIn({ payload: { email: yield* orAsk(email, "Email"), password: yield* passwordOf(password) } })
    const orgs = yield* withToken(grant.session_token, (client) => client.session.myOrgs())
    const orgId = yield* remember(grant, Option.fromNullable(orgs.orgs[0]?.org_id))
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify({ user: grant.user, expires_at: grant.expires_at, org_id: orgId ?? null }, null, 2))
    yield* Console.log(`Logged in as ${grant.user.email}${orgId === undefined ? ". Next: scion orgs create <name>" : `; org ${orgId} (change with scion orgs use)`}`)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Log in with email and password; the session is kept in your config directory (mode 0600)"))

const logout = Command.make("logout", { ...common }, (input) =>
  Effect.gen(function* () {
    const store = yield* CredentialStore
    const stored = yield* store.read
    // The stored session ends server-side too; an already expired one is fine.
    if (stored.token !== undefined) yield* withToken(stored.token, (client) => client.auth.logOut()).pipe(Effect.ignore)
    const { token: _token, ...rest } = stored
    yield* store.write(rest)
    yield* Console.log("Logged out")
  }).pipe(withSession(input))
).pipe(Command.withDescription("End the stored session and forget it"))

const whoami = Command.make("whoami", { ...common }, (input) =>
  Effect.gen(function* () {
    yield* requireToken
    const api = yield* ScionApi
    const me = yield* api.session.me()
    const session = yield* CliSession
    yield* printResource(
      { email: me.user.email, full_name: me.user.full_name, user_id: me.user.user_id, org_id: Option.getOrNull(session.storedOrgId), api_url: session.apiUrl },
      undefined
    )
  }).pipe(withSession(input))
).pipe(Command.withDescription("Who the stored session is (dashboard sessions only)"))

export const authCommands = [signup, login, logout, whoami] as const

/** A call made with another token than the session's (the one just issued, or the one ending). */
const withToken = <A, E>(token: string, call: (client: ApiClient) => Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const session = yield* CliSession
    const client = yield* makeApiClient({ baseUrl: session.apiUrl, token }).pipe(Effect.provide(FetchHttpClient.layer))
    return yield* call(client)
  })
