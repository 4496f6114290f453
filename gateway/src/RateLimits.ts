import { Clock, Config, Context, Effect, FiberRef, Layer, Option } from "effect"
import { TooManyRequests } from "./errors.js"
import { EdgeRequest, headerOf } from "./serve/EdgeRequest.js"

/**
 * Request rate limits, per gateway process (replicas each hold their own buckets: the limit a
 * client meets is per replica, which the README says). Token buckets refilled continuously:
 * - `authenticated`: per API key or session (RATE_LIMIT_PER_MINUTE, default 1200);
 * - `anonymous`: per client address for sign-up, login and email verification
 *   (RATE_LIMIT_ANONYMOUS_PER_MINUTE, default 60);
 * - `code_host`: per caller for the validation helpers that call out to GitHub
 *   (RATE_LIMIT_CODE_HOST_PER_MINUTE, default 60).
 * Failed logins slow down per account and per address: after LOGIN_FAILURES_BEFORE_DELAY (5)
 * failures within 15 minutes, each further attempt waits 2^(failures − limit) seconds (at most 15
 * minutes) from the last failure. 0 turns a limit off.
 */
export type Bucket = "authenticated" | "anonymous" | "code_host"

/** The quota a response reports (RateLimit-Limit, -Remaining, -Reset), and Retry-After when refused. */
export interface Quota {
  readonly limit: number
  readonly remaining: number
  readonly resetSeconds: number
  readonly retryAfterSeconds?: number
}

/** The quota of the request being served, written into its response's headers by the edge. */
export const CurrentQuota: FiberRef.FiberRef<Option.Option<Quota>> = FiberRef.unsafeMake(Option.none<Quota>())

export const quotaHeaders = (quota: Quota): Record<string, string> => ({
  "ratelimit-limit": String(quota.limit),
  "ratelimit-remaining": String(quota.remaining),
  "ratelimit-reset": String(quota.resetSeconds),
  ...(quota.retryAfterSeconds !== undefined ? { "retry-after": String(quota.retryAfterSeconds) } : {})
})

export interface RateLimitOptions {
  readonly perMinute: Readonly<Record<Bucket, number>>
  readonly loginFailuresBeforeDelay: number
  readonly trustForwardedFor: boolean
}

const RateLimitConfig: Config.Config<RateLimitOptions> = Config.all({
  perMinute: Config.all({
    authenticated: Config.integer("RATE_LIMIT_PER_MINUTE").pipe(Config.withDefault(1200)),
    anonymous: Config.integer("RATE_LIMIT_ANONYMOUS_PER_MINUTE").pipe(Config.withDefault(60)),
    code_host: Config.integer("RATE_LIMIT_CODE_HOST_PER_MINUTE").pipe(Config.withDefault(60))
  }),
  loginFailuresBeforeDelay: Config.integer("LOGIN_FAILURES_BEFORE_DELAY").pipe(Config.withDefault(5)),
  trustForwardedFor: Config.boolean("RATE_LIMIT_TRUST_FORWARDED_FOR").pipe(Config.withDefault(false))
})

const LOGIN_WINDOW_MILLIS = 15 * 60_000
const MAX_LOGIN_DELAY_SECONDS = 15 * 60
/** Buckets and failure records kept at most; past this the idle ones go. */
const CAPACITY = 100_000

export class RateLimits extends Context.Tag("@scion/gateway/RateLimits")<
  RateLimits,
  {
    /** Takes one request from the key's bucket; TooManyRequests (with Retry-After) when it is empty. */
    readonly take: (bucket: Bucket, key: string) => Effect.Effect<void, TooManyRequests>
    /** Refuses a login for an account or address that failed too often lately. */
    readonly loginAllowed: (email: string, address: string) => Effect.Effect<void, TooManyRequests>
    readonly loginFailed: (email: string, address: string) => Effect.Effect<void>
    readonly loginSucceeded: (email: string) => Effect.Effect<void>
    /** The client's address: the socket's, or the first X-Forwarded-For hop behind a trusted proxy. */
    readonly clientAddress: Effect.Effect<string, never, EdgeRequest>
  }
>() {
  static make(options: RateLimitOptions) {
    const buckets = new Map<string, { tokens: number; at: number }>()
    const failures = new Map<string, { count: number; at: number }>()

    const prune = <V extends { at: number }>(map: Map<string, V>, now: number, idleMillis: number) => {
      if (map.size < CAPACITY) return
      for (const [key, value] of map) if (now - value.at > idleMillis) map.delete(key)
      if (map.size >= CAPACITY) map.clear()
    }

    const refuse = (detail: string, quota: Quota) =>
      Effect.zipRight(FiberRef.set(CurrentQuota, Option.some(quota)), Effect.fail(new TooManyRequests({ detail })))

    const take = (bucket: Bucket, key: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const limit = options.perMinute[bucket]
        if (limit <= 0) return Effect.void
        const perMilli = limit / 60_000
        const id = `${bucket}:${key}`
        const state = buckets.get(id) ?? (prune(buckets, now, 60_000), { tokens: limit, at: now })
        const tokens = Math.min(limit, state.tokens + (now - state.at) * perMilli)
        const resetSeconds = (left: number) => Math.ceil((limit - left) / perMilli / 1000)
        if (tokens < 1) {
          buckets.set(id, { tokens, at: now })
          const retryAfterSeconds = Math.max(1, Math.ceil((1 - tokens) / perMilli / 1000))
          return refuse(`Too many requests: at most ${limit} a minute; retry in ${retryAfterSeconds} s`, { limit, remaining: 0, resetSeconds: resetSeconds(tokens), retryAfterSeconds })
        }
        buckets.set(id, { tokens: tokens - 1, at: now })
        return FiberRef.set(CurrentQuota, Option.some({ limit, remaining: Math.floor(tokens - 1), resetSeconds: resetSeconds(tokens - 1) }))
      })

    const waitOf = (key: string, now: number): number => {
      const record = failures.get(key)
      if (record === undefined || now - record.at > LOGIN_WINDOW_MILLIS) return 0
      const over = record.count - options.loginFailuresBeforeDelay
      if (over < 0) return 0
      const delay = Math.min(MAX_LOGIN_DELAY_SECONDS, 2 ** over) * 1000
      return Math.max(0, record.at + delay - now)
    }

    const loginAllowed = (email: string, address: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (options.loginFailuresBeforeDelay <= 0) return Effect.void
        const wait = Math.max(waitOf(`account:${email.toLowerCase()}`, now), waitOf(`address:${address}`, now))
        if (wait <= 0) return Effect.void
        const retryAfterSeconds = Math.ceil(wait / 1000)
        return refuse(`Too many failed logins: retry in ${retryAfterSeconds} s`, { limit: options.loginFailuresBeforeDelay, remaining: 0, resetSeconds: retryAfterSeconds, retryAfterSeconds })
      })

    const loginFailed = (email: string, address: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          prune(failures, now, LOGIN_WINDOW_MILLIS)
          for (const key of [`account:${email.toLowerCase()}`, `address:${address}`]) {
            const record = failures.get(key)
            failures.set(key, { count: record === undefined || now - record.at > LOGIN_WINDOW_MILLIS ? 1 : record.count + 1, at: now })
          }
        })
      )

    const loginSucceeded = (email: string) => Effect.sync(() => void failures.delete(`account:${email.toLowerCase()}`))

    const clientAddress = Effect.map(EdgeRequest, (request) => {
      if (options.trustForwardedFor) {
        const forwarded = headerOf(request, "x-forwarded-for")?.split(",")[0]?.trim()
        if (forwarded !== undefined && forwarded !== "") return forwarded
      }
      return request.remoteAddress ?? "unknown"
    })

    return RateLimits.of({ take, loginAllowed, loginFailed, loginSucceeded, clientAddress })
  }

  static readonly layer: Layer.Layer<RateLimits> = Layer.effect(RateLimits, Effect.map(Effect.orDie(RateLimitConfig), RateLimits.make))
}
