#!/usr/bin/env node
// Makes the installable `scion` package: the CLI bundled into one file (the SDK, the API
// definition and Effect inside, nothing to resolve from a registry) with a package.json of its
// own, packed by npm. Prints the tarball's path.
//
//   node services/cli/scripts/package.mjs [out-dir]      (after `npm run setup`)
//   npm install --global <the printed .tgz>              → scion on the PATH
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const cliDir = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const outDir = resolve(process.argv[2] ?? join(cliDir, "package"))
const manifest = JSON.parse(readFileSync(join(cliDir, "package.json"), "utf8"))

rmSync(outDir, { recursive: true, force: true })
mkdirSync(outDir, { recursive: true })
await build({
  entryPoints: [join(cliDir, "dist", "main.js")],
  outfile: join(outDir, "scion.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  legalComments: "none",
  logLevel: "warning",
  // Bundled CommonJS dependencies still call require for Node's own modules.
  banner: { js: "import { createRequire as __scionRequire } from 'node:module'; const require = __scionRequire(import.meta.url);" }
})
writeFileSync(
  join(outDir, "package.json"),
  `${JSON.stringify(
    {
      name: manifest.name,
      version: manifest.version,
      description: manifest.description,
      type: "module",
      bin: { scion: "./scion.mjs" },
      files: ["scion.mjs"],
      engines: { node: ">=20" }
    },
    null,
    2
  )}\n`
)
const tarball = execFileSync("npm", ["pack", "--silent", "--pack-destination", outDir], { cwd: outDir, encoding: "utf8" }).trim().split("\n").pop()
console.log(join(outDir, tarball))
