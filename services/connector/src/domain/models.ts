export type Cloud = "aws"
export type PrivateLinkStatus = "pending" | "active"
export type AwsAccountConnectionStatus = "pending" | "connected"

export interface AwsAccountConnection {
  readonly id: string
  readonly environmentId: string
  readonly orgId: string
  readonly awsAccountId: string
  /** Not a secret (AWS: the external id guards against the confused deputy, not disclosure). */
  readonly externalId: string
  readonly roleArn: string | null
  readonly status: AwsAccountConnectionStatus
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly connectedAt: Date | null
}

/** What is known of a stored key; the key itself never leaves the secret store. */
export interface ApiKeyInfo {
  readonly fingerprint: string
  readonly last4: string
  readonly rotatedAt: Date
}

export interface Environment {
  readonly id: string
  readonly orgId: string
  readonly name: string
  readonly cloud: Cloud
  readonly region: string
  readonly privateLinkId: string | null
  readonly privateLinkStatus: PrivateLinkStatus | null
  readonly awsAccountConnection: AwsAccountConnection | null
  readonly dbProviderApiKey: ApiKeyInfo | null
  readonly createdBy: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}
