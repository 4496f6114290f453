#!/usr/bin/env node
// Makes a fresh checkout runnable with only Node and npm: installs pnpm (from the npm registry,
// since corepack's signature check fails here), the workspace's dependencies, generates the
// protobuf code and builds every package. Each step runs only when what it reads changed since it
// last ran, so `npm start` and `npm test` on a checkout that is already set up begin in a couple
// of seconds rather than ~30.
import { execFileSync, execSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const PNPM_VERSION = "10.34.9"

const run = (command, options = {}) => execSync(command, { cwd: root, stdio: "inherit", ...options })

const pnpmCommand = () => {
  try {
    const version = execFileSync("pnpm", ["--version"], { encoding: "utf8" }).trim()
    if (version.startsWith("10.")) return "pnpm"
  } catch {}
  return `npx --yes pnpm@${PNPM_VERSION}`
}

const mtime = (path) => (existsSync(path) ? statSync(path).mtimeMs : 0)

/** The workspace's package.json files: the root's and each package's (as pnpm-workspace.yaml lists them). */
const manifests = () => [
  ...["package.json", "proto/package.json", "gateway/package.json", "test/package.json", "test/worker/package.json"].map((path) => join(root, path)),
  ...readdirSync(join(root, "services")).map((name) => join(root, "services", name, "package.json"))
].filter(existsSync)

/**
 * pnpm keeps a copy of the lockfile it installed (node_modules/.pnpm/lock.yaml): when it equals
 * ours and no manifest changed after it, the install has nothing to do (pnpm itself takes ~10 s
 * here to find that out).
 */
const installed = () => {
  const copy = join(root, "node_modules/.pnpm/lock.yaml")
  if (!existsSync(copy)) return false
  if (!readFileSync(copy).equals(readFileSync(join(root, "pnpm-lock.yaml")))) return false
  const at = mtime(copy)
  return manifests().every((manifest) => mtime(manifest) <= at)
}

/** Files below `dir` whose names end with one of `suffixes`. */
const filesBelow = (dir, suffixes) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && suffixes.some((suffix) => entry.name.endsWith(suffix)))
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))

/** The generated protobuf code, stamped when buf wrote it: current while no .proto or buf setting is newer. */
const PROTO_STAMP = join(root, "proto/gen/.generated")
const protoGenerated = () => {
  const at = mtime(PROTO_STAMP)
  if (at === 0) return false
  const inputs = [
    ...filesBelow(join(root, "proto/scion"), [".proto"]),
    ...filesBelow(join(root, "proto/grpc"), [".proto"]),
    ...["buf.yaml", "buf.gen.yaml", "package.json"].map((name) => join(root, "proto", name))
  ]
  return inputs.every((input) => mtime(input) <= at)
}

if (!installed()) {
  const quiet = process.env.CI ? "" : " --reporter=silent"
  run(`${pnpmCommand()} install --frozen-lockfile --prefer-offline${existsSync(join(root, "node_modules")) ? quiet : ""}`)
}
if (!protoGenerated()) {
  run("npx buf generate", { cwd: join(root, "proto") })
  writeFileSync(PROTO_STAMP, `${new Date().toISOString()}\n`)
}
// Incremental: a project whose sources did not change is not compiled again.
run("npx tsc -b")
// Skips each unit whose bundle is newer than everything it was made from.
run("node scripts/bundle.mjs")
