/**
 * The real OrgAccess policy over a scripted identity: how identity's answers become billing's
 * errors, and what service principals and API keys of other orgs may do.
 */
import { create } from "@bufbuild/protobuf"
import { describe, expect, it } from "@effect/vitest"
import { Code, Principal, RpcError } from "@scion/kit"
import { AuthorizeResponseSchema, GetVerificationKeysResponseSchema } from "@scion/proto/scion/auth/v1/auth_pb"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { IdentityClient, OrgAccess } from "../src/index.js"

/** Identity's answer per permission: granted, or the error identity would send. */
const identitySays = new Map<string, RpcError | "granted">()
const asked: Array<string> = []

const ScriptedIdentity = Layer.succeed(IdentityClient, {
  authorize: (request) => {
    asked.push(`${request.orgId}:${request.permission}`)
    const answer = identitySays.get(request.permission ?? "") ?? "granted"
    return answer === "granted" ? Effect.succeed(create(AuthorizeResponseSchema, { roleKey: "owner", permissions: [] })) : Effect.fail(answer)
  },
  getVerificationKeys: () => Effect.succeed(create(GetVerificationKeysResponseSchema, {})),
  // Every question reaches identity here: the cache has tests of its own (kit).
  grants: null
})

const TestAccess = OrgAccess.live.pipe(Layer.provide(ScriptedIdentity), Layer.provideMerge(Logger.minimumLogLevel(LogLevel.None)))

const principal = (kind: "user_session" | "api_key" | "service", orgId: string | null = null) =>
  new Principal({ kind, userId: kind === "user_session" ? "usr_1" : null, sessionId: null, apiKeyId: kind === "api_key" ? "key_1" : null, orgId, roleKey: null, permissions: [], exp: 4_000_000_000 })

const rpcError = (code: Code, reason: string) => new RpcError({ code, reason, message: reason, metadata: {} })

describe("OrgAccess.live", () => {
  it.effect("maps identity's refusals: NOT_A_MEMBER, PERMISSION_DENIED, UNAUTHENTICATED, unavailable", () =>
    Effect.gen(function* () {
      const access = yield* OrgAccess
      const user = principal("user_session")
      identitySays.set("billing.read", "granted")
      yield* access.require(user, "org_1", "billing.read")
      identitySays.set("billing.manage", rpcError(Code.PermissionDenied, "PERMISSION_DENIED"))
      expect(yield* Effect.flip(access.require(user, "org_1", "billing.manage"))).toMatchObject({ _tag: "PermissionDenied", permission: "billing.manage" })
      identitySays.set("billing.manage", rpcError(Code.PermissionDenied, "NOT_A_MEMBER"))
      expect(yield* Effect.flip(access.require(user, "org_1", "billing.manage"))).toMatchObject({ _tag: "NotAMember", orgId: "org_1" })
      identitySays.set("billing.manage", rpcError(Code.Unauthenticated, "UNAUTHENTICATED"))
      expect(yield* Effect.flip(access.require(user, "org_1", "billing.manage"))).toMatchObject({ _tag: "Unauthenticated" })
      identitySays.set("billing.manage", rpcError(Code.Unavailable, ""))
      expect(yield* Effect.flip(access.require(user, "org_1", "billing.manage"))).toMatchObject({ _tag: "IdentityUnavailable" })
    }).pipe(Effect.provide(TestAccess))
  )

  it.effect("service principals may read but never manage; an API key of another org is not a member (identity not asked)", () =>
    Effect.gen(function* () {
      const access = yield* OrgAccess
      asked.length = 0
      yield* access.require(principal("service"), "org_1", "billing.read")
      expect(yield* Effect.flip(access.require(principal("service"), "org_1", "billing.manage"))).toMatchObject({ _tag: "PermissionDenied" })
      expect(yield* Effect.flip(access.require(principal("api_key", "org_2"), "org_1", "billing.read"))).toMatchObject({ _tag: "NotAMember", orgId: "org_1" })
      expect(asked).toEqual([])
      identitySays.set("billing.read", "granted")
      yield* access.require(principal("api_key", "org_1"), "org_1", "billing.read")
      expect(asked).toEqual(["org_1:billing.read"])
    }).pipe(Effect.provide(TestAccess))
  )
})
