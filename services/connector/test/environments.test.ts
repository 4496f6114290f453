import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { Environments, parseRoleArn } from "../src/index.js"
import { apiKey, connectorTestLayer, newOrgId, session } from "./support.js"

const create = (principal: Parameters<Environments["create"]>[0], orgId: string, name = "prod", extra: { privateLinkId?: string } = {}) =>
  Effect.flatMap(Environments, (envs) => envs.create(principal, { orgId, name, cloud: "aws", region: "us-east-1", ...extra }))

describe("environments", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("creates and lists environments; names unique per org; private links active", () =>
      Effect.gen(function* () {
        const envs = yield* Environments
        const orgId = (yield* newOrgId())
        const admin = yield* session({ [orgId]: "admin" })
        const prod = yield* create(admin, orgId, "  Production  ")
        expect(prod).toMatchObject({ orgId, name: "Production", cloud: "aws", region: "us-east-1", privateLinkId: null, privateLinkStatus: null, awsAccountConnection: null, dbProviderApiKey: null })
        expect(prod.id).toMatch(/^env_/)
        const linked = yield* create(admin, orgId, "Private", { privateLinkId: "vpce-svc-0123" })
        expect(linked).toMatchObject({ privateLinkId: "vpce-svc-0123", privateLinkStatus: "active" })
        expect((yield* envs.list(admin, orgId)).map((e) => e.id)).toEqual([prod.id, linked.id])
        expect(yield* envs.get(admin, linked.id)).toEqual(linked)
        expect(yield* Effect.flip(create(admin, orgId, "production"))).toMatchObject({ _tag: "EnvironmentNameTaken" })
        expect(yield* Effect.flip(envs.create(admin, { orgId, name: "x", cloud: "aws", region: "mars-1" }))).toMatchObject({ _tag: "InvalidArgument", field: "region" })
        expect(yield* Effect.flip(create(admin, orgId, " "))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
      })
    )

    it.effect("permissions: read for every member, manage for admins; other orgs' environments are not found", () =>
      Effect.gen(function* () {
        const envs = yield* Environments
        const orgId = (yield* newOrgId())
        const owner = yield* session({ [orgId]: "owner" })
        const member = yield* session({ [orgId]: "member" })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        const env = yield* create(owner, orgId)
        expect(yield* envs.list(member, orgId)).toHaveLength(1)
        expect(yield* Effect.flip(create(member, orgId, "m"))).toMatchObject({ _tag: "PermissionDenied", permission: "environments.manage" })
        expect(yield* Effect.flip(envs.createAwsSetupLink(member, { environmentId: env.id, awsAccountId: "123456789012" }))).toMatchObject({ _tag: "PermissionDenied" })
        expect(yield* Effect.flip(envs.list(stranger, orgId))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(envs.get(stranger, env.id))).toMatchObject({ _tag: "EnvironmentNotFound" })
        expect(yield* Effect.flip(envs.createAwsSetupLink(stranger, { environmentId: env.id, awsAccountId: "123456789012" }))).toMatchObject({ _tag: "EnvironmentNotFound" })
        expect(yield* Effect.flip(envs.rotateDbProviderApiKey(stranger, { environmentId: env.id, apiKey: Redacted.make("secret-key-1") }))).toMatchObject({ _tag: "EnvironmentNotFound" })
        const otherKey = yield* apiKey((yield* newOrgId()), ["environments.read", "environments.manage"])
        expect(yield* Effect.flip(envs.get(otherKey, env.id))).toMatchObject({ _tag: "EnvironmentNotFound" })
        const readKey = yield* apiKey(orgId, ["environments.read"])
        expect(yield* envs.get(readKey, env.id)).toMatchObject({ id: env.id })
        expect(yield* Effect.flip(create(readKey, orgId, "k"))).toMatchObject({ _tag: "PermissionDenied" })
      })
    )

    it.effect("the plan's environment limit refuses the next create", () =>
      Effect.gen(function* () {
        // On billing's free plan: one environment.
        const orgId = yield* newOrgId("free")
        const owner = yield* session({ [orgId]: "owner" })
        yield* create(owner, orgId, "one")
        expect(yield* Effect.flip(create(owner, orgId, "two"))).toMatchObject({ _tag: "PlanLimitReached", limit: 1, planId: "free" })
      })
    )

    it.effect("AWS setup link and account connection: link shape, ARN, account and external id checks", () =>
      Effect.gen(function* () {
        const envs = yield* Environments
        const orgId = (yield* newOrgId())
        const admin = yield* session({ [orgId]: "admin" })
        const env = yield* envs.create(admin, { orgId, name: "aws", cloud: "aws", region: "eu-west-2" })
        const link = yield* envs.createAwsSetupLink(admin, { environmentId: env.id, awsAccountId: "123456789012" })
        const url = new URL(link.url)
        expect(url.origin).toBe("https://console.aws.amazon.com")
        expect(url.searchParams.get("region")).toBe("eu-west-2")
        const fragment = new URLSearchParams(url.hash.split("?")[1])
        expect(url.hash.startsWith("#/stacks/quickcreate?")).toBe(true)
        expect(fragment.get("templateURL")).toBe("https://example.com/role.yaml")
        expect(fragment.get("param_ExternalId")).toBe(link.externalId)
        expect(link.connection).toMatchObject({ environmentId: env.id, awsAccountId: "123456789012", status: "pending", roleArn: null })
        expect(yield* Effect.flip(envs.createAwsSetupLink(admin, { environmentId: env.id, awsAccountId: "1234" }))).toMatchObject({ _tag: "InvalidArgument" })

        const id = link.connection.id
        const good = "arn:aws:iam::123456789012:role/scion/ScionCrossAccount"
        const attempt = (roleArn: string, externalId = link.externalId) => Effect.flip(envs.updateAwsAccountConnection(admin, { connectionId: id, roleArn, externalId }))
        expect(yield* attempt("arn:aws:iam::123456789012:user/bob")).toMatchObject({ _tag: "InvalidRoleArn" })
        expect(yield* attempt("arn:aws:iam::12345:role/x")).toMatchObject({ _tag: "InvalidRoleArn" })
        expect(yield* attempt("not an arn")).toMatchObject({ _tag: "InvalidRoleArn" })
        expect(yield* attempt("arn:aws:iam::999999999999:role/x")).toMatchObject({ _tag: "AwsAccountMismatch", expected: "123456789012", actual: "999999999999" })
        expect(yield* attempt(good, "scion-wrong")).toMatchObject({ _tag: "ExternalIdMismatch" })
        const connected = yield* envs.updateAwsAccountConnection(admin, { connectionId: id, roleArn: good, externalId: link.externalId })
        expect(connected).toMatchObject({ id, status: "connected", roleArn: good })
        expect(connected.connectedAt).toBeInstanceOf(Date)
        expect((yield* envs.get(admin, env.id)).awsAccountConnection).toMatchObject({ id, status: "connected" })

        // A new link replaces the connection: the old id is gone, the new external id is required.
        const again = yield* envs.createAwsSetupLink(admin, { environmentId: env.id, awsAccountId: "210987654321" })
        expect(again.externalId).not.toBe(link.externalId)
        expect(yield* Effect.flip(envs.updateAwsAccountConnection(admin, { connectionId: id, roleArn: good, externalId: link.externalId }))).toMatchObject({
          _tag: "AwsAccountConnectionNotFound"
        })
        const stranger = yield* session({ [(yield* newOrgId())]: "owner" })
        expect(
          yield* Effect.flip(envs.updateAwsAccountConnection(stranger, { connectionId: again.connection.id, roleArn: "arn:aws:iam::210987654321:role/x", externalId: again.externalId }))
        ).toMatchObject({ _tag: "AwsAccountConnectionNotFound" })
      })
    )

    it("parses role ARNs", () => {
      expect(parseRoleArn("arn:aws:iam::123456789012:role/a/b/Name_1+=,.@-")).toEqual({ accountId: "123456789012", path: "/a/b/", name: "Name_1+=,.@-" })
      expect(parseRoleArn("arn:aws:iam::123456789012:role/Name")).toEqual({ accountId: "123456789012", path: "/", name: "Name" })
      expect(parseRoleArn("arn:aws:iam::123456789012:role/")).toBeUndefined()
      expect(parseRoleArn("arn:aws:s3:::bucket")).toBeUndefined()
    })

    it.effect("rotating the db provider API key stores only ciphertext and never returns the key", () =>
      Effect.gen(function* () {
        const envs = yield* Environments
        const sql = yield* SqlClient.SqlClient
        const orgId = (yield* newOrgId())
        const admin = yield* session({ [orgId]: "admin" })
        const env = yield* create(admin, orgId, "keys")
        const first = yield* envs.rotateDbProviderApiKey(admin, { environmentId: env.id, apiKey: Redacted.make("dbp_first_key_AAAA") })
        expect(first.info).toMatchObject({ last4: "AAAA", fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/) })
        expect(JSON.stringify(first)).not.toContain("dbp_first_key")
        const second = yield* envs.rotateDbProviderApiKey(admin, { environmentId: env.id, apiKey: Redacted.make("dbp_second_key_BBBB") })
        expect(second.info.last4).toBe("BBBB")
        expect(second.info.fingerprint).not.toBe(first.info.fingerprint)
        expect(second.info.rotatedAt.getTime()).toBeGreaterThanOrEqual(first.info.rotatedAt.getTime())
        expect((yield* envs.get(admin, env.id)).dbProviderApiKey).toEqual(second.info)

        const rows = yield* sql<{ envelope: unknown; key_id: string }>`select envelope, key_id from secrets where owner_id = ${env.id}`
        expect(rows).toHaveLength(1)
        expect(rows[0]!.key_id).toBe("t1")
        const dump = JSON.stringify(yield* sql`select * from secrets`) + JSON.stringify(yield* sql`select * from environments`)
        expect(dump).not.toContain("dbp_first_key")
        expect(dump).not.toContain("dbp_second_key")

        const read = yield* envs.readDbProviderApiKey(env)
        expect(Option.map(read, Redacted.value)).toEqual(Option.some("dbp_second_key_BBBB"))
        expect(yield* Effect.flip(envs.rotateDbProviderApiKey(admin, { environmentId: env.id, apiKey: Redacted.make("short") }))).toMatchObject({ _tag: "InvalidArgument" })

        // Copying the envelope onto another environment does not make it readable there (associated data).
        const other = yield* create(admin, orgId, "other")
        yield* sql`insert into secrets (owner_id, name, envelope, key_id, fingerprint, last4) select ${other.id}, name, envelope, key_id, fingerprint, last4 from secrets where owner_id = ${env.id}`
        expect(yield* Effect.flip(envs.readDbProviderApiKey(other))).toMatchObject({ _tag: "SecretStoreFailure" })
      })
    )
  })
})
