import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { generateSecretKey } from "@scion/connector"
import { Config, Effect, Option } from "effect"

/**
 * The connector unit's master keys in the embedded mode. SECRET_KEYS from the environment wins;
 * otherwise a key generated on the first start is kept in SCION_DATA_DIR/secret-keys (mode 0600)
 * next to the data it protects, so secrets stay readable across restarts without configuration.
 */
export const embeddedSecretKeys = Effect.gen(function* () {
  const configured = yield* Config.option(Config.redacted("SECRET_KEYS"))
  if (Option.isSome(configured)) return Option.none<string>()
  const dataDir = resolve(yield* Config.string("SCION_DATA_DIR").pipe(Config.withDefault(".scion")))
  const file = join(dataDir, "secret-keys")
  return Option.some(
    yield* Effect.sync(() => {
      if (existsSync(file)) return readFileSync(file, "utf8").trim()
      mkdirSync(dataDir, { recursive: true })
      const keys = generateSecretKey("embedded1")
      writeFileSync(file, `${keys}\n`, { mode: 0o600 })
      return keys
    })
  )
}).pipe(Effect.orDie)
