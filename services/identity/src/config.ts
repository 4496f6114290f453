import { Config, Effect } from "effect"

/** Every setting of the identity unit, read once. */
export const identityConfig = Config.all({
  sessionTtlDays: Config.integer("SESSION_TTL_DAYS").pipe(Config.withDefault(30)),
  inviteTtlDays: Config.integer("INVITE_TTL_DAYS").pipe(Config.withDefault(7)),
  emailVerificationTtlHours: Config.integer("EMAIL_VERIFICATION_TTL_HOURS").pipe(Config.withDefault(24)),
  /** Embedded mode default: new emails count as verified at sign-up. */
  autoVerifyEmail: Config.boolean("EMBEDDED_AUTO_VERIFY_EMAIL").pipe(Config.withDefault(true)),
  mailAdapter: Config.literal("log", "log_with_tokens")("MAIL_ADAPTER").pipe(Config.withDefault("log" as const)),
  /** Lifetime of a signed principal token. */
  principalTtlSeconds: Config.integer("PRINCIPAL_TTL_SECONDS").pipe(Config.withDefault(300)),
  /**
   * The deployment's shared secret that our own units present to get service principals
   * (IssueServiceToken). Unset disables service tokens.
   */
  serviceCredential: Config.option(Config.redacted("SERVICE_CREDENTIAL"))
})

export class IdentityConfig extends Effect.Service<IdentityConfig>()("@scion/identity/IdentityConfig", {
  effect: identityConfig
}) {}
