import { type Principal, tracedFn } from "@scion/kit"
import { Effect, Option, Redacted, Schema } from "effect"
import { InvalidArgument } from "../domain/errors.js"
import { OrgAccess } from "../Identity.js"
import { signAppJwt } from "./AppJwt.js"
import { CodeHost, type CodeHostUnavailable, type CredentialsRefused, repoPath, type RepoRef } from "./CodeHost.js"

export type RepoStatus = "valid" | "private" | "invalid" | "error"
export type AuthStatus = "valid" | "invalid" | "error"
export type AuthType = "pat" | "oauth"

export interface RepoValidation {
  readonly valid: boolean
  readonly status: RepoStatus
  readonly message: string
}

export interface AuthValidation {
  readonly valid: boolean
  readonly status: AuthStatus
  readonly message: string
  readonly username: string | null
}

export interface ValidateRepoInput {
  readonly orgId: string
  readonly repo: string
  /** Redacted from the moment the request arrives; empty counts as absent. */
  readonly codeHostToken: Option.Option<Redacted.Redacted<string>>
}

export interface ValidateAuthInput {
  readonly orgId: string
  /** Undefined when the request named none (or an unknown one). */
  readonly authType: AuthType | undefined
  readonly accessToken: Option.Option<Redacted.Redacted<string>>
  readonly appId: Option.Option<string>
  readonly installationId: Option.Option<string>
  readonly privateKey: Option.Option<Redacted.Redacted<string>>
}

/** GitHub's rules: owner 1..39 letters, digits and hyphens (not first); name 1..100 of letters, digits, ".", "_", "-". */
const OWNER = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}$/
const NAME = /^[A-Za-z0-9._-]{1,100}$/
/** What goes into an Authorization header: visible ASCII, no spaces. */
const TOKEN = /^[\x21-\x7e]{1,1000}$/
const DIGITS = /^[1-9][0-9]{0,19}$/
/** An app id (digits) or a client id (Iv1.…, Iv23…). */
const APP_ID = /^[A-Za-z0-9.]{1,100}$/

const invalid = (field: string, message: string) => new InvalidArgument({ field, message })

export const parseRepo = (raw: string): Effect.Effect<RepoRef, InvalidArgument> => {
  const [owner, name, ...rest] = raw.trim().split("/")
  if (owner === undefined || name === undefined || rest.length > 0 || !OWNER.test(owner) || !NAME.test(name) || name === "." || name === "..") {
    return Effect.fail(
      invalid(
        "repo",
        "repo must be owner/name: the owner 1..39 letters, digits or hyphens (not first), the name 1..100 letters, digits, '.', '_' or '-'"
      )
    )
  }
  return Effect.succeed({ owner, name })
}

/** A present credential must fit in a header; an empty one is absent. */
const credential = (field: string, value: Option.Option<Redacted.Redacted<string>>) =>
  Option.match(Option.filter(value, (v) => Redacted.value(v) !== ""), {
    onNone: () => Effect.succeed(Option.none<Redacted.Redacted<string>>()),
    onSome: (v) => (TOKEN.test(Redacted.value(v)) ? Effect.succeed(Option.some(v)) : Effect.fail(invalid(field, `${field} must be a token without spaces or control characters`)))
  })

const required = <A>(field: string, authType: AuthType, value: Option.Option<A>) =>
  Option.match(value, { onNone: () => Effect.fail(invalid(field, `${field} is required when auth_type is ${authType}`)), onSome: Effect.succeed })

/** The code host's refusal, worded for the caller (an answer, not an error of the request). */
class Refused extends Schema.TaggedError<Refused>()("Refused", { verdict: Schema.String }) {}

const refusal = (e: CredentialsRefused) => `(${e.status}: ${e.detail})`
const unavailable = (e: CodeHostUnavailable) => ({ valid: false, status: "error" as const, message: e.detail })

/**
 * The code-host validators: whether a repository is reachable and whether credentials work,
 * asked of the code host for real (the CodeHost port). What the code host answers is a result,
 * never an error; errors are the request's own (access, malformed input). Nothing is stored and
 * no token or key reaches a log line or a message.
 */
export class CodeHostValidation extends Effect.Service<CodeHostValidation>()("@scion/connector/CodeHostValidation", {
  effect: Effect.gen(function* () {
    const access = yield* OrgAccess
    const codeHost = yield* CodeHost

    /**
     * Who may ask. The interface's body has no org: an API key acts in its own org and needs
     * connectors.create there; a dashboard session may ask with the body as the interface gives it
     * (nothing of an org is read or stored, only the code host is asked). An org_id, when sent,
     * is checked like everywhere else (connectors.create in it).
     */
    const authorize = (principal: Principal, orgId: string) => {
      const named = orgId.trim()
      if (named !== "") return Effect.as(access.require(principal, named, "connectors.create"), named)
      if (principal.kind === "api_key" && principal.orgId !== undefined && principal.orgId !== null) {
        return Effect.as(access.require(principal, principal.orgId, "connectors.create"), principal.orgId)
      }
      if (principal.kind === "user_session") return Effect.succeed("")
      return Effect.fail(invalid("org_id", "org_id is required"))
    }

    const validateRepo = tracedFn("CodeHostValidation.validateRepo")(function* (principal: Principal, input: ValidateRepoInput) {
      const orgId = yield* authorize(principal, input.orgId)
      const repo = yield* parseRepo(input.repo)
      const token = yield* credential("code_host_token", input.codeHostToken)
      const path = repoPath(repo)
      const result: RepoValidation = yield* codeHost.repository(repo, token).pipe(
        Effect.map((found): RepoValidation =>
          found.private
            ? {
                valid: true,
                status: "private",
                message: `Repository ${found.fullName} is private and reachable${Option.isSome(token) ? " with the code_host_token" : ""}`
              }
            : { valid: true, status: "valid", message: `Repository ${found.fullName} is public and reachable` }
        ),
        Effect.catchTags({
          RepoNotFound: () =>
            Effect.succeed<RepoValidation>({
              valid: false,
              status: "invalid",
              message: Option.isSome(token)
                ? `Repository ${path} was not found, or the code_host_token cannot read it`
                : `Repository ${path} was not found or is private; provide a code_host_token that can read it`
            }),
          CredentialsRefused: (e) =>
            Effect.succeed<RepoValidation>({
              valid: false,
              status: "invalid",
              message:
                e.status === 401
                  ? `GitHub refused the code_host_token ${refusal(e)}: check that it is correct and not expired or revoked`
                  : `The code_host_token is not allowed to read ${path} ${refusal(e)}`
            }),
          CodeHostUnavailable: (e) => Effect.succeed<RepoValidation>(unavailable(e))
        })
      )
      yield* Effect.logInfo("code host repository validated").pipe(
        Effect.annotateLogs({ org_id: orgId, repo: path, with_token: Option.isSome(token), status: result.status })
      )
      return result
    })

    const validatePat = (token: Redacted.Redacted<string>) =>
      codeHost.authenticatedUser(token).pipe(
        Effect.map((user): AuthValidation => ({ valid: true, status: "valid", message: `The access_token authenticates as ${user.login}`, username: user.login })),
        Effect.catchTags({
          CredentialsRefused: (e) =>
            Effect.succeed<AuthValidation>({
              valid: false,
              status: "invalid",
              message:
                e.status === 401
                  ? `GitHub refused the access_token ${refusal(e)}: check that it is correct and not expired or revoked`
                  : `GitHub refused the access_token ${refusal(e)}`,
              username: null
            }),
          CodeHostUnavailable: (e) => Effect.succeed<AuthValidation>({ ...unavailable(e), username: null })
        })
      )

    const validateApp = (appId: string, installationId: string, privateKey: Redacted.Redacted<string>) =>
      Effect.gen(function* () {
        const jwt = yield* signAppJwt(appId, privateKey)
        const app = yield* codeHost.app(jwt).pipe(
          Effect.mapError((e) =>
            e._tag === "CredentialsRefused"
              ? new Refused({ verdict: `GitHub refused the app JWT ${refusal(e)}: check that app_id and private_key belong to the same GitHub App` })
              : e
          )
        )
        const token = yield* codeHost.installationToken(jwt, installationId).pipe(
          Effect.mapError((e) =>
            e._tag === "InstallationNotFound"
              ? new Refused({ verdict: `Installation ${installationId} of GitHub App ${app.slug} was not found: check installation_id (the app must be installed on the account)` })
              : e._tag === "CredentialsRefused"
                ? new Refused({ verdict: `GitHub refused an access token for installation ${installationId} of GitHub App ${app.slug} ${refusal(e)}` })
                : e
          )
        )
        // Only the proof was needed: the fresh installation token is revoked at once (best effort).
        yield* codeHost.revokeInstallationToken(token.token).pipe(
          Effect.catchAll((e) => Effect.logDebug("installation token not revoked").pipe(Effect.annotateLogs({ cause: e._tag })))
        )
        const verdict: AuthValidation = { valid: true, status: "valid", message: `GitHub App ${app.slug} can act for installation ${installationId}`, username: app.slug }
        return verdict
      }).pipe(
        Effect.catchTags({
          InvalidPrivateKey: (e) => Effect.succeed<AuthValidation>({ valid: false, status: "invalid", message: e.message, username: null }),
          Refused: (e) => Effect.succeed<AuthValidation>({ valid: false, status: "invalid", message: e.verdict, username: null }),
          CodeHostUnavailable: (e) => Effect.succeed<AuthValidation>({ ...unavailable(e), username: null })
        })
      )

    const validateAuth = tracedFn("CodeHostValidation.validateAuth")(function* (principal: Principal, input: ValidateAuthInput) {
      const orgId = yield* authorize(principal, input.orgId)
      const authType = input.authType
      if (authType === undefined) return yield* invalid("auth_type", "auth_type must be pat or oauth")
      yield* Effect.annotateCurrentSpan("auth_type", authType)
      let result: AuthValidation
      if (authType === "pat") {
        const token = yield* required("access_token", authType, yield* credential("access_token", input.accessToken))
        result = yield* validatePat(token)
      } else {
        const appId = yield* required("app_id", authType, Option.filter(Option.map(input.appId, (s) => s.trim()), (s) => s !== ""))
        if (!APP_ID.test(appId)) return yield* invalid("app_id", "app_id must be the GitHub App's id (digits) or client id")
        const installationId = yield* required("installation_id", authType, Option.filter(Option.map(input.installationId, (s) => s.trim()), (s) => s !== ""))
        if (!DIGITS.test(installationId)) return yield* invalid("installation_id", "installation_id must be the installation's numeric id")
        const privateKey = yield* required("private_key", authType, Option.filter(input.privateKey, (k) => Redacted.value(k).trim() !== ""))
        result = yield* validateApp(appId, installationId, privateKey)
      }
      yield* Effect.logInfo("code host credentials validated").pipe(
        Effect.annotateLogs({ org_id: orgId, auth_type: authType, status: result.status, username: result.username ?? "" })
      )
      return result
    })

    return { validateRepo, validateAuth } as const
  })
}) {}
