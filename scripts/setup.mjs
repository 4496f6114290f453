#!/usr/bin/env node
// Makes a fresh checkout runnable with only Node and npm: installs pnpm (from the npm registry,
// since corepack's signature check fails here), the workspace's dependencies, generates the
// protobuf code and builds every package. Cheap when everything is already in place.
import { execFileSync, execSync } from "node:child_process"
import { existsSync } from "node:fs"
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

const pnpm = pnpmCommand()
const quiet = process.env.CI ? "" : " --reporter=silent"
run(`${pnpm} install --frozen-lockfile --prefer-offline${existsSync(join(root, "node_modules")) ? quiet : ""}`)
run("npm run --silent build")
