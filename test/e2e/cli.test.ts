/**
 * The `scion` binary and the SDK against the real system: a new user goes from sign-up to a
 * branch URL with the CLI alone (separate processes, real Postgres and NATS), and the CI recipe
 * runs end to end as a shell script.
 */
import { execFile, execFileSync, spawn } from "node:child_process"
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { branchOf, BranchUrlMissing, createScion, makeApiClient, ScionApi, ScionError, waitForOperation, type Operation } from "@scion/sdk"
import { FetchHttpClient } from "@effect/platform"
import { Effect, Exit, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type SourceCluster, startSourceCluster } from "../support/sourceCluster.js"
import { healthServing, respawn, type Scion, startScion, type UnitProcess, waitFor, psql } from "../support/system.js"

/**
 * The package users install (services/cli/scripts/package.mjs, made once before the suite): one
 * bundled file that starts in a fraction of the time the workspace's many modules take to load.
 */
let SCION_BIN: string
let tarball: string
const RECIPE = fileURLToPath(new URL("../../services/cli/examples/branch-per-pr.sh", import.meta.url))

let scion: Scion
let source: SourceCluster
let configDir: string
const email = `cli-${Date.now()}@example.com`
const password = "correct-horse-battery"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the binary as a user would, with the config directory and API URL of this suite. */
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Run> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [SCION_BIN, ...args],
      { env: { PATH: process.env.PATH ?? "", HOME: configDir, SCION_CONFIG_DIR: configDir, SCION_API_URL: scion.baseUrl, ...env }, timeout: 300_000, encoding: "utf8" },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

const ok = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const run = await cli(args, env)
  expect(run.code, `scion ${args.join(" ")}\n${run.stdout}\n${run.stderr}`).toBe(0)
  return run
}

const json = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => JSON.parse((await ok([...args, "--json"], env)).stdout)


let orgId: string
let connectorId: string
let apiKey: string

beforeAll(async () => {
  configDir = await mkdtemp(join(tmpdir(), "scion-cli-"))
  const packageDir = join(configDir, "package")
  tarball = execFileSync(process.execPath, [fileURLToPath(new URL("../../services/cli/scripts/package.mjs", import.meta.url)), packageDir], { encoding: "utf8", timeout: 120_000 }).trim()
  SCION_BIN = join(packageDir, "scion.mjs")
  ;[scion, source] = await Promise.all([startScion(), startSourceCluster()])
  await source.query("create database shop")
  await source.query("create table items (id bigint primary key, title text not null); insert into items select g, 'item ' || g from generate_series(1, 100) g; create table events (at timestamptz not null, note text)", "shop")
}, 180_000)

let respawned: UnitProcess | undefined

afterAll(async () => {
  await respawned?.stop()
  await Promise.all([scion?.stop(), source?.stop()])
  await rm(configDir, { recursive: true, force: true })
})

describe("scion, a new user's path", () => {
  it("answers usage errors with exit 2 and commands without a login with exit 3", async () => {
    const missing = await cli(["branches", "create"])
    expect(missing.code).toBe(2)
    expect(missing.stdout + missing.stderr).toMatch(/connector_id/)
    const anonymous = await cli(["orgs", "list"])
    expect(anonymous.code).toBe(3)
    expect(anonymous.stderr).toMatch(/not logged in: run `scion login`/)
    const badToken = await cli(["orgs", "list", "--token", "not-a-token"])
    expect(badToken.code).toBe(3)
    expect(badToken.stderr).toMatch(/^error: /)
  })

  it("signs up, keeps the session in a 0600 file, logs in again and creates the org it then uses", async () => {
    await ok(["signup", "--email", email, "--name", "CLI User"], { SCION_PASSWORD: password })
    const file = join(configDir, "credentials.json")
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    expect((await stat(configDir)).mode & 0o077).toBe(0)
    const wrong = await cli(["login", "--email", email], { SCION_PASSWORD: "wrong-password-here" })
    expect(wrong.code).toBe(3)
    expect(wrong.stderr).toMatch(/^error: .+/)
    await ok(["login", "--email", email], { SCION_PASSWORD: password })
    const created = await json(["orgs", "create", "CLI Org"])
    orgId = created.org_id
    expect(created).toMatchObject({ name: "CLI Org", my_role: "owner" })
    expect(JSON.parse(await readFile(file, "utf8"))).toMatchObject({ email, org_id: orgId, api_url: scion.baseUrl })
    const orgs = await json(["orgs", "list"])
    expect(orgs).toEqual([expect.objectContaining({ org_id: orgId, name: "CLI Org", role: "owner" })])
    const table = await ok(["orgs", "list"])
    expect(table.stdout).toMatch(new RegExp(`^\\s+ORG_ID\\s+NAME\\s+ROLE\\n\\*\\s+${orgId}\\s+CLI Org\\s+owner$`, "m"))
    const whoami = await ok(["whoami"])
    expect(whoami.stdout).toContain(email)
  })

  it("manages projects, invites and API keys; the key's secret is printed once and works as SCION_TOKEN", async () => {
    expect(await json(["projects", "create", "web"])).toMatchObject({ name: "web", org_id: orgId })
    expect((await json(["projects", "list"])).projects.map((p: { name: string }) => p.name)).toEqual(["web"])
    expect(await json(["invites", "create", "friend@example.com", "--role", "viewer"])).toMatchObject({ email: "friend@example.com", role_key: "viewer" })
    expect((await json(["invites", "list"])).map((i: { email: string }) => i.email)).toEqual(["friend@example.com"])
    const key = await json(["keys", "create", "ci", "--role", "member"])
    expect(key.secret).toMatch(/^sk-scion_live_/)
    apiKey = key.secret
    const listed = await ok(["keys", "list"])
    expect(listed.stdout).toContain(key.api_key_id)
    expect(listed.stdout).not.toContain(key.secret)
    // The key, not the stored session: an API key cannot list orgs (session only) but reads its own org's members.
    expect((await cli(["orgs", "list"], { SCION_TOKEN: apiKey })).code).toBe(3)
    expect((await json(["members", "list"], { SCION_TOKEN: apiKey })).map((m: { email: string }) => m.email)).toEqual([email])
  }, 120_000)

  it("an invitee joins with the CLI; members change role and leave; invites are revoked; projects are read, renamed and deleted", async () => {
    const friendDir = await mkdtemp(join(tmpdir(), "scion-cli-friend-"))
    const friendEnv = { SCION_CONFIG_DIR: friendDir, SCION_PASSWORD: password }
    const friendEmail = `cli-friend-${Date.now()}@example.com`
    try {
      await ok(["signup", "--email", friendEmail, "--name", "Friend"], friendEnv)
      const invite = await json(["invites", "create", friendEmail, "--role", "viewer"])
      expect((await ok(["invites", "pending"], friendEnv)).stdout).toMatch(/CLI Org\s+viewer/)
      const accepted = await json(["invites", "accept", invite.invite_token], friendEnv)
      expect(accepted.org).toMatchObject({ org_id: orgId, my_role: "viewer" })
      const friendOf = async () => (await json(["members", "list"])).find((m: { email: string }) => m.email === friendEmail)
      const friend = await friendOf()
      expect(friend.role).toBe("viewer")
      await ok(["members", "set-role", friend.user_id, "--role", "member"])
      expect((await friendOf()).role).toBe("member")
      // The friend's own session now acts in the org it joined.
      expect((await json(["projects", "list", "--org", orgId], friendEnv)).projects.map((p: { name: string }) => p.name)).toEqual(["web"])
      await ok(["members", "remove", friend.user_id])
      expect(await friendOf()).toBeUndefined()
      expect((await cli(["projects", "list", "--org", orgId], friendEnv)).code).toBe(1)

      const other = await json(["invites", "create", "other@example.com"])
      expect((await ok(["invites", "revoke", other.invite_id])).stdout).toContain(`Revoked invite ${other.invite_id}`)
      expect((await json(["invites", "list"])).map((i: { invite_id: string }) => i.invite_id)).not.toContain(other.invite_id)

      const project = (await json(["projects", "list"])).projects[0]
      expect(await json(["projects", "get", project.project_id])).toMatchObject({ name: "web" })
      expect(await json(["projects", "update", project.project_id, "--name", "website", "--description", "the site"])).toMatchObject({ name: "website", description: "the site" })
      const extra = await json(["projects", "create", "scratch"])
      await ok(["projects", "delete", extra.project_id])
      expect((await cli(["projects", "get", extra.project_id])).code).toBe(4)
    } finally {
      await rm(friendDir, { recursive: true, force: true })
    }
  }, 120_000)

  it("connects a source: preflight as a table of checks, create, discover, select, decisions, then setup with progress lines", async () => {
    const details = ["--host", "127.0.0.1", "--port", String(source.port), "--database", "shop", "--username", "postgres", "--sslmode", "disable"]
    const env = { SCION_SOURCE_PASSWORD: source.password }
    const preflight = await ok(["connectors", "preflight", ...details], env)
    expect(preflight.stdout).toMatch(/^CHECK\s+STATUS\s+MESSAGE/m)
    expect(preflight.stdout).toMatch(/^wal_level\s+pass/m)
    expect(preflight.stdout).toContain("Preflight passed")
    const refused = await cli(["connectors", "preflight", ...details], { SCION_SOURCE_PASSWORD: "not-the-password" })
    expect(refused.code).toBe(1)
    expect(refused.stdout).toMatch(/^authentication\s+fail/m)
    const noPassword = await cli(["connectors", "preflight", ...details])
    expect(noPassword.code).toBe(2)

    const connector = await json(["connectors", "create", ...details, "--name", "shop"], env)
    connectorId = connector.connector_id
    const discovered = await ok(["connectors", "discover", connectorId, "--wait"])
    expect(discovered.stdout).toMatch(/^status\s+completed$/m)
    expect(discovered.stderr).toMatch(/completed/)
    const selected = await ok(["connectors", "select", connectorId, "*"])
    // events has no primary key: the CLI names it and the command that decides.
    expect(selected.stdout).toMatch(/no replica identity[\s\S]*shop\.public\.events/)
    expect((await cli(["connectors", "decisions", connectorId])).code).toBe(2)
    const decided = await ok(["connectors", "decisions", connectorId, "--all", "replica_identity_full"])
    expect(decided.stdout).toContain("Recorded 1 decision(s)")
    const script = await ok(["connectors", "grant-script", connectorId])
    expect(script.stdout).toMatch(/create publication/i)
    expect(script.stdout).toMatch(/replica identity full/i)
    const setup = await ok(["connectors", "setup", connectorId, "--wait"])
    // Not a terminal: one plain line per change of stage, on stderr.
    expect(setup.stderr.split("\n").filter((line) => line.startsWith("op")).length).toBeGreaterThan(1)
    expect(setup.stderr).not.toContain("\r")
    expect(setup.stdout).toMatch(/^status\s+completed$/m)
    expect(await json(["connectors", "get", connectorId])).toMatchObject({ connector_id: connectorId, branching_engine_status: "ready" })
    expect((await ok(["connectors", "list"])).stdout).toMatch(new RegExp(`^${connectorId}\\s+shop\\s+postgresql\\s+ready`, "m"))
    expect((await ok(["connectors", "quarantine", connectorId])).stdout).toContain("Replication is not quarantined")
    const readiness = await ok(["connectors", "readiness", connectorId])
    expect(readiness.stdout).toMatch(/^CHECK\s+STATUS\s+TABLE\s+MESSAGE/m)
    expect(readiness.stdout).toMatch(/\spass\s+shop\.public\.items/)
    expect((await ok(["connectors", "readiness", connectorId, "--only-failed"])).stdout).toContain("No failed readiness checks")
  }, 300_000)

  it("creates a branch and prints only its URL (--output url) or DATABASE_URL lines (--output env); the URL works with psql", async () => {
    const url = (await ok(["branches", "create", connectorId, "feature-1", "--wait", "--output", "url"])).stdout.trim()
    expect(url).toMatch(/^postgresql:\/\/[^\s]+$/)
    expect(psql(url, "select count(*) from items")).toBe("100")
    const env = (await ok(["branches", "create", connectorId, "feature-2", "--wait", "--output", "env"])).stdout.trim().split("\n")
    expect(env[0]).toMatch(/^DATABASE_URL=postgresql:\/\//)
    expect(psql(env[0]!.slice("DATABASE_URL=".length), "select 1")).toBe("1")
    const listed = await json(["branches", "list", connectorId])
    expect(listed.branches.map((b: { name: string }) => b.name).sort()).toEqual(["feature-1", "feature-2"])
    const byName = await ok(["branches", "get", "feature-1", "--connector", connectorId, "--output", "url"])
    expect(byName.stdout.trim()).toBe(url)
    // The same name again: the API's 409 detail, exit 1.
    const again = await cli(["branches", "create", connectorId, "feature-1"])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/^error: .*feature-1/)
    expect((await cli(["branches", "get", "br_doesnotexist"])).code).toBe(4)
    expect((await cli(["branches", "get", "nothing-here", "--connector", connectorId])).code).toBe(4)
    expect((await cli(["branches", "create", connectorId, "x", "--output", "url"])).code).toBe(2)
  }, 120_000)

  it("protects, resets and deletes a branch; a protected one refuses (exit 1) until unprotected", async () => {
    const branch = await json(["branches", "get", "feature-2", "--connector", connectorId])
    // A branch by name, as every branch command takes it.
    expect(await json(["branches", "update", "feature-2", "--connector", connectorId, "--protect"])).toMatchObject({ branch_id: branch.branch_id, protected: true })
    const refused = await cli(["branches", "delete", branch.branch_id, "--wait"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/protected/)
    await ok(["branches", "update", branch.branch_id, "--unprotect"])
    // A migration on the branch, and what it did, by name.
    psql(branch.branch_url, "alter table items add column note text")
    expect((await ok(["branches", "schema-diff", "feature-2", "--connector", connectorId])).stdout).toContain('alter table "public"."items" add column "note" text;')
    const reset = await json(["branches", "reset", branch.branch_id, "--wait"])
    expect(reset).toMatchObject({ type: "branch_reset", status: "completed" })
    // The reset brought the mirror's schema back.
    expect((await ok(["branches", "schema-diff", branch.branch_id])).stdout.trim()).toBe("-- the branch's schema is the mirror's")
    const started = await json(["branches", "delete", branch.branch_id])
    const ended = await json(["ops", "wait", started.operation_id])
    expect(ended).toMatchObject({ type: "branch_delete", status: "completed" })
    expect((await ok(["ops", "get", started.operation_id])).stdout).toMatch(/^status\s+completed$/m)
    expect((await cli(["ops", "get", "op_doesnotexist"])).code).toBe(4)
    expect((await ok(["branches", "delete", "feature-2", "--connector", connectorId, "--missing-ok"])).stdout).toContain("nothing to delete")
  }, 120_000)

  it("draws a progress bar with the stage and percentage when stdout is a terminal", async () => {
    const transcript = join(configDir, "pty.txt")
    const command = [process.execPath, SCION_BIN, "branches", "create", connectorId, "on-a-terminal", "--wait"].map((a) => `'${a}'`).join(" ")
    execFileSync("script", ["-qfc", command, transcript], {
      env: { PATH: process.env.PATH ?? "", HOME: configDir, SCION_CONFIG_DIR: configDir, SCION_API_URL: scion.baseUrl, TERM: "xterm" },
      timeout: 120_000,
      stdio: "ignore"
    })
    const output = await readFile(transcript, "utf8")
    expect(output).toMatch(/\r\x1b\[2K\[[#-]{30}\]\s+\d+% /)
    expect(output).toMatch(/\[#{30}\] 100% /)
    expect(output).toMatch(/branch_url\s+postgresql:\/\//)
  }, 120_000)

  it("scion connect walks from connection details to a ready engine on a terminal: the checks, the table picker, a decision", async () => {
    // A table without a key that no connector has decided about yet.
    await source.query("create table notes (body text)", "shop")
    const command = [process.execPath, SCION_BIN, "connect", "--host", "127.0.0.1", "--port", String(source.port), "--database", "shop", "--username", "postgres", "--sslmode", "disable", "--name", "walked"]
      .map((a) => `'${a}'`)
      .join(" ")
    // Each answer is typed once its prompt is on the screen, as a person would.
    const steps: Array<[RegExp, string]> = [
      [/Tables to mirror/, " "],
      [/shop\.public\.items/, "\r"],
      [/shop\.public\.notes has no primary key/, "\r"]
    ]
    const { code, screen } = await new Promise<{ code: number | null; screen: string }>((resolve) => {
      const child = spawn("script", ["-qefc", command, "/dev/null"], {
        env: { PATH: process.env.PATH ?? "", HOME: configDir, SCION_CONFIG_DIR: configDir, SCION_API_URL: scion.baseUrl, SCION_SOURCE_PASSWORD: source.password, TERM: "xterm" },
        stdio: ["pipe", "pipe", "pipe"]
      })
      let screen = ""
      let answered = 0
      child.stdout.on("data", (chunk: Buffer) => {
        screen += chunk.toString("utf8")
        const step = steps[answered]
        if (step !== undefined && step[0].test(screen)) {
          answered += 1
          setTimeout(() => child.stdin.write(step[1]), 200)
        }
      })
      const timer = setTimeout(() => child.kill("SIGKILL"), 240_000)
      child.on("exit", (code) => {
        clearTimeout(timer)
        resolve({ code, screen })
      })
    })
    expect(code, screen).toBe(0)
    expect(screen).toMatch(/wal_level\s+pass/)
    expect(screen).toContain("Ready. Your first branch:")
    const walked = (await json(["connectors", "list"])).connectors.find((c: { name: string }) => c.name === "walked")
    expect(walked).toMatchObject({ branching_engine_status: "ready" })
    expect(screen).toContain("shop.public.notes has no primary key or replica identity")
    // The first choice, replica_identity_full, was applied on the source by the setup.
    expect((await source.query("select relreplident from pg_class where relname = 'notes'", "shop")).rows[0].relreplident).toBe("f")
    await ok(["connectors", "delete", walked.connector_id, "--wait"])
  }, 300_000)

  it("installs as a package: the bundled tarball, npm install --global, and the same session works", async () => {
    expect(tarball).toMatch(/scion-cli-0\.1\.0\.tgz$/)
    const prefix = join(configDir, "global")
    execFileSync("npm", ["install", "--global", "--offline", "--no-audit", "--no-fund", "--prefix", prefix, tarball], { encoding: "utf8", timeout: 120_000, stdio: "pipe" })
    const installed = join(prefix, "bin", "scion")
    const run = (args: ReadonlyArray<string>) =>
      execFileSync(installed, [...args], { env: { PATH: process.env.PATH ?? "", HOME: configDir, SCION_CONFIG_DIR: configDir, SCION_API_URL: scion.baseUrl }, encoding: "utf8", timeout: 60_000 })
    expect(run(["--version"]).trim()).toBe("0.1.0")
    expect(JSON.parse(run(["orgs", "list", "--json"]))).toEqual([expect.objectContaining({ org_id: orgId, name: "CLI Org" })])
  }, 180_000)

  it("the CI recipe: a branch per pull request, migrated and tested, then deleted on close", async () => {
    const migration = join(configDir, "migrate.sh")
    await writeFile(migration, `#!/usr/bin/env bash\nset -euo pipefail\npsql "$DATABASE_URL" -v ON_ERROR_STOP=1 -qc "alter table items add column price numeric not null default 0"\n`, { mode: 0o755 })
    const tests = join(configDir, "tests.sh")
    await writeFile(tests, `#!/usr/bin/env bash\nset -euo pipefail\ntest "$(psql "$DATABASE_URL" -Atc "select count(*) from items where price = 0")" = 100\necho tests passed\n`, { mode: 0o755 })
    const githubEnv = join(configDir, "github-env")
    await writeFile(githubEnv, "")
    const env = {
      PATH: `${join(configDir, "bin")}:${process.env.PATH ?? ""}`,
      SCION: `${process.execPath} ${SCION_BIN}`,
      SCION_API_URL: scion.baseUrl,
      SCION_CONFIG_DIR: join(configDir, "ci"),
      SCION_TOKEN: apiKey,
      SCION_CONNECTOR_ID: connectorId,
      PR_NUMBER: "42",
      MIGRATE_COMMAND: migration,
      TEST_COMMAND: tests,
      GITHUB_ENV: githubEnv
    }
    const run = (step: string) => execFileSync("bash", [RECIPE, step], { env, encoding: "utf8", timeout: 180_000 })
    expect(run("open")).toContain("tests passed")
    // A second push replaces the branch: the migration runs again on fresh data.
    expect(run("open")).toContain("tests passed")
    const lines = (await readFile(githubEnv, "utf8")).trim().split("\n")
    expect(lines.filter((l) => l.startsWith("DATABASE_URL=postgresql://"))).toHaveLength(2)
    const branches = await json(["branches", "list", connectorId])
    expect(branches.branches.filter((b: { name: string; status: string }) => b.name === "pr-42" && b.status === "active")).toHaveLength(1)
    run("close")
    run("close")
    const after = await json(["branches", "list", connectorId])
    expect(after.branches.filter((b: { name: string; status: string }) => b.name === "pr-42" && b.status !== "deleted")).toEqual([])
    const urls = lines.filter((l) => l.startsWith("DATABASE_URL=")).map((l) => l.slice("DATABASE_URL=".length))
    expect(() => psql(urls[1]!, "select 1")).toThrow(/password authentication failed|does not exist/)
  }, 300_000)
})

describe("the SDK", () => {
  it("types every endpoint (Promise face) and answers API errors as ScionError with status and detail", async () => {
    const client = createScion({ baseUrl: scion.baseUrl, token: apiKey })
    const org = await client.api.orgs.get({ path: { org_id: orgId } })
    expect(org).toMatchObject({ org_id: orgId, name: "CLI Org" })
    const missing = await client.api.branches.get({ path: { branch_id: "br_doesnotexist" } }).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ScionError)
    expect(missing).toMatchObject({ kind: "NotFound", status: 404 })
    const invalid = await client.api.projects.create({ payload: { org_id: orgId, name: "" } }).catch((e: unknown) => e)
    expect(invalid).toMatchObject({ kind: "ParseError" })
    const anonymous = await createScion({ baseUrl: scion.baseUrl }).api.orgs.get({ path: { org_id: orgId } }).catch((e: unknown) => e)
    expect(anonymous).toMatchObject({ kind: "Unauthorized", status: 401 })
  })

  it("retries a 503 with backoff: a read made while the branch unit is down answers once it is back", async () => {
    const branch = (await json(["branches", "list", connectorId])).branches[0]
    await scion.branch.stop("SIGKILL")
    // Without retries the gateway's 503 is the answer.
    const once = await createScion({ baseUrl: scion.baseUrl, token: apiKey, retries: 1 }).api.branches.get({ path: { branch_id: branch.branch_id } }).catch((e: unknown) => e)
    expect(once).toMatchObject({ kind: "Unavailable", status: 503 })
    const patient = createScion({ baseUrl: scion.baseUrl, token: apiKey, retries: 8, retryDelay: "500 millis" })
    const read = patient.api.branches.get({ path: { branch_id: branch.branch_id } })
    await new Promise((resolve) => setTimeout(resolve, 1000))
    respawned = respawn(scion.branch)
    await waitFor("the branch unit again", () => healthServing(scion.branchUrl), 30_000)
    expect(await read).toMatchObject({ branch_id: branch.branch_id, name: branch.name })
  }, 120_000)

  it("createBranch waits with progress callbacks and returns a working URL; a completed operation without one fails closed", async () => {
    const client = createScion({ baseUrl: scion.baseUrl, token: apiKey })
    const seen: Array<string> = []
    const created = await client.createBranch({ connector_id: connectorId, name: "sdk", service_type: "postgres" }, { onProgress: (op) => seen.push(op.status) })
    expect(seen.at(-1)).toBe("completed")
    expect(psql(created.branchUrl, "select count(*) from items")).toBe("100")

    // An operation that completed without a branch_url (a branch delete's) is refused, not handed on.
    const layer = Layer.effect(ScionApi, makeApiClient({ baseUrl: scion.baseUrl, token: apiKey })).pipe(Layer.provide(FetchHttpClient.layer))
    const program = Effect.gen(function* () {
      const api = yield* ScionApi
      const handle = yield* api.branches.delete({ path: { branch_id: created.branchId } })
      const progress: Array<Operation> = []
      const ended = yield* waitForOperation(handle.operation_id, { onProgress: (op) => progress.push(op) })
      expect(progress.length).toBeGreaterThanOrEqual(1)
      return yield* branchOf(ended)
    })
    const exit = await Effect.runPromiseExit(program.pipe(Effect.provide(layer)))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error).toBeInstanceOf(BranchUrlMissing)
    // A failed operation rejects with its message: discovery of a database the source does not have.
    const unreadable = await client.api.connectors.create({
      payload: { service_name: "postgresql", name: "unreadable", connection_details: { ...source.details({ database: "shop" }), databases: ["shop", "missing_db"] } }
    })
    const discovery = await client.api.connectors.discover({ path: { connector_id: unreadable.connector_id } })
    const failed = await client.waitForOperation(discovery.operation_id).catch((e: unknown) => e)
    expect(failed).toMatchObject({ kind: "OperationFailed", message: expect.stringMatching(/Database missing_db could not be read/) })
  }, 120_000)
})
