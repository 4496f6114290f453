import { FetchHttpClient, type HttpApi, HttpApiClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Api } from "@scion/gateway/api"
import { Config, Context, Data, Duration, Effect, Layer, Option, Redacted, Schedule } from "effect"

/** Where the API is and who calls it. */
export interface ScionOptions {
  /** The gateway's base URL, without /v1 (default http://localhost:8080). */
  readonly baseUrl?: string
  /** A dashboard session token or an org API key (sk-scion_…); anonymous calls without one. */
  readonly token?: string | Redacted.Redacted<string> | undefined
  /** Attempts of a request answered 503 ("could not start, safe to retry"); default 4. */
  readonly retries?: number
  /** The first retry's delay, doubled each time (default 200 ms). */
  readonly retryDelay?: Duration.DurationInput
}

export const DEFAULT_BASE_URL = "http://localhost:8080"

/** A 503 held back for another attempt; the last one is answered as it came. */
class RetryableResponse extends Data.TaggedError("RetryableResponse")<{ readonly response: HttpClientResponse.HttpClientResponse }> {}

/**
 * The HTTP client every call goes through: the bearer token, and 503s retried with exponential
 * backoff (the interface promises they are safe to retry, creates included). Transport errors are
 * not retried: a create that reached the server may have started.
 */
const withScionTransport = (options: ScionOptions) => (client: HttpClient.HttpClient) => {
  const token = options.token === undefined ? undefined : Redacted.isRedacted(options.token) ? Redacted.value(options.token) : options.token
  const schedule = Schedule.exponential(options.retryDelay ?? Duration.millis(200)).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(Math.max(0, (options.retries ?? 4) - 1))))
  return client.pipe(
    HttpClient.mapRequest((request) => (token === undefined || token === "" ? request : HttpClientRequest.bearerToken(request, token))),
    HttpClient.transformResponse((response) =>
      response.pipe(
        Effect.flatMap((r) => (r.status === 503 ? Effect.fail(new RetryableResponse({ response: r })) : Effect.succeed(r))),
        Effect.retry({ schedule, while: (e) => e._tag === "RetryableResponse" }),
        Effect.catchIf(
          (e): e is RetryableResponse => e._tag === "RetryableResponse",
          (e) => Effect.succeed(e.response)
        )
      )
    )
  )
}

type ApiGroups = typeof Api extends HttpApi.HttpApi<infer _Id, infer Groups, infer _E, infer _R> ? Groups : never
type ApiErrors = typeof Api extends HttpApi.HttpApi<infer _Id, infer _Groups, infer E, infer _R> ? E : never

/** The typed client of every endpoint, grouped as the API is (orgs, connectors, branches, …). */
export type ApiClient = HttpApiClient.Client<ApiGroups, ApiErrors, never>

/** The typed client of every endpoint, grouped as the API is (orgs, connectors, branches, …). */
export const makeApiClient = (options: ScionOptions = {}): Effect.Effect<ApiClient, never, HttpClient.HttpClient> =>
  HttpApiClient.make(Api, {
    baseUrl: (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, ""),
    transformClient: withScionTransport(options)
  })

/** The API client as a service, for Effect programs. */
export class ScionApi extends Context.Tag("@scion/sdk/ScionApi")<ScionApi, ApiClient>() {
  /** A client for the given options over `fetch`. */
  static readonly layer = (options: ScionOptions = {}): Layer.Layer<ScionApi> =>
    Layer.effect(ScionApi, makeApiClient(options)).pipe(Layer.provide(FetchHttpClient.layer))

  /** A client configured by SCION_API_URL and SCION_TOKEN. */
  static readonly layerConfig: Layer.Layer<ScionApi, never> = Layer.unwrapEffect(
    Effect.gen(function* () {
      const baseUrl = yield* Config.string("SCION_API_URL").pipe(Config.withDefault(DEFAULT_BASE_URL))
      const token = yield* Config.option(Config.redacted("SCION_TOKEN"))
      return ScionApi.layer({ baseUrl, token: Option.getOrUndefined(token) })
    }).pipe(Effect.orDie)
  )
}
