import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt"
import { Caller, effectService, type Routes } from "@scion/kit"
import { AuthService } from "@scion/proto/scion/auth/v1/auth_pb"
import { IdentityService } from "@scion/proto/scion/identity/v1/identity_pb"
import { Effect, Option } from "effect"
import { Accounts } from "../Accounts.js"
import { ApiKeys } from "../ApiKeys.js"
import { Auth } from "../Auth.js"
import { type IdentityError, toWireError, Unauthenticated } from "../domain/errors.js"
import type { SessionGrant } from "../domain/models.js"
import { Invites } from "../Invites.js"
import { Orgs } from "../Orgs.js"
import { projectRoutes } from "./projects.js"
import {
  apiKeyToProto,
  inviteToProto,
  memberToProto,
  membershipToProto,
  modeFromProto,
  orgDetailsToProto,
  principalToProto,
  roleToProto,
  userToProto
} from "./mapping.js"

/** The verified principal of the request; none means UNAUTHENTICATED. */
const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

const sessionToProto = (grant: SessionGrant) => ({
  session: { user: userToProto(grant.user), sessionToken: grant.sessionToken, expiresAt: timestampFromDate(grant.expiresAt) }
})

/** AuthService and IdentityService as Connect routes over the identity services. */
export const identityRoutes = Effect.gen(function* () {
  const auth = yield* Auth
  const accounts = yield* Accounts
  const orgs = yield* Orgs
  const invites = yield* Invites
  const apiKeys = yield* ApiKeys

  const authRoutes = yield* effectService<typeof AuthService, IdentityError, never>(
    AuthService,
    {
      signUp: (req) => Effect.map(auth.signUp({ email: req.email, password: req.password, fullName: req.fullName }), sessionToProto),
      logIn: (req) => Effect.map(auth.logIn({ email: req.email, password: req.password }), sessionToProto),
      logOut: () => Effect.as(Effect.flatMap(caller, auth.logOut), {}),
      verifyEmail: (req) => Effect.map(auth.verifyEmail(req.token), (user) => ({ user: userToProto(user) })),
      authenticate: (req) =>
        Effect.map(auth.authenticate(req.bearerToken), (a) => ({
          principal: principalToProto(a.principal),
          principalToken: a.token,
          expiresAt: timestampFromDate(a.expiresAt)
        })),
      authorize: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => auth.authorize(p, req.orgId, req.permission)),
          (granted) => ({ roleKey: granted.roleKey, permissions: [...granted.permissions] })
        ),
      getVerificationKeys: () => Effect.map(auth.verificationKeys, (keys) => ({ keys: [...keys] })),
      issueServiceToken: (req) =>
        Effect.map(auth.issueServiceToken(req.serviceName, req.credential), (issued) => ({
          principalToken: issued.token,
          expiresAt: timestampFromDate(issued.expiresAt),
          permissions: [...issued.principal.permissions]
        }))
    },
    toWireError
  )

  const identity = yield* effectService<typeof IdentityService, IdentityError, never>(
    IdentityService,
    {
      getMe: () =>
        Effect.map(Effect.flatMap(caller, accounts.getMe), (me) => ({
          user: userToProto(me.user),
          hasOrgs: me.hasOrgs,
          ...(me.defaultOrgId !== null ? { defaultOrgId: me.defaultOrgId } : {})
        })),
      updateMe: (req) => Effect.map(Effect.flatMap(caller, (p) => accounts.updateMe(p, { fullName: req.fullName })), (user) => ({ user: userToProto(user) })),
      deleteMe: () => Effect.as(Effect.flatMap(caller, accounts.deleteMe), {}),
      bootstrap: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => accounts.bootstrap(p, req.orgId)), (b) => ({
          user: userToProto(b.user),
          orgs: b.orgs.map(membershipToProto),
          activeOrg: orgDetailsToProto(b.activeOrg)
        })),
      listMyOrgs: () => Effect.map(Effect.flatMap(caller, accounts.listMyOrgs), (list) => ({ orgs: list.map(membershipToProto) })),

      createOrg: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => orgs.createOrg(p, { name: req.name, requestId: req.requestId })), (org) => ({ org: orgDetailsToProto(org) })),
      getOrg: (req) => Effect.map(Effect.flatMap(caller, (p) => orgs.getOrg(p, req.orgId)), (org) => ({ org: orgDetailsToProto(org) })),
      updateOrg: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => orgs.updateOrg(p, { orgId: req.orgId, name: req.name })), (org) => ({ org: orgDetailsToProto(org) })),
      deleteOrg: (req) => Effect.as(Effect.flatMap(caller, (p) => orgs.deleteOrg(p, req.orgId)), {}),

      listMembers: (req) => Effect.map(Effect.flatMap(caller, (p) => orgs.listMembers(p, req.orgId)), (list) => ({ members: list.map(memberToProto) })),
      updateMemberRole: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => orgs.updateMemberRole(p, { orgId: req.orgId, userId: req.userId, roleKey: req.roleKey })),
          (result) => ({ message: result.message, member: memberToProto(result.member) })
        ),
      removeMember: (req) => Effect.as(Effect.flatMap(caller, (p) => orgs.removeMember(p, { orgId: req.orgId, userId: req.userId })), {}),
      listRoles: (req) => Effect.map(Effect.flatMap(caller, (p) => orgs.listRoles(p, req.orgId)), (roles) => ({ roles: roles.map(roleToProto) })),

      createInvite: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => invites.createInvite(p, { orgId: req.orgId, email: req.email, roleKey: req.roleKey })),
          (invite) => ({ invite: inviteToProto(invite) })
        ),
      listInvites: (req) => Effect.map(Effect.flatMap(caller, (p) => invites.listInvites(p, req.orgId)), (list) => ({ invites: list.map(inviteToProto) })),
      revokeInvite: (req) => Effect.as(Effect.flatMap(caller, (p) => invites.revokeInvite(p, { orgId: req.orgId, inviteId: req.inviteId })), {}),
      listPendingInvites: () => Effect.map(Effect.flatMap(caller, invites.listPendingInvites), (list) => ({ invites: list.map(inviteToProto) })),
      acceptInvite: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => invites.acceptInvite(p, req.inviteToken)), (result) => ({
          message: result.message,
          org: orgDetailsToProto(result.org)
        })),

      listApiKeys: (req) => Effect.map(Effect.flatMap(caller, (p) => apiKeys.listApiKeys(p, req.orgId)), (list) => ({ apiKeys: list.map(apiKeyToProto) })),
      createApiKey: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) =>
            apiKeys.createApiKey(p, {
              orgId: req.orgId,
              name: req.name,
              roleId: req.roleId,
              scopes: req.scopes,
              expiresAt: req.expiresAt ? timestampDate(req.expiresAt) : null,
              mode: modeFromProto(req.mode)
            })
          ),
          (created) => ({ apiKey: apiKeyToProto(created.apiKey), secret: created.secret })
        ),
      revokeApiKey: (req) => Effect.as(Effect.flatMap(caller, (p) => apiKeys.revokeApiKey(p, { orgId: req.orgId, apiKeyId: req.apiKeyId })), {})
    },
    toWireError
  )

  // ProjectService: projects are org-scoped metadata that identity owns (rpc/projects.ts).
  const projects = yield* projectRoutes

  return [authRoutes, identity, projects] as ReadonlyArray<Routes>
})
