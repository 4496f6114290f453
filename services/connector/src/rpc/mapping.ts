import type { MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import {
  AwsAccountConnectionStatus,
  type AwsAccountConnectionSchema,
  CloudProvider,
  type DbProviderApiKeyInfoSchema,
  type EnvironmentSchema,
  PrivateLinkStatus
} from "@scion/proto/scion/connector/v1/environment_pb"
import type { ApiKeyInfo, AwsAccountConnection, Cloud, Environment } from "../domain/models.js"

const ts = timestampFromDate

export const cloudFromProto = { [CloudProvider.UNSPECIFIED]: undefined, [CloudProvider.AWS]: "aws" } as const satisfies Record<CloudProvider, Cloud | undefined>

const cloudToProto = { aws: CloudProvider.AWS } as const satisfies Record<Cloud, CloudProvider>

const privateLinkToProto = { pending: PrivateLinkStatus.PENDING, active: PrivateLinkStatus.ACTIVE } as const

const connectionStatusToProto = {
  pending: AwsAccountConnectionStatus.PENDING,
  connected: AwsAccountConnectionStatus.CONNECTED
} as const satisfies Record<AwsAccountConnection["status"], AwsAccountConnectionStatus>

/** The external id is not part of reads: it was handed out with the setup link. */
export const connectionToProto = (c: AwsAccountConnection): MessageInitShape<typeof AwsAccountConnectionSchema> => ({
  awsAccountConnectionId: c.id,
  environmentId: c.environmentId,
  awsAccountId: c.awsAccountId,
  ...(c.roleArn !== null ? { roleArn: c.roleArn } : {}),
  status: connectionStatusToProto[c.status],
  createdAt: ts(c.createdAt),
  updatedAt: ts(c.updatedAt),
  ...(c.connectedAt !== null ? { connectedAt: ts(c.connectedAt) } : {})
})

export const apiKeyInfoToProto = (k: ApiKeyInfo): MessageInitShape<typeof DbProviderApiKeyInfoSchema> => ({
  fingerprint: k.fingerprint,
  last4: k.last4,
  rotatedAt: ts(k.rotatedAt)
})

export const environmentToProto = (e: Environment): MessageInitShape<typeof EnvironmentSchema> => ({
  environmentId: e.id,
  orgId: e.orgId,
  name: e.name,
  cloud: cloudToProto[e.cloud],
  region: e.region,
  ...(e.privateLinkId !== null ? { privateLinkId: e.privateLinkId } : {}),
  privateLinkStatus: e.privateLinkStatus === null ? PrivateLinkStatus.UNSPECIFIED : privateLinkToProto[e.privateLinkStatus],
  ...(e.awsAccountConnection !== null ? { awsAccountConnection: connectionToProto(e.awsAccountConnection) } : {}),
  ...(e.dbProviderApiKey !== null ? { dbProviderApiKey: apiKeyInfoToProto(e.dbProviderApiKey) } : {}),
  ...(e.createdBy !== null ? { createdBy: e.createdBy } : {}),
  createdAt: ts(e.createdAt),
  updatedAt: ts(e.updatedAt)
})
