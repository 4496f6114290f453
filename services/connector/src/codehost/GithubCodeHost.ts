import { tracedFn } from "@scion/kit"
import { Config, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import {
  CodeHost,
  CodeHostUnavailable,
  CredentialsRefused,
  InstallationNotFound,
  repoPath,
  RepoNotFound,
  type RepoRef
} from "./CodeHost.js"

// ---------------------------------------------------------------------------------------------
// The GitHub REST adapter of the CodeHost port (https://docs.github.com/rest): JSON bodies,
// API version 2022-11-28, bearer tokens. 401 and 403 are refusals of the credentials, except a
// 403/429 that is a rate limit (x-ratelimit-remaining: 0, or retry-after) which, like network
// failures, timeouts and 5xx, means the code host could not be asked.
// ---------------------------------------------------------------------------------------------

export interface GithubOptions {
  /** The API's base URL, e.g. https://api.github.com or https://ghe.example.com/api/v3. */
  readonly baseUrl: string
  /** Per request, connecting and reading the body included. */
  readonly timeout: Duration.DurationInput
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

const MAX_DETAIL = 200

/** GitHub's error message ({"message": "Bad credentials", …}), short. */
const detailOf = (body: unknown): string => {
  const message = typeof body === "object" && body !== null && "message" in body && typeof body.message === "string" ? body.message : ""
  return message.length > MAX_DETAIL ? `${message.slice(0, MAX_DETAIL)}…` : message
}

const parseJson = (text: string): unknown => {
  if (text.trim() === "") return null
  try {
    return JSON.parse(text) as unknown
  } catch {
    return null
  }
}

/**
 * Why fetch failed as a system error code (ECONNREFUSED, ENOTFOUND, UND_ERR_SOCKET, …). Never the
 * error's message: a rejected header's message would quote its value.
 */
const networkCause = (error: unknown): string => {
  const cause = error instanceof Error && error.cause !== undefined ? error.cause : error
  if (typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string") return cause.code
  return "network error"
}

const RepositoryBody = Schema.Struct({ full_name: Schema.String, private: Schema.Boolean })
const UserBody = Schema.Struct({ login: Schema.String })
const AppBody = Schema.Struct({ slug: Schema.String, name: Schema.String })
const TokenBody = Schema.Struct({ token: Schema.String, expires_at: Schema.String })

export const makeGithubCodeHost = (options: GithubOptions) => {
  const base = options.baseUrl.replace(/\/+$/, "")
  const host = (() => {
    try {
      return new URL(base).host
    } catch {
      return base
    }
  })()

  const call = (method: "GET" | "POST" | "DELETE", path: string, credential: Option.Option<Redacted.Redacted<string>>) =>
    Effect.tryPromise({
      try: async (signal): Promise<Answer> => {
        const response = await fetch(`${base}${path}`, {
          method,
          signal,
          headers: {
            accept: "application/vnd.github+json",
            "x-github-api-version": "2022-11-28",
            "user-agent": "scion-connector",
            ...Option.match(credential, { onNone: () => ({}), onSome: (token) => ({ authorization: `Bearer ${Redacted.value(token)}` }) })
          }
        })
        return { status: response.status, headers: response.headers, body: parseJson(await response.text()) }
      },
      catch: (error) => new CodeHostUnavailable({ reason: "unreachable", detail: `GitHub could not be reached at ${host} (${networkCause(error)}); retry shortly` })
    }).pipe(
      Effect.timeoutFail({
        duration: options.timeout,
        onTimeout: () => new CodeHostUnavailable({ reason: "timeout", detail: `GitHub at ${host} did not answer within ${Duration.format(options.timeout)}; retry shortly` })
      }),
      Effect.tap((answer) =>
        Effect.all([
          Effect.annotateCurrentSpan("http.status_code", answer.status),
          Effect.logDebug("code host answered").pipe(Effect.annotateLogs({ method, path, status: answer.status }))
        ])
      )
    )

  /** A rate limit, a 5xx or any other status than those the caller handles. */
  const unavailable = (answer: Answer): CodeHostUnavailable | undefined => {
    const limited =
      answer.status === 429 || (answer.status === 403 && (answer.headers.get("x-ratelimit-remaining") === "0" || answer.headers.get("retry-after") !== null))
    if (limited) {
      const reset = Number(answer.headers.get("x-ratelimit-reset"))
      const retryAfter = Number(answer.headers.get("retry-after"))
      const when = Number.isFinite(reset) && reset > 0
        ? ` (it resets at ${new Date(reset * 1000).toISOString()})`
        : Number.isFinite(retryAfter) && retryAfter > 0
          ? ` (retry in ${retryAfter} s)`
          : ""
      return new CodeHostUnavailable({ reason: "rate_limited", detail: `GitHub's API rate limit is exhausted${when}; retry later` })
    }
    if (answer.status >= 500) return new CodeHostUnavailable({ reason: "server_error", detail: `GitHub answered HTTP ${answer.status}; retry shortly` })
    return undefined
  }

  /** 401/403 as refused credentials; everything unhandled as unavailable. */
  const refusedOrUnavailable = (answer: Answer): CredentialsRefused | CodeHostUnavailable =>
    unavailable(answer) ??
    (answer.status === 401 || answer.status === 403
      ? new CredentialsRefused({ status: answer.status, detail: detailOf(answer.body) || (answer.status === 401 ? "Bad credentials" : "Forbidden") })
      : new CodeHostUnavailable({ reason: "unexpected_answer", detail: `GitHub answered HTTP ${answer.status} unexpectedly` }))

  const decode = <A, I>(schema: Schema.Schema<A, I>, answer: Answer) =>
    Schema.decodeUnknown(schema)(answer.body).pipe(
      Effect.mapError(() => new CodeHostUnavailable({ reason: "unexpected_answer", detail: `GitHub answered HTTP ${answer.status} with a body Scion does not understand` }))
    )

  const repository = tracedFn("GithubCodeHost.repository")(function* (repo: RepoRef, token: Option.Option<Redacted.Redacted<string>>) {
    yield* Effect.annotateCurrentSpan({ repo: repoPath(repo), authenticated: Option.isSome(token) })
    const answer = yield* call("GET", `/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.name)}`, token)
    if (answer.status === 200) {
      const body = yield* decode(RepositoryBody, answer)
      return { fullName: body.full_name, private: body.private }
    }
    if (answer.status === 404) return yield* new RepoNotFound({ repo: repoPath(repo) })
    return yield* refusedOrUnavailable(answer)
  })

  const authenticatedUser = tracedFn("GithubCodeHost.authenticatedUser")(function* (token: Redacted.Redacted<string>) {
    const answer = yield* call("GET", "/user", Option.some(token))
    if (answer.status === 200) return yield* decode(UserBody, answer)
    return yield* refusedOrUnavailable(answer)
  })

  const app = tracedFn("GithubCodeHost.app")(function* (jwt: Redacted.Redacted<string>) {
    const answer = yield* call("GET", "/app", Option.some(jwt))
    if (answer.status === 200) return yield* decode(AppBody, answer)
    return yield* refusedOrUnavailable(answer)
  })

  const installationToken = tracedFn("GithubCodeHost.installationToken")(function* (jwt: Redacted.Redacted<string>, installationId: string) {
    yield* Effect.annotateCurrentSpan({ installation_id: installationId })
    const answer = yield* call("POST", `/app/installations/${encodeURIComponent(installationId)}/access_tokens`, Option.some(jwt))
    if (answer.status === 201) {
      const body = yield* decode(TokenBody, answer)
      return { token: Redacted.make(body.token), expiresAt: body.expires_at }
    }
    if (answer.status === 404) return yield* new InstallationNotFound({ installationId })
    return yield* refusedOrUnavailable(answer)
  })

  const revokeInstallationToken = tracedFn("GithubCodeHost.revokeInstallationToken")(function* (token: Redacted.Redacted<string>) {
    const answer = yield* call("DELETE", "/installation/token", Option.some(token))
    if (answer.status === 204) return
    return yield* refusedOrUnavailable(answer)
  })

  return CodeHost.of({ repository, authenticatedUser, app, installationToken, revokeInstallationToken })
}

/** CODE_HOST_API_URL (default https://api.github.com) and CODE_HOST_TIMEOUT (default 10 seconds). */
export const githubConfig = Config.all({
  baseUrl: Config.string("CODE_HOST_API_URL").pipe(Config.withDefault("https://api.github.com")),
  timeout: Config.duration("CODE_HOST_TIMEOUT").pipe(Config.withDefault(Duration.seconds(10)))
})

/** The GitHub adapter from configuration; a bad setting stops the unit at start. */
export const GithubCodeHostLive: Layer.Layer<CodeHost> = Layer.effect(CodeHost, Effect.map(githubConfig, makeGithubCodeHost)).pipe(Layer.orDie)
