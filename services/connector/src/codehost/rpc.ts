import { Caller, effectService } from "@scion/kit"
import { AuthValidationStatus, CodeHostAuthType, CodeHostService, RepoValidationStatus } from "@scion/proto/scion/connector/v1/code_host_pb"
import { Effect, Layer, Option, Redacted } from "effect"
import { type ConnectorError, toWireError, Unauthenticated } from "../domain/errors.js"
import { CodeHost } from "./CodeHost.js"
import { type AuthStatus, type AuthType, CodeHostValidation, type RepoStatus } from "./CodeHostValidation.js"
import { GithubCodeHostLive } from "./GithubCodeHost.js"

const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

const repoStatusToProto = {
  valid: RepoValidationStatus.VALID,
  private: RepoValidationStatus.PRIVATE,
  invalid: RepoValidationStatus.INVALID,
  error: RepoValidationStatus.ERROR
} as const satisfies Record<RepoStatus, RepoValidationStatus>

const authStatusToProto = {
  valid: AuthValidationStatus.VALID,
  invalid: AuthValidationStatus.INVALID,
  error: AuthValidationStatus.ERROR
} as const satisfies Record<AuthStatus, AuthValidationStatus>

const authTypeFromProto = {
  [CodeHostAuthType.UNSPECIFIED]: undefined,
  [CodeHostAuthType.PAT]: "pat",
  [CodeHostAuthType.OAUTH]: "oauth"
} as const satisfies Record<CodeHostAuthType, AuthType | undefined>

/** Secrets are wrapped in Redacted as they arrive: no log line can print them. */
const secret = (value: string | undefined) => Option.map(Option.fromNullable(value), (v) => Redacted.make(v))

/**
 * CodeHostService as Connect routes. The code host is the CodeHost in the context when there is
 * one (tests, other adapters), otherwise the GitHub adapter from CODE_HOST_API_URL and
 * CODE_HOST_TIMEOUT. Needs OrgAccess for the permission check.
 */
export const codeHostRoutes = Effect.gen(function* () {
  const provided = yield* Effect.serviceOption(CodeHost)
  const codeHost = Option.match(provided, { onNone: () => GithubCodeHostLive, onSome: (host) => Layer.succeed(CodeHost, host) })
  const validation = yield* Effect.provide(CodeHostValidation, CodeHostValidation.Default.pipe(Layer.provide(codeHost)))
  return yield* effectService<typeof CodeHostService, ConnectorError, never>(
    CodeHostService,
    {
      validateRepo: (req) =>
        Effect.gen(function* () {
          const result = yield* validation.validateRepo(yield* caller, { orgId: req.orgId, repo: req.repo, codeHostToken: secret(req.codeHostToken) })
          return { valid: result.valid, status: repoStatusToProto[result.status], message: result.message }
        }),
      validateAuth: (req) =>
        Effect.gen(function* () {
          const result = yield* validation.validateAuth(yield* caller, {
            orgId: req.orgId,
            authType: authTypeFromProto[req.authType] as AuthType | undefined,
            accessToken: secret(req.accessToken),
            appId: Option.fromNullable(req.appId),
            installationId: Option.fromNullable(req.installationId),
            privateKey: secret(req.privateKey)
          })
          return {
            valid: result.valid,
            status: authStatusToProto[result.status],
            message: result.message,
            ...(result.username !== null ? { username: result.username } : {})
          }
        })
    },
    toWireError
  )
})
