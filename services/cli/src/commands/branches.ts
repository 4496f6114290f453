import { Args, Command, Options } from "@effect/cli"
import { branchOf, ScionApi } from "@scion/sdk"
import { Console, DateTime, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { NotFound } from "@scion/gateway/httpErrors"
import { BranchNotFound, UsageError } from "../errors.js"
import { followOperation, waitOption, waitWithProgress } from "../operations.js"
import { printList, printMessage, printResource } from "../output.js"
import { CliSession, common, requireToken, withSession } from "../session.js"

const BRANCH_FIELDS = ["branch_id", "name", "connector_id", "status", "branch_url", "pooled_branch_url", "data_as_of", "protected", "expires_at", "snapshot_id", "created_at", "error"]

const output = Options.choice("output", ["table", "json", "url", "env"]).pipe(
  Options.withDefault("table" as const),
  Options.withDescription("With --wait: table (people), json, url (only the branch URL) or env (DATABASE_URL= lines for a shell or $GITHUB_ENV)")
)

const optional = <K extends string, A>(key: K, value: Option.Option<A>): { [P in K]?: A } =>
  Option.match(value, { onNone: () => ({}), onSome: (v) => ({ [key]: v }) as { [P in K]?: A } })

/**
 * DATABASE_URL lines in the dotenv / $GITHUB_ENV format (NAME=value, unquoted; branch URLs carry
 * no spaces or quotes). In a shell: export $(scion branches create … --output env).
 */
const envLines = (branchUrl: string, pooled: string | null) =>
  [`DATABASE_URL=${branchUrl}`, ...(pooled === null ? [] : [`POOLED_DATABASE_URL=${pooled}`])].join("\n")

const create = Command.make(
  "create",
  {
    connectorId: Args.text({ name: "connector_id" }),
    name: Args.text({ name: "name" }),
    wait: waitOption,
    output,
    snapshot: Options.text("snapshot").pipe(Options.optional, Options.withDescription("Cut the branch from this ready snapshot instead of the live mirror")),
    ttl: Options.integer("ttl").pipe(Options.optional, Options.withDescription("Seconds until the branch expires and is deleted")),
    allowStale: Options.boolean("allow-stale").pipe(Options.withDescription("Branch even while replication is quarantined")),
    idempotencyKey: Options.text("idempotency-key").pipe(Options.optional, Options.withDescription("Resumes an earlier create with the same key (default: a new key)")),
    ...common
  },
  ({ connectorId, name, wait, output, snapshot, ttl, allowStale, idempotencyKey, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      if (!wait && (output === "url" || output === "env")) return yield* new UsageError({ message: `--output ${output} needs --wait (the URL exists once the branch does)` })
      const api = yield* ScionApi
      const handle = yield* api.branches.create({
        payload: {
          connector_id: connectorId,
          name,
          service_type: "postgres",
          ...optional("snapshot_id", snapshot),
          ...optional("ttl_seconds", ttl),
          ...(allowStale ? { allow_stale: true } : {})
        },
        headers: { "x-idempotency-key": Option.getOrElse(idempotencyKey, () => randomUUID()) }
      })
      const session = yield* CliSession
      if (!wait) return yield* followOperation(handle, false)
      const operation = yield* waitWithProgress(handle.operation_id)
      // Fails closed: a completed create without a URL is an error, never an empty DATABASE_URL.
      const branch = yield* branchOf(operation)
      if (output === "url") return yield* Console.log(branch.branchUrl)
      if (output === "env") return yield* Console.log(envLines(branch.branchUrl, branch.pooledBranchUrl))
      if (output === "json" || session.json) return yield* Console.log(JSON.stringify(branch.branch, null, 2))
      yield* printResource(branch.branch, BRANCH_FIELDS)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Create a branch of a connector's mirror; with --wait, print it once its URL works"))

const list = Command.make("list", { connectorId: Args.text({ name: "connector_id" }), ...common }, ({ connectorId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).branches.list({ urlParams: { connector_id: connectorId } })
    yield* printList(
      result,
      result.branches,
      [["branch_id", (b) => b.branch_id], ["name", (b) => b.name], ["status", (b) => b.status], ["protected", (b) => b.protected], ["expires_at", (b) => b.expires_at], ["created_at", (b) => b.created_at]],
      "No branches: scion branches create <connector_id> <name> --wait"
    )
  }).pipe(withSession(input))
).pipe(Command.withDescription("A connector's branches"))

const branchId = Args.text({ name: "branch" }).pipe(Args.withDescription("A branch id, or a branch name with --connector"))
const connectorOfName = Options.text("connector").pipe(Options.optional, Options.withDescription("The connector whose live branch of this name is meant"))

/** A branch id as given, or the id of the connector's live branch of that name. */
const resolveBranch = (branch: string, connector: Option.Option<string>) =>
  Option.match(connector, {
    onNone: () => Effect.succeed(Option.some(branch)),
    onSome: (connectorId) =>
      Effect.gen(function* () {
        const { branches } = yield* (yield* ScionApi).branches.list({ urlParams: { connector_id: connectorId } })
        return Option.fromNullable(branches.find((b) => b.name === branch && b.status !== "deleted" && b.status !== "deleting")?.branch_id)
      })
  })

const requireBranch = (branch: string, connector: Option.Option<string>) =>
  Effect.flatMap(resolveBranch(branch, connector), (id) =>
    Option.match(id, { onNone: () => Effect.fail(new BranchNotFound({ message: `connector ${Option.getOrElse(connector, () => "?")} has no live branch named ${branch}` })), onSome: Effect.succeed })
  )

const get = Command.make("get", { branchId, connector: connectorOfName, output, ...common }, ({ branchId, connector, output, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const branch = yield* (yield* ScionApi).branches.get({ path: { branch_id: yield* requireBranch(branchId, connector) } })
    if (output === "url" || output === "env") {
      if (branch.branch_url === null || branch.branch_url === "") return yield* new UsageError({ message: `branch ${branchId} is ${branch.status}: it has no URL` })
      return yield* Console.log(output === "url" ? branch.branch_url : envLines(branch.branch_url, branch.pooled_branch_url))
    }
    if (output === "json") return yield* Console.log(JSON.stringify(branch, null, 2))
    yield* printResource(branch, BRANCH_FIELDS)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Show a branch (--output url prints only its URL)"))

const remove = Command.make(
  "delete",
  {
    branchId,
    connector: connectorOfName,
    missingOk: Options.boolean("missing-ok").pipe(Options.withDescription("Succeed when there is no such branch (a cleanup step that may run twice)")),
    wait: waitOption,
    ...common
  },
  ({ branchId, connector, missingOk, wait, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const id = yield* resolveBranch(branchId, connector)
      if (Option.isNone(id)) {
        if (missingOk) return yield* printMessage(`No live branch named ${branchId}: nothing to delete`, { deleted: false })
        return yield* new BranchNotFound({ message: `connector ${Option.getOrElse(connector, () => "?")} has no live branch named ${branchId}` })
      }
      const handle = yield* (yield* ScionApi).branches.delete({ path: { branch_id: id.value } }).pipe(
        Effect.map(Option.some),
        Effect.catchIf(
          (e) => missingOk && e instanceof NotFound,
          () => Effect.succeed(Option.none())
        )
      )
      if (Option.isNone(handle)) return yield* printMessage(`No branch ${branchId}: nothing to delete`, { deleted: false })
      yield* followOperation(handle.value, wait)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Delete a branch: its database, role and URL go"))

const reset = Command.make("reset", { branchId, connector: connectorOfName, wait: waitOption, ...common }, ({ branchId, connector, wait, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* followOperation(yield* (yield* ScionApi).branches.reset({ path: { branch_id: yield* requireBranch(branchId, connector) } }), wait)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Give a branch the mirror's current data; its URL and password stay"))

const update = Command.make(
  "update",
  {
    branchId,
    connector: connectorOfName,
    name: Options.text("name").pipe(Options.optional),
    protect: Options.boolean("protect").pipe(Options.withDescription("Refuse delete and reset until --unprotect")),
    unprotect: Options.boolean("unprotect"),
    expiresAt: Options.text("expires-at").pipe(Options.optional, Options.withDescription("An ISO 8601 time, or 'never'")),
    ...common
  },
  ({ branchId, connector, name, protect, unprotect, expiresAt, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      if (protect && unprotect) return yield* new UsageError({ message: "--protect and --unprotect contradict each other" })
      let expires: { expires_at?: DateTime.Utc | null } = {}
      if (Option.isSome(expiresAt)) {
        if (expiresAt.value === "never") expires = { expires_at: null }
        else {
          const parsed = DateTime.make(expiresAt.value)
          if (Option.isNone(parsed)) return yield* new UsageError({ message: `--expires-at ${expiresAt.value} is not an ISO 8601 time` })
          expires = { expires_at: DateTime.toUtc(parsed.value) }
        }
      }
      const branch = yield* (yield* ScionApi).branches.update({
        path: { branch_id: yield* requireBranch(branchId, connector) },
        payload: { ...optional("name", name), ...(protect ? { protected: true } : unprotect ? { protected: false } : {}), ...expires }
      })
      yield* printResource(branch, BRANCH_FIELDS)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Rename, protect or unprotect a branch, or change when it expires"))

const schemaDiff = Command.make("schema-diff", { branchId, connector: connectorOfName, ...common }, ({ branchId, connector, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const diff = yield* (yield* ScionApi).branches.schemaDiff({ path: { branch_id: yield* requireBranch(branchId, connector) } })
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify(diff, null, 2))
    yield* Console.log(diff.sql === "" ? "-- the branch's schema is the mirror's" : diff.sql)
  }).pipe(withSession(input))
).pipe(Command.withDescription("The SQL that takes the mirror's schema to the branch's (what your migration did)"))

export const branchesCommand = Command.make("branches").pipe(
  Command.withDescription("Branches: writable copies of a connector's mirror"),
  Command.withSubcommands([create, list, get, remove, reset, update, schemaDiff])
)

// ---------------------------------------------------------------------------------------------
// snapshots
// ---------------------------------------------------------------------------------------------

const snapshotCreate = Command.make("create", { connectorId: Args.text({ name: "connector_id" }), name: Args.text({ name: "name" }), wait: waitOption, ...common }, ({ connectorId, name, wait, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* followOperation(yield* (yield* ScionApi).branches.createSnapshot({ path: { connector_id: connectorId }, payload: { name } }), wait)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Take a named, immutable copy of the mirror to branch from"))

const snapshotList = Command.make("list", { connectorId: Args.text({ name: "connector_id" }), ...common }, ({ connectorId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).branches.listSnapshots({ path: { connector_id: connectorId } })
    yield* printList(result, result.snapshots, [["snapshot_id", (s) => s.snapshot_id], ["name", (s) => s.name], ["status", (s) => s.status], ["data_as_of", (s) => s.data_as_of]], "No snapshots")
  }).pipe(withSession(input))
).pipe(Command.withDescription("A connector's snapshots"))

const snapshotDelete = Command.make("delete", { snapshotId: Args.text({ name: "snapshot_id" }), wait: waitOption, ...common }, ({ snapshotId, wait, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const handle = yield* (yield* ScionApi).branches.deleteSnapshot({ path: { snapshot_id: snapshotId } })
    yield* followOperation(handle, wait)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Delete a snapshot"))

export const snapshotsCommand = Command.make("snapshots").pipe(Command.withDescription("Snapshots of a connector's mirror"), Command.withSubcommands([snapshotCreate, snapshotList, snapshotDelete]))

