import { FileSystem, Path } from "@effect/platform"
import { Config, Context, Effect, Layer, Option, Schema } from "effect"
import { homedir } from "node:os"

/** What `scion login` and `scion orgs use` remember between runs. */
export const StoredCredentials = Schema.Struct({
  api_url: Schema.optional(Schema.String),
  token: Schema.optional(Schema.String),
  email: Schema.optional(Schema.String),
  org_id: Schema.optional(Schema.String)
})
export type StoredCredentials = typeof StoredCredentials.Type

const decode = Schema.decodeUnknownOption(Schema.parseJson(StoredCredentials))

/**
 * The credentials file: `$SCION_CONFIG_DIR/credentials.json`, by default in the user's config
 * directory (`$XDG_CONFIG_HOME/scion`, else `~/.config/scion`). It holds a session token, so the
 * directory is 0700 and the file 0600, set again on every write.
 */
export class CredentialStore extends Context.Tag("@scion/cli/CredentialStore")<
  CredentialStore,
  {
    readonly path: string
    readonly read: Effect.Effect<StoredCredentials>
    readonly write: (credentials: StoredCredentials) => Effect.Effect<void>
  }
>() {
  static readonly layer = Layer.effect(
    CredentialStore,
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const xdg = yield* Config.option(Config.nonEmptyString("XDG_CONFIG_HOME"))
      const dir = yield* Config.nonEmptyString("SCION_CONFIG_DIR").pipe(
        Config.withDefault(path.join(Option.getOrElse(xdg, () => path.join(homedir(), ".config")), "scion"))
      )
      const file = path.join(dir, "credentials.json")
      return {
        path: file,
        read: fs.readFileString(file).pipe(
          Effect.map((text) => Option.getOrElse(decode(text), (): StoredCredentials => ({}))),
          Effect.orElseSucceed((): StoredCredentials => ({}))
        ),
        write: (credentials: StoredCredentials) =>
          Effect.gen(function* () {
            yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
            yield* fs.writeFileString(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 })
            yield* fs.chmod(file, 0o600)
          }).pipe(Effect.orDie)
      }
    }).pipe(Effect.orDie)
  )
}
