import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// The code-host validators, served by the connector unit (CodeHostService). Shape errors are the
// interface's 422 here at the edge; what the code host answers is always a 200 result.
// ---------------------------------------------------------------------------------------------

const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

const OrgId = Schema.optional(
  Schema.NullOr(Id).annotations({ description: "The org to act in (connectors.create is needed there); an API key may leave it out (its own org) and may name only its own org" })
)

/** GitHub's rules: owner 1..39 letters, digits, hyphens (not first); name 1..100 letters, digits, ".", "_", "-" (not "." or ".."). */
const REPO = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}\/(?!\.\.?$)[A-Za-z0-9._-]{1,100}$/

const Token = (description: string) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1000)).annotations({ description })

export const ValidateRepoRequest = Schema.Struct({
  org_id: OrgId,
  repo: Schema.String.pipe(
    Schema.pattern(REPO, {
      message: () => "repo must be owner/name: the owner 1..39 letters, digits or hyphens (not first), the name 1..100 letters, digits, '.', '_' or '-'"
    })
  ).annotations({ description: "owner/name, e.g. octocat/hello-world", examples: ["octocat/hello-world"] }),
  code_host_token: Schema.optional(
    Schema.NullOr(Schema.String.pipe(Schema.maxLength(1000))).annotations({
      description: "A token that can read the repository (needed for private ones); empty or null counts as none. Never stored, logged or echoed."
    })
  )
}).annotations({ identifier: "ValidateCodeHostRepoRequest" })

export const RepoValidation = Schema.Struct({
  valid: Schema.Boolean.annotations({ description: "True for status valid and private" }),
  status: Schema.Literal("valid", "private", "invalid", "error").annotations({
    description:
      "valid: public and reachable. private: private and reachable with the token. invalid: not found (without a token GitHub answers the same for a private repository: the message says to provide a code_host_token), or the token was refused. error: GitHub could not be asked (unreachable, timed out, rate limited, 5xx); retry."
  }),
  message: Schema.String.annotations({ description: "For humans; never contains the token" })
}).annotations({ identifier: "CodeHostRepoValidation" })

const Numeric = (description: string) =>
  Schema.Union(
    Schema.Int.pipe(Schema.positive()),
    Schema.String.pipe(Schema.pattern(/^[1-9][0-9]{0,19}$/, { message: () => "Input should be a positive integer (a number or a string of digits)" }))
  ).annotations({ description })

export const PatAuthRequest = Schema.Struct({
  org_id: OrgId,
  auth_type: Schema.Literal("pat"),
  access_token: Token("A personal access token (classic or fine-grained). Never stored, logged or echoed.")
}).annotations({ identifier: "ValidateCodeHostPatRequest", description: "auth_type pat: access_token is required" })

export const OauthAuthRequest = Schema.Struct({
  org_id: OrgId,
  auth_type: Schema.Literal("oauth"),
  app_id: Schema.Union(
    Schema.Int.pipe(Schema.positive()),
    Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9.]{1,100}$/, { message: () => "Input should be the GitHub App's id (digits) or client id" }))
  ).annotations({ description: "The GitHub App's id (a number or a string of digits) or its client id" }),
  installation_id: Numeric("The app installation's id"),
  private_key: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(20_000)).annotations({
    description: "The app's PEM RSA private key (the .pem file GitHub generated). Used to sign a short-lived app JWT; never stored, logged or echoed."
  })
}).annotations({ identifier: "ValidateCodeHostOauthRequest", description: "auth_type oauth (a GitHub App): app_id, installation_id and private_key are required" })

export const ValidateAuthRequest = Schema.Union(PatAuthRequest, OauthAuthRequest).annotations({ identifier: "ValidateCodeHostAuthRequest" })

export const AuthValidation = Schema.Struct({
  valid: Schema.Boolean,
  status: Schema.Literal("valid", "invalid", "error").annotations({
    description: "valid: GitHub accepted the credentials. invalid: it refused them (bad or expired token, unusable private key, app_id and key not matching, unknown installation). error: GitHub could not be asked; retry."
  }),
  message: Schema.String.annotations({ description: "For humans; never contains a token or key" }),
  username: Schema.NullOr(Schema.String).annotations({ description: "pat: the token's login; oauth: the app's slug; null unless valid" })
}).annotations({ identifier: "CodeHostAuthValidation" })
