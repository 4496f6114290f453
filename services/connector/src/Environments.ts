import { transactional, tracedFn } from "@scion/kit"
import { createHash, randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql"
import type { Principal } from "@scion/kit"
import { Effect, Option, Redacted } from "effect"
import { CloudAccounts } from "./CloudAccounts.js"
import {
  AwsAccountConnectionNotFound,
  EnvironmentNameTaken,
  EnvironmentNotFound,
  InvalidArgument
} from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { Cloud, Environment } from "./domain/models.js"
import { Entitlements } from "./Entitlements.js"
import { DB_PROVIDER_API_KEY, EnvironmentsRepo } from "./EnvironmentsRepo.js"
import { type AccessError, type EnvironmentPermission, OrgAccess } from "./Identity.js"
import { SecretStore } from "./secrets/SecretStore.js"

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
const REGION = /^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$/
const AWS_ACCOUNT_ID = /^\d{12}$/

const invalid = (field: string, message: string) => Effect.fail(new InvalidArgument({ field, message }))

export const environmentName = (value: string): Effect.Effect<string, InvalidArgument> => {
  const name = value.trim()
  if (name.length < 1 || name.length > 100) return invalid("name", "name must be 1 to 100 characters")
  if (CONTROL.test(name)) return invalid("name", "name must not contain control characters")
  return Effect.succeed(name)
}

/** SHA-256 of the key, first 16 hex characters: enough to recognise it, useless to recover it. */
export const fingerprintOf = (value: string) => createHash("sha256").update(value).digest("hex").slice(0, 16)

/** The associated data binding an environment's secret to that environment and that use. */
export const secretAad = (environmentId: string, name: string) => `environment:${environmentId}:${name}`

/**
 * Environments: placement of an org's engines. Lists and creates in an org the caller does not
 * belong to are NOT_A_MEMBER; a single environment or connection of another org is NOT_FOUND.
 */
export class Environments extends Effect.Service<Environments>()("@scion/connector/Environments", {
  effect: Effect.gen(function* () {
    const access = yield* OrgAccess
    const repo = yield* EnvironmentsRepo
    const entitlements = yield* Entitlements
    const cloud = yield* CloudAccounts
    const secrets = yield* SecretStore
    const sql = yield* SqlClient.SqlClient

    const transaction = transactional(sql)

    /** Another org's resource answers as a missing one: NOT_A_MEMBER becomes the not-found error. */
    const hidden =
      <E>(notFound: () => E) =>
      (self: Effect.Effect<void, AccessError>) =>
        Effect.catchTag(self, "NotAMember", () => Effect.fail(notFound()))

    /** The environment if the caller may see it with `permission`; other orgs' are not found. */
    const visible = (principal: Principal, environmentId: string, permission: EnvironmentPermission) =>
      Effect.gen(function* () {
        const found = yield* repo.find(environmentId)
        if (Option.isNone(found)) return yield* new EnvironmentNotFound({ environmentId })
        yield* access.require(principal, found.value.orgId, permission).pipe(hidden(() => new EnvironmentNotFound({ environmentId })))
        return found.value
      })

    const reread = (environmentId: string) =>
      Effect.flatMap(repo.find(environmentId), Option.match({ onNone: () => Effect.fail(new EnvironmentNotFound({ environmentId })), onSome: Effect.succeed }))

    const list = tracedFn("Environments.list")(function* (principal: Principal, orgId: string) {
      yield* access.require(principal, orgId, "environments.read")
      return yield* repo.listByOrg(orgId)
    })

    const get = tracedFn("Environments.get")(function* (principal: Principal, environmentId: string) {
      return yield* visible(principal, environmentId, "environments.read")
    })

    /**
     * Needs environments.manage and room in the org's plan. With a private link id the link is
     * active at once: the id names a link the org already set up with its cloud.
     */
    const create = tracedFn("Environments.create")(function* (
      principal: Principal,
      input: { orgId: string; name: string; cloud: Cloud; region: string; privateLinkId?: string | undefined }
    ) {
      yield* access.require(principal, input.orgId, "environments.manage")
      const name = yield* environmentName(input.name)
      if (!REGION.test(input.region)) yield* invalid("region", "region must be an AWS region code such as us-east-1")
      const privateLinkId = input.privateLinkId?.trim() || null
      if (privateLinkId !== null && (privateLinkId.length > 200 || CONTROL.test(privateLinkId))) {
        yield* invalid("private_link_id", "private_link_id must be at most 200 characters without control characters")
      }
      const id = yield* Ids.environment
      yield* transaction(
        Effect.gen(function* () {
          yield* repo.lockOrg(input.orgId)
          yield* entitlements.requireRoom(input.orgId, "environments", yield* repo.countByOrg(input.orgId))
          const inserted = yield* repo.insert({
            id,
            orgId: input.orgId,
            name,
            cloud: input.cloud,
            region: input.region,
            privateLinkId,
            privateLinkStatus: privateLinkId === null ? null : "active",
            createdBy: principal.userId
          })
          if (!inserted) return yield* new EnvironmentNameTaken({ orgId: input.orgId, name })
        })
      )
      yield* Effect.logInfo("environment created").pipe(Effect.annotateLogs({ org_id: input.orgId, environment_id: id }))
      return yield* reread(id)
    })

    /**
     * A pending AWS account connection with a fresh external id (replacing an earlier one of the
     * environment), and the quick-create link that makes the role trusting it.
     */
    const createAwsSetupLink = tracedFn("Environments.createAwsSetupLink")(function* (principal: Principal, input: { environmentId: string; awsAccountId: string }) {
      const environment = yield* visible(principal, input.environmentId, "environments.manage")
      if (!AWS_ACCOUNT_ID.test(input.awsAccountId)) yield* invalid("aws_account_id", "aws_account_id must be a 12-digit AWS account id")
      const externalId = `scion-${randomBytes(24).toString("base64url")}`
      const connection = yield* repo.upsertConnection({
        id: yield* Ids.awsAccountConnection,
        environmentId: environment.id,
        orgId: environment.orgId,
        awsAccountId: input.awsAccountId,
        externalId
      })
      const url = yield* cloud.setupLink({ region: environment.region, environmentId: environment.id, awsAccountId: input.awsAccountId, externalId })
      yield* Effect.logInfo("aws setup link issued").pipe(Effect.annotateLogs({ environment_id: environment.id, aws_account_connection_id: connection.id }))
      return { url, externalId, connection }
    })

    /** Completes a connection: the role is checked through CloudAccounts, then recorded. */
    const updateAwsAccountConnection = tracedFn("Environments.updateAwsAccountConnection")(function* (
      principal: Principal,
      input: { connectionId: string; roleArn: string; externalId: string }
    ) {
      const notFound = () => new AwsAccountConnectionNotFound({ connectionId: input.connectionId })
      const found = yield* repo.findConnection(input.connectionId)
      if (Option.isNone(found)) return yield* notFound()
      yield* access.require(principal, found.value.orgId, "environments.manage").pipe(hidden(notFound))
      const roleArn = input.roleArn.trim()
      yield* cloud.verifyRole({ awsAccountId: found.value.awsAccountId, expectedExternalId: found.value.externalId, roleArn, externalId: input.externalId })
      const connected = yield* repo.connect(found.value.id, roleArn)
      if (Option.isNone(connected)) return yield* notFound()
      yield* Effect.logInfo("aws account connected").pipe(Effect.annotateLogs({ aws_account_connection_id: found.value.id, environment_id: found.value.environmentId }))
      return connected.value
    })

    /**
     * Replaces the environment's database-provider API key, encrypted with the active master key
     * and bound to the environment. The old envelope is overwritten; neither key is returned.
     */
    const rotateDbProviderApiKey = tracedFn("Environments.rotateDbProviderApiKey")(function* (
      principal: Principal,
      input: { environmentId: string; apiKey: Redacted.Redacted<string> }
    ) {
      const environment = yield* visible(principal, input.environmentId, "environments.manage")
      const key = Redacted.value(input.apiKey).trim()
      if (key.length < 8 || key.length > 4096) yield* invalid("api_key", "api_key must be 8 to 4096 characters")
      const envelope = yield* secrets.encrypt(Redacted.make(key), secretAad(environment.id, DB_PROVIDER_API_KEY))
      const info = yield* transaction(
        Effect.zipLeft(
          repo.putSecret({ ownerId: environment.id, name: DB_PROVIDER_API_KEY, envelope, fingerprint: fingerprintOf(key), last4: key.slice(-4) }),
          repo.touch(environment.id)
        )
      )
      yield* Effect.logInfo("db provider api key rotated").pipe(Effect.annotateLogs({ environment_id: environment.id, key_id: envelope.key_id }))
      return { environmentId: environment.id, info }
    })

    /**
     * The decrypted key for this unit's own use (calling the provider); never exposed over RPC.
     * None when the environment has none.
     */
    const readDbProviderApiKey = tracedFn("Environments.readDbProviderApiKey")(function* (environment: Pick<Environment, "id">) {
      const envelope = yield* repo.getSecret(environment.id, DB_PROVIDER_API_KEY)
      if (Option.isNone(envelope)) return Option.none<Redacted.Redacted<string>>()
      return Option.some(yield* secrets.decrypt(envelope.value, secretAad(environment.id, DB_PROVIDER_API_KEY)))
    })

    return { list, get, create, createAwsSetupLink, updateAwsAccountConnection, rotateDbProviderApiKey, readDbProviderApiKey } as const
  })
}) {}
