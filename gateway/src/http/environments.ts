import { group } from "../serve/handlers.js"
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import * as pb from "@scion/proto/scion/connector/v1/environment_pb"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import type * as E from "../environmentSchemas.js"
import { requiredFrom } from "./present.js"

/** The connector unit leaving out a required field is a bug: it throws, the edge answers 500. */
const required = requiredFrom("connector")
const iso = (ts: Timestamp | undefined) => timestampDate(required(ts, "a timestamp")).toISOString()
const isoOrNull = (ts: Timestamp | undefined) => (ts === undefined ? null : timestampDate(ts).toISOString())

const clouds = {
  [pb.CloudProvider.UNSPECIFIED]: undefined,
  [pb.CloudProvider.AWS]: "aws"
} as const satisfies Record<pb.CloudProvider, typeof E.Cloud.Type | undefined>

const cloudsToProto = { aws: pb.CloudProvider.AWS } as const satisfies Record<typeof E.Cloud.Type, pb.CloudProvider>

const privateLinkStatuses = {
  [pb.PrivateLinkStatus.UNSPECIFIED]: null,
  [pb.PrivateLinkStatus.PENDING]: "pending",
  [pb.PrivateLinkStatus.ACTIVE]: "active"
} as const satisfies Record<pb.PrivateLinkStatus, "pending" | "active" | null>

const connectionStatuses = {
  [pb.AwsAccountConnectionStatus.UNSPECIFIED]: undefined,
  [pb.AwsAccountConnectionStatus.PENDING]: "pending",
  [pb.AwsAccountConnectionStatus.CONNECTED]: "connected"
} as const satisfies Record<pb.AwsAccountConnectionStatus, "pending" | "connected" | undefined>

export const awsAccountConnection = (c: pb.AwsAccountConnection | undefined): typeof E.AwsAccountConnection.Type => {
  const v = required(c, "aws_account_connection")
  return {
    aws_account_connection_id: v.awsAccountConnectionId,
    environment_id: v.environmentId,
    aws_account_id: v.awsAccountId,
    role_arn: v.roleArn ?? null,
    status: required(connectionStatuses[v.status], "a connection status"),
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt),
    connected_at: isoOrNull(v.connectedAt)
  }
}

const apiKeyInfo = (k: pb.DbProviderApiKeyInfo): typeof E.DbProviderApiKeyInfo.Type => ({ fingerprint: k.fingerprint, last4: k.last4, rotated_at: iso(k.rotatedAt) })

export const environment = (e: pb.Environment | undefined): typeof E.Environment.Type => {
  const v = required(e, "environment")
  return {
    environment_id: v.environmentId,
    org_id: v.orgId,
    name: v.name,
    cloud: required(clouds[v.cloud], "a cloud"),
    region: v.region,
    private_link_id: v.privateLinkId ?? null,
    private_link_status: privateLinkStatuses[v.privateLinkStatus],
    aws_account_connection: v.awsAccountConnection === undefined ? null : awsAccountConnection(v.awsAccountConnection),
    db_provider_api_key: v.dbProviderApiKey === undefined ? null : apiKeyInfo(v.dbProviderApiKey),
    created_by: v.createdBy ?? null,
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt)
  }
}

export const EnvironmentsLive = group(Api, "environments", (handlers) =>
  handlers
    .handle("list", ({ urlParams }) =>
      asCaller((u) => u.environments.listEnvironments({ orgId: urlParams.org_id })).pipe(Effect.map((r) => ({ environments: r.environments.map(environment) })))
    )
    .handle("create", ({ payload }) =>
      asCaller((u) =>
        u.environments.createEnvironment({
          orgId: payload.org_id,
          name: payload.name,
          cloud: cloudsToProto[payload.cloud],
          region: payload.region,
          ...(payload.private_link_id != null ? { privateLinkId: payload.private_link_id } : {})
        })
      ).pipe(Effect.map((r) => environment(r.environment)))
    )
    .handle("createAwsSetupLink", ({ payload }) =>
      asCaller((u) => u.environments.createAwsSetupLink({ environmentId: payload.environment_id, awsAccountId: payload.aws_account_id })).pipe(
        Effect.map((r) => ({ url: r.url, external_id: r.externalId, aws_account_connection: awsAccountConnection(r.awsAccountConnection) }))
      )
    )
    .handle("updateAwsAccountConnection", ({ path, payload }) =>
      asCaller((u) =>
        u.environments.updateAwsAccountConnection({
          awsAccountConnectionId: path.aws_account_connection_id,
          roleArn: payload.role_arn,
          externalId: payload.external_id
        })
      ).pipe(Effect.map((r) => awsAccountConnection(r.awsAccountConnection)))
    )
    .handle("rotateDbProviderApiKey", ({ path, payload }) =>
      asCaller((u) => u.environments.rotateDbProviderApiKey({ environmentId: path.environment_id, apiKey: payload.api_key })).pipe(
        Effect.map((r) => ({ environment_id: r.environmentId, db_provider_api_key: apiKeyInfo(required(r.dbProviderApiKey, "db_provider_api_key")) }))
      )
    )
)
