import { Context, Effect, Layer, Ref } from "effect"
import { IdentityConfig } from "./config.js"

export interface MailMessage {
  readonly to: string
  readonly subject: string
  readonly text: string
  /** The values in `text` that grant something (invite and verification tokens): never logged by default. */
  readonly secrets: ReadonlyArray<string>
}

/** The text with its secrets withheld, for a log line. */
export const withheld = (message: MailMessage) =>
  message.secrets.reduce((text, secret) => (secret === "" ? text : text.replaceAll(secret, "[withheld: MAIL_ADAPTER=log_with_tokens shows it]")), message.text)

/** The mail port. Sending never fails the caller: an adapter reports its own delivery problems. */
export class Mailer extends Context.Tag("@scion/identity/Mailer")<Mailer, { readonly send: (message: MailMessage) => Effect.Effect<void> }>() {
  /**
   * Writes each message to the log at info, its tokens withheld: whoever reads the logs must not be
   * able to verify an address or accept an invite with them.
   */
  static readonly log: Layer.Layer<Mailer> = Layer.succeed(Mailer, {
    send: (message) => Effect.logInfo("mail sent").pipe(Effect.annotateLogs({ mail_to: message.to, mail_subject: message.subject, mail_text: withheld(message) }))
  })

  /** The same with the tokens in the log: a local machine's stand-in for a mailbox, never a shared deployment's. */
  static readonly logWithTokens: Layer.Layer<Mailer> = Layer.succeed(Mailer, {
    send: (message) => Effect.logInfo("mail sent").pipe(Effect.annotateLogs({ mail_to: message.to, mail_subject: message.subject, mail_text: message.text }))
  })

  /** MAIL_ADAPTER: `log` (the default) or `log_with_tokens`. An SMTP adapter is configuration away. */
  static readonly layerConfig: Layer.Layer<Mailer, never, IdentityConfig> = Layer.unwrapEffect(
    Effect.map(IdentityConfig, (config) => {
      switch (config.mailAdapter) {
        case "log":
          return Mailer.log
        case "log_with_tokens":
          return Mailer.logWithTokens
      }
    })
  )
}

/** What a recording mailer has sent, for tests. */
export class MailRecorder extends Context.Tag("@scion/identity/MailRecorder")<
  MailRecorder,
  { readonly sent: Effect.Effect<ReadonlyArray<MailMessage>> }
>() {}

/** A mailer that keeps every message in memory, readable through `MailRecorder`. */
export const RecordingMailer: Layer.Layer<Mailer | MailRecorder> = Layer.effectContext(
  Effect.map(Ref.make<ReadonlyArray<MailMessage>>([]), (ref) =>
    Context.make(Mailer, { send: (message) => Ref.update(ref, (sent) => [...sent, message]) }).pipe(
      Context.add(MailRecorder, { sent: Ref.get(ref) })
    )
  )
)
