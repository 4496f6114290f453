import { Context, type Effect, type Option, type Redacted, Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// The code-host port: what the validators ask a code host (GitHub's REST API shape). The adapter
// (GithubCodeHost.ts) speaks HTTP; CodeHostValidation.ts turns its answers and typed failures
// into the interface's {valid, status, message}. Tokens and keys only ever travel Redacted.
// ---------------------------------------------------------------------------------------------

/** owner/name, already checked against GitHub's allowed characters. */
export interface RepoRef {
  readonly owner: string
  readonly name: string
}

export const repoPath = (repo: RepoRef) => `${repo.owner}/${repo.name}`

export interface Repository {
  readonly fullName: string
  readonly private: boolean
}

export interface AuthenticatedUser {
  readonly login: string
}

export interface App {
  readonly slug: string
  readonly name: string
}

export interface InstallationToken {
  readonly token: Redacted.Redacted<string>
  readonly expiresAt: string
}

/** 404: the repository does not exist, or the caller may not see it (GitHub hides private ones). */
export class RepoNotFound extends Schema.TaggedError<RepoNotFound>()("RepoNotFound", { repo: Schema.String }) {
  override get message() {
    return `Repository ${this.repo} not found`
  }
}

/** 404 on an installation of the app. */
export class InstallationNotFound extends Schema.TaggedError<InstallationNotFound>()("InstallationNotFound", { installationId: Schema.String }) {
  override get message() {
    return `Installation ${this.installationId} not found`
  }
}

/**
 * The code host refused the credentials: 401 (bad or expired) or 403 (not allowed; not a rate
 * limit). `detail` is the code host's own message (GitHub's never repeats the credential).
 */
export class CredentialsRefused extends Schema.TaggedError<CredentialsRefused>()("CredentialsRefused", {
  status: Schema.Number,
  detail: Schema.String
}) {
  override get message() {
    return `The code host refused the credentials (HTTP ${this.status}): ${this.detail}`
  }
}

/**
 * The code host could not be asked: unreachable, timed out, rate limited, failing (5xx) or an
 * answer the adapter does not understand. Safe to retry.
 */
export class CodeHostUnavailable extends Schema.TaggedError<CodeHostUnavailable>()("CodeHostUnavailable", {
  reason: Schema.Literal("unreachable", "timeout", "rate_limited", "server_error", "unexpected_answer"),
  detail: Schema.String
}) {
  override get message() {
    return this.detail
  }
}

/** The GitHub App's private key is not a PEM RSA private key (the message never shows it). */
export class InvalidPrivateKey extends Schema.TaggedError<InvalidPrivateKey>()("InvalidPrivateKey", { problem: Schema.String }) {
  override get message() {
    return `private_key is not usable: ${this.problem}`
  }
}

export type CodeHostError = RepoNotFound | InstallationNotFound | CredentialsRefused | CodeHostUnavailable

/** A code host's REST API, as the validators need it. */
export class CodeHost extends Context.Tag("@scion/connector/CodeHost")<
  CodeHost,
  {
    /** The repository, anonymously or with a token. */
    readonly repository: (repo: RepoRef, token: Option.Option<Redacted.Redacted<string>>) => Effect.Effect<Repository, RepoNotFound | CredentialsRefused | CodeHostUnavailable>
    /** Who a personal access token belongs to. */
    readonly authenticatedUser: (token: Redacted.Redacted<string>) => Effect.Effect<AuthenticatedUser, CredentialsRefused | CodeHostUnavailable>
    /** The app an app JWT was signed for. */
    readonly app: (jwt: Redacted.Redacted<string>) => Effect.Effect<App, CredentialsRefused | CodeHostUnavailable>
    /** A fresh installation access token for one installation of the app. */
    readonly installationToken: (
      jwt: Redacted.Redacted<string>,
      installationId: string
    ) => Effect.Effect<InstallationToken, InstallationNotFound | CredentialsRefused | CodeHostUnavailable>
    /** Revokes an installation access token (best effort by callers). */
    readonly revokeInstallationToken: (token: Redacted.Redacted<string>) => Effect.Effect<void, CredentialsRefused | CodeHostUnavailable>
  }
>() {}
