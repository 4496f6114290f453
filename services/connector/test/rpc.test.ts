import { describe, expect, layer } from "@effect/vitest"
import { Code, grpcTransport, makeEffectClient, serveHttp2 } from "@scion/kit"
import { AwsAccountConnectionStatus, CloudProvider, EnvironmentService, PrivateLinkStatus } from "@scion/proto/scion/connector/v1/environment_pb"
import { Effect } from "effect"
import { connectorRoutes } from "../src/index.js"
import { apiKey, as, connectorTestLayer, newOrgId, session } from "./support.js"


const client = Effect.gen(function* () {
  const served = yield* serveHttp2({ port: 0, host: "127.0.0.1", routes: yield* connectorRoutes })
  return makeEffectClient(EnvironmentService, yield* grpcTransport(served.url))
})

describe("EnvironmentService over a real port", () => {
  layer(connectorTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.scoped("serves every RPC with typed errors, reasons and metadata", () =>
      Effect.gen(function* () {
        const environments = yield* client
        const orgId = (yield* newOrgId())
        const admin = yield* session({ [orgId]: "admin" })
        const viewer = yield* session({ [orgId]: "viewer" })

        expect(yield* Effect.flip(environments.listEnvironments({ orgId }))).toMatchObject({ code: Code.Unauthenticated, reason: "UNAUTHENTICATED" })

        const created = yield* as(admin)(
          environments.createEnvironment({ orgId, name: "prod", cloud: CloudProvider.AWS, region: "us-west-2", privateLinkId: "vpce-svc-1" })
        )
        expect(created.environment).toMatchObject({ orgId, name: "prod", cloud: CloudProvider.AWS, privateLinkId: "vpce-svc-1", privateLinkStatus: PrivateLinkStatus.ACTIVE })
        const id = created.environment!.environmentId
        expect(yield* Effect.flip(as(admin)(environments.createEnvironment({ orgId, name: "x", region: "us-west-2" })))).toMatchObject({
          code: Code.InvalidArgument,
          reason: "INVALID_ARGUMENT",
          metadata: { field: "cloud" }
        })
        expect(yield* Effect.flip(as(admin)(environments.createEnvironment({ orgId, name: "PROD", cloud: CloudProvider.AWS, region: "us-west-2" })))).toMatchObject({
          code: Code.AlreadyExists,
          reason: "ENVIRONMENT_NAME_TAKEN"
        })
        expect(yield* Effect.flip(as(viewer)(environments.createEnvironment({ orgId, name: "v", cloud: CloudProvider.AWS, region: "us-west-2" })))).toMatchObject({
          code: Code.PermissionDenied,
          reason: "PERMISSION_DENIED",
          metadata: { permission: "environments.manage", org_id: orgId }
        })
        expect((yield* as(viewer)(environments.getEnvironment({ environmentId: id }))).environment?.privateLinkStatus).toBe(PrivateLinkStatus.ACTIVE)
        const stranger = yield* apiKey((yield* newOrgId()), ["environments.read"])
        expect(yield* Effect.flip(as(stranger)(environments.getEnvironment({ environmentId: id })))).toMatchObject({ code: Code.NotFound, reason: "ENVIRONMENT_NOT_FOUND" })
        expect(yield* Effect.flip(as(stranger)(environments.listEnvironments({ orgId })))).toMatchObject({ code: Code.PermissionDenied, reason: "NOT_A_MEMBER" })

        const link = yield* as(admin)(environments.createAwsSetupLink({ environmentId: id, awsAccountId: "123456789012" }))
        expect(link.url).toContain("param_ExternalId=")
        const connectionId = link.awsAccountConnection!.awsAccountConnectionId
        expect(
          yield* Effect.flip(as(admin)(environments.updateAwsAccountConnection({ awsAccountConnectionId: connectionId, roleArn: "nope", externalId: link.externalId })))
        ).toMatchObject({ code: Code.InvalidArgument, reason: "INVALID_ROLE_ARN" })
        const connected = yield* as(admin)(
          environments.updateAwsAccountConnection({ awsAccountConnectionId: connectionId, roleArn: "arn:aws:iam::123456789012:role/Scion", externalId: link.externalId })
        )
        expect(connected.awsAccountConnection).toMatchObject({ status: AwsAccountConnectionStatus.CONNECTED, roleArn: "arn:aws:iam::123456789012:role/Scion" })

        const rotated = yield* as(admin)(environments.rotateDbProviderApiKey({ environmentId: id, apiKey: "provider-key-9876" }))
        expect(rotated.dbProviderApiKey).toMatchObject({ last4: "9876" })
        expect(JSON.stringify(rotated, (_key, value) => (typeof value === "bigint" ? value.toString() : value))).not.toContain("provider-key")
      })
    )
  })
})
