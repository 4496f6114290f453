import { Options } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { makeApiClient, ScionApi, DEFAULT_BASE_URL } from "@scion/sdk"
import { Config, Context, Effect, Layer, Option } from "effect"
import { CredentialStore } from "./credentials.js"
import { NotLoggedIn, UsageError } from "./errors.js"

/** Options every command takes, after its own arguments. */
export const common = {
  json: Options.boolean("json").pipe(Options.withDescription("Print the API's JSON (for machines) instead of tables")),
  token: Options.text("token").pipe(Options.optional, Options.withDescription("A session token or org API key (default: SCION_TOKEN, then `scion login`'s)")),
  apiUrl: Options.text("api-url").pipe(Options.optional, Options.withDescription(`The API (default: SCION_API_URL, then the login's, then ${DEFAULT_BASE_URL})`))
}

/** The --org option of commands that act in an org. */
export const orgOption = Options.text("org").pipe(Options.optional, Options.withDescription("The org to act in (default: `scion orgs use`'s, or the API key's own)"))

export interface CommonInput {
  readonly json: boolean
  readonly token: Option.Option<string>
  readonly apiUrl: Option.Option<string>
}

/** Who this run calls the API as, and where. */
export class CliSession extends Context.Tag("@scion/cli/CliSession")<
  CliSession,
  {
    readonly apiUrl: string
    readonly token: Option.Option<string>
    readonly json: boolean
    /** The remembered org (scion orgs use), if any. */
    readonly storedOrgId: Option.Option<string>
  }
>() {}

const firstSome = <A>(...options: ReadonlyArray<Option.Option<A>>): Option.Option<A> => options.find(Option.isSome) ?? Option.none()

/** The session from the options, the environment and the credentials file (in that order). */
export const sessionOf = (input: CommonInput) =>
  Effect.gen(function* () {
    const stored = yield* (yield* CredentialStore).read
    const envUrl = yield* Config.option(Config.nonEmptyString("SCION_API_URL"))
    const envToken = yield* Config.option(Config.nonEmptyString("SCION_TOKEN"))
    return {
      apiUrl: Option.getOrElse(firstSome(input.apiUrl, envUrl, Option.fromNullable(stored.api_url)), () => DEFAULT_BASE_URL),
      token: firstSome(input.token, envToken, Option.fromNullable(stored.token)),
      json: input.json,
      storedOrgId: Option.fromNullable(stored.org_id)
    }
  }).pipe(Effect.orDie)

/** The API client for this session; without a token, anonymous endpoints only. */
export const apiLayer = Layer.effect(
  ScionApi,
  Effect.gen(function* () {
    const session = yield* CliSession
    return yield* makeApiClient({ baseUrl: session.apiUrl, token: Option.getOrUndefined(session.token) })
  })
).pipe(Layer.provide(FetchHttpClient.layer))

/** Runs a command's program with its session and API client. */
export const withSession =
  (input: CommonInput) =>
  <A, E, R>(program: Effect.Effect<A, E, R>) =>
    Effect.gen(function* () {
      const session = yield* sessionOf(input)
      return yield* program.pipe(Effect.provide(apiLayer), Effect.provideService(CliSession, session))
    })

/** Fails NotLoggedIn when no token is known (before any request is made). */
export const requireToken = Effect.gen(function* () {
  const session = yield* CliSession
  if (Option.isNone(session.token)) return yield* new NotLoggedIn()
  return session.token.value
})

/**
 * The org to act in: --org, else the remembered one. An API key may leave it out (its own org):
 * then None, and the endpoints that need it answer for themselves.
 */
export const orgOf = (org: Option.Option<string>) =>
  Effect.gen(function* () {
    const session = yield* CliSession
    return firstSome(org, session.storedOrgId)
  })

/** The org to act in, required: --org or `scion orgs use`. */
export const requireOrg = (org: Option.Option<string>) =>
  Effect.flatMap(orgOf(org), (orgId) =>
    Option.match(orgId, {
      onNone: () => Effect.fail(new UsageError({ message: "no org: pass --org <org_id> or run `scion orgs use <org_id>` (scion orgs list shows yours)" })),
      onSome: Effect.succeed
    })
  )
