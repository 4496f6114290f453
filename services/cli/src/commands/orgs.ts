import { Args, Command, Options } from "@effect/cli"
import { ScionApi } from "@scion/sdk"
import { Console, Effect, Option } from "effect"
import { CredentialStore } from "../credentials.js"
import { UsageError } from "../errors.js"
import { printList, printMessage, printResource } from "../output.js"
import { CliSession, common, orgOption, requireOrg, requireToken, withSession } from "../session.js"

// ---------------------------------------------------------------------------------------------
// orgs
// ---------------------------------------------------------------------------------------------

const rememberOrg = (orgId: string) =>
  Effect.gen(function* () {
    const store = yield* CredentialStore
    yield* store.write({ ...(yield* store.read), org_id: orgId })
  })

const orgsList = Command.make("list", { ...common }, (input) =>
  Effect.gen(function* () {
    yield* requireToken
    const orgs = yield* (yield* ScionApi).orgs.list()
    const current = (yield* CliSession).storedOrgId
    yield* printList(orgs, orgs, [["", (o) => (Option.contains(current, o.org_id) ? "*" : "")], ["org_id", (o) => o.org_id], ["name", (o) => o.name], ["role", (o) => o.role]], "No orgs yet: scion orgs create <name>")
  }).pipe(withSession(input))
).pipe(Command.withDescription("Your orgs (* marks the one in use)"))

const orgsCreate = Command.make("create", { name: Args.text({ name: "name" }), ...common }, ({ name, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const org = yield* (yield* ScionApi).orgs.create({ payload: { name } })
    // A first org is the one to use; otherwise the choice stays the user's.
    if (Option.isNone((yield* CliSession).storedOrgId)) yield* rememberOrg(org.org_id)
    yield* printResource(org, ["org_id", "name", "my_role", "created_at"])
  }).pipe(withSession(input))
).pipe(Command.withDescription("Create an org; you become its owner"))

const orgsUse = Command.make("use", { orgId: Args.text({ name: "org_id" }), ...common }, ({ orgId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    // Checked first: a typo must not become the remembered org.
    const org = yield* (yield* ScionApi).orgs.get({ path: { org_id: orgId } })
    yield* rememberOrg(org.org_id)
    yield* printMessage(`Using org ${org.name} (${org.org_id})`, org)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Act in this org from now on"))

export const orgsCommand = Command.make("orgs").pipe(Command.withDescription("Orgs"), Command.withSubcommands([orgsList, orgsCreate, orgsUse]))

// ---------------------------------------------------------------------------------------------
// members, invites
// ---------------------------------------------------------------------------------------------

const membersList = Command.make("list", { org: orgOption, ...common }, ({ org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const members = yield* (yield* ScionApi).members.listMembers({ path: { org_id: yield* requireOrg(org) } })
    yield* printList(members, members, [["user_id", (m) => m.user_id], ["email", (m) => m.email], ["name", (m) => m.full_name], ["role", (m) => m.role]], "No members")
  }).pipe(withSession(input))
).pipe(Command.withDescription("The org's members"))

const roleOption = Options.choice("role", ["owner", "admin", "member", "viewer"]).pipe(Options.withDefault("member" as const), Options.withDescription("The role (default member)"))
const userId = Args.text({ name: "user_id" })

const membersSetRole = Command.make("set-role", { userId, role: roleOption, org: orgOption, ...common }, ({ userId, role, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const updated = yield* (yield* ScionApi).members.updateMemberRole({ path: { org_id: yield* requireOrg(org), target_user_id: userId }, payload: { role_key: role } })
    yield* printMessage(`${userId} is now ${role}`, updated)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Change a member's role"))

const membersRemove = Command.make("remove", { userId, org: orgOption, ...common }, ({ userId, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* (yield* ScionApi).members.removeMember({ path: { org_id: yield* requireOrg(org), target_user_id: userId } })
    yield* printMessage(`Removed ${userId} from the org`, { user_id: userId, removed: true })
  }).pipe(withSession(input))
).pipe(Command.withDescription("Remove a member from the org"))

export const membersCommand = Command.make("members").pipe(Command.withDescription("Org members"), Command.withSubcommands([membersList, membersSetRole, membersRemove]))


const invitesCreate = Command.make("create", { email: Args.text({ name: "email" }), role: roleOption, org: orgOption, ...common }, ({ email, role, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const invite = yield* (yield* ScionApi).members.createInvite({ path: { org_id: yield* requireOrg(org) }, payload: { email, role_key: role } })
    yield* printResource(invite)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Invite someone to the org"))

const invitesList = Command.make("list", { org: orgOption, ...common }, ({ org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const invites = yield* (yield* ScionApi).members.listInvites({ path: { org_id: yield* requireOrg(org) } })
    yield* printList(invites, invites, [["invite_id", (i) => i.invite_id], ["email", (i) => i.email], ["role", (i) => i.role_key], ["expires_at", (i) => i.expires_at]], "No pending invites")
  }).pipe(withSession(input))
).pipe(Command.withDescription("The org's pending invites"))

const invitesRevoke = Command.make("revoke", { inviteId: Args.text({ name: "invite_id" }), org: orgOption, ...common }, ({ inviteId, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* (yield* ScionApi).members.revokeInvite({ path: { org_id: yield* requireOrg(org), invite_id: inviteId } })
    yield* printMessage(`Revoked invite ${inviteId}`, { invite_id: inviteId, revoked: true })
  }).pipe(withSession(input))
).pipe(Command.withDescription("Revoke a pending invite"))

const invitesPending = Command.make("pending", { ...common }, (input) =>
  Effect.gen(function* () {
    yield* requireToken
    const result = yield* (yield* ScionApi).invites.pending()
    yield* printList(result, result.invites, [["org", (i) => i.org_name], ["role", (i) => i.role_key], ["expires_at", (i) => i.expires_at]], "No invites for you")
  }).pipe(withSession(input))
).pipe(Command.withDescription("Invites addressed to you"))

const invitesAccept = Command.make("accept", { inviteToken: Args.text({ name: "invite_token" }), ...common }, ({ inviteToken, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const accepted = yield* (yield* ScionApi).invites.accept({ path: { invite_token: inviteToken } })
    yield* printMessage(`Joined ${accepted.org.name} (${accepted.org.org_id}) as ${accepted.org.my_role}`, accepted)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Accept an invite with the token from its email"))

export const invitesCommand = Command.make("invites").pipe(
  Command.withDescription("Org invites"),
  Command.withSubcommands([invitesCreate, invitesList, invitesRevoke, invitesPending, invitesAccept])
)

// ---------------------------------------------------------------------------------------------
// keys
// ---------------------------------------------------------------------------------------------

const keysList = Command.make("list", { org: orgOption, ...common }, ({ org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const keys = yield* (yield* ScionApi).apiKeys.list({ path: { org_id: yield* requireOrg(org) } })
    yield* printList(keys, keys, [["api_key_id", (k) => k.api_key_id], ["name", (k) => k.name], ["prefix", (k) => k.key_prefix], ["role", (k) => k.role_key], ["status", (k) => k.status], ["last_used_at", (k) => k.last_used_at]], "No API keys")
  }).pipe(withSession(input))
).pipe(Command.withDescription("The org's API keys (never their secrets)"))

const keysCreate = Command.make(
  "create",
  { name: Args.text({ name: "name" }), role: roleOption, mode: Options.choice("mode", ["live", "test"]).pipe(Options.withDefault("live" as const)), org: orgOption, ...common },
  ({ name, role, mode, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const api = yield* ScionApi
    const orgId = yield* requireOrg(org)
    const roles = yield* api.members.listRoles({ path: { org_id: orgId } })
    const found = roles.find((r) => r.role_key === role)
    if (found === undefined) return yield* new UsageError({ message: `the org has no role ${role}` })
    const key = yield* api.apiKeys.create({ path: { org_id: orgId }, payload: { name, mode, role_id: found.id, scopes: [], expiration: null } })
    const session = yield* CliSession
    if (session.json) return yield* Console.log(JSON.stringify(key, null, 2))
    yield* printResource(key, ["api_key_id", "name", "role_key", "key_prefix", "expires_at"])
    yield* Console.log(`\nThe secret, shown once (use it as SCION_TOKEN):\n${key.secret}`)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Create an org API key; the secret is printed once"))

const keysRevoke = Command.make("revoke", { apiKeyId: Args.text({ name: "api_key_id" }), org: orgOption, ...common }, ({ apiKeyId, org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* (yield* ScionApi).apiKeys.revoke({ path: { org_id: yield* requireOrg(org), api_key_id: apiKeyId } })
    yield* printMessage(`Revoked ${apiKeyId}`, { api_key_id: apiKeyId, status: "revoked" })
  }).pipe(withSession(input))
).pipe(Command.withDescription("Revoke an API key; it stops working at once"))

export const keysCommand = Command.make("keys").pipe(Command.withDescription("Org API keys"), Command.withSubcommands([keysList, keysCreate, keysRevoke]))

// ---------------------------------------------------------------------------------------------
// projects
// ---------------------------------------------------------------------------------------------

const projectsList = Command.make("list", { org: orgOption, ...common }, ({ org, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const list = yield* (yield* ScionApi).projects.list({ urlParams: { org_id: yield* requireOrg(org) } })
    yield* printList(list, list.projects, [["project_id", (p) => p.project_id], ["name", (p) => p.name], ["description", (p) => p.description]], "No projects")
  }).pipe(withSession(input))
).pipe(Command.withDescription("The org's projects"))

const projectsCreate = Command.make(
  "create",
  { name: Args.text({ name: "name" }), description: Options.text("description").pipe(Options.optional), org: orgOption, ...common },
  ({ name, description, org, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const project = yield* (yield* ScionApi).projects.create({
        payload: { org_id: yield* requireOrg(org), name, ...Option.match(description, { onNone: () => ({}), onSome: (d) => ({ description: d }) }) }
      })
      yield* printResource(project)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Create a project"))

const projectId = Args.text({ name: "project_id" })

const projectsGet = Command.make("get", { projectId, ...common }, ({ projectId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    yield* printResource(yield* (yield* ScionApi).projects.get({ path: { project_id: projectId } }))
  }).pipe(withSession(input))
).pipe(Command.withDescription("Show a project"))

const projectsUpdate = Command.make(
  "update",
  { projectId, name: Options.text("name").pipe(Options.optional), description: Options.text("description").pipe(Options.optional), ...common },
  ({ projectId, name, description, ...input }) =>
    Effect.gen(function* () {
      yield* requireToken
      const project = yield* (yield* ScionApi).projects.update({
        path: { project_id: projectId },
        payload: { ...Option.match(name, { onNone: () => ({}), onSome: (n) => ({ name: n }) }), ...Option.match(description, { onNone: () => ({}), onSome: (d) => ({ description: d }) }) }
      })
      yield* printResource(project)
    }).pipe(withSession(input))
).pipe(Command.withDescription("Rename a project or change its description"))

const projectsDelete = Command.make("delete", { projectId, ...common }, ({ projectId, ...input }) =>
  Effect.gen(function* () {
    yield* requireToken
    const deleted = yield* (yield* ScionApi).projects.delete({ path: { project_id: projectId } })
    yield* printMessage(deleted.message, deleted)
  }).pipe(withSession(input))
).pipe(Command.withDescription("Delete a project (its connectors go with it)"))

export const projectsCommand = Command.make("projects").pipe(
  Command.withDescription("Projects"),
  Command.withSubcommands([projectsList, projectsCreate, projectsGet, projectsUpdate, projectsDelete])
)
