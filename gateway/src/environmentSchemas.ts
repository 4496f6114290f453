import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Environments: where an org's engines run, served by the connector unit. The interface shows
// paths only; bodies and responses are ours (services/connector/README.md).
// ---------------------------------------------------------------------------------------------

const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })
const NullableTimestamp = Schema.NullOr(Timestamp)
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({ description: "An opaque id" })

const nameText = "The environment's name: 1..100 characters after trimming; unique in the org (case-insensitive)"
const EnvironmentName = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(100),
    Schema.filter((s) => !/[\u0000-\u001f\u007f-\u009f]/.test(s), { message: () => "Value must not contain control characters" })
  )
).annotations({ description: nameText, jsonSchema: { type: "string", minLength: 1, maxLength: 100, description: nameText } })

export const Cloud = Schema.Literal("aws").annotations({ identifier: "Cloud", description: "The cloud the environment runs in: aws" })

const Region = Schema.String.pipe(
  Schema.pattern(/^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$/, { message: () => "Value is not an AWS region such as us-east-1" })
).annotations({ description: "An AWS region code, e.g. us-east-1" })

const PrivateLinkId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
  description: "The private link (endpoint service) the environment routes through"
})

const AwsAccountId = Schema.String.pipe(
  Schema.pattern(/^\d{12}$/, { message: () => "Value is not a 12-digit AWS account id" })
).annotations({ description: "A 12-digit AWS account id" })

export const EnvironmentPath = Schema.Struct({ environment_id: Id })
export const AwsAccountConnectionPath = Schema.Struct({ aws_account_connection_id: Id })
export const EnvironmentListQuery = Schema.Struct({ org_id: Id.annotations({ description: "The org whose environments to list (required)" }) })

export const CreateEnvironmentRequest = Schema.Struct({
  org_id: Id.annotations({ description: "The org the environment belongs to; an API key may name only its own org" }),
  name: EnvironmentName,
  cloud: Cloud,
  region: Region,
  private_link_id: Schema.optional(Schema.NullOr(PrivateLinkId))
}).annotations({ identifier: "CreateEnvironmentRequest" })

export const CreateAwsSetupLinkRequest = Schema.Struct({
  environment_id: Id.annotations({ description: "The environment the AWS account serves" }),
  aws_account_id: AwsAccountId
}).annotations({ identifier: "CreateAwsSetupLinkRequest" })

export const UpdateAwsAccountConnectionRequest = Schema.Struct({
  role_arn: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)).annotations({
    description: "The cross-account role the stack created: arn:aws:iam::<account id>:role/<path/name>, in the connection's account (400 otherwise)"
  }),
  external_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1224)).annotations({
    description: "The external id the setup link carried (400 when it is not that one)"
  })
}).annotations({ identifier: "UpdateAwsAccountConnectionRequest" })

export const RotateDbProviderApiKeyRequest = Schema.Struct({
  api_key: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(4096)).annotations({
    description: "The new database-provider API key (8..4096 characters); stored encrypted, never returned"
  })
}).annotations({ identifier: "RotateDbProviderApiKeyRequest" })

export const AwsAccountConnection = Schema.Struct({
  aws_account_connection_id: Schema.String,
  environment_id: Schema.String,
  aws_account_id: Schema.String,
  role_arn: Schema.NullOr(Schema.String).annotations({ description: "null until the connection is completed" }),
  status: Schema.Literal("pending", "connected").annotations({ description: "pending: link handed out; connected: role confirmed" }),
  created_at: Timestamp,
  updated_at: Timestamp,
  connected_at: NullableTimestamp
}).annotations({ identifier: "AwsAccountConnection" })

export const DbProviderApiKeyInfo = Schema.Struct({
  fingerprint: Schema.String.annotations({ description: "First 16 hex characters of the key's SHA-256" }),
  last4: Schema.String.annotations({ description: "The key's last four characters" }),
  rotated_at: Timestamp
}).annotations({ identifier: "DbProviderApiKeyInfo", description: "What is known of the stored key; the key itself is never returned" })

export const Environment = Schema.Struct({
  environment_id: Schema.String,
  org_id: Schema.String,
  name: Schema.String,
  cloud: Cloud,
  region: Schema.String,
  private_link_id: Schema.NullOr(Schema.String),
  private_link_status: Schema.NullOr(Schema.Literal("pending", "active")).annotations({
    description: "active: connector creates in this environment must name private_link_id; null: no private link"
  }),
  aws_account_connection: Schema.NullOr(AwsAccountConnection),
  db_provider_api_key: Schema.NullOr(DbProviderApiKeyInfo),
  created_by: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "Environment" })

export const EnvironmentList = Schema.Struct({ environments: Schema.Array(Environment) }).annotations({
  identifier: "EnvironmentList",
  description: "The org's environments, oldest first"
})

export const AwsSetupLink = Schema.Struct({
  url: Schema.String.annotations({ description: "AWS CloudFormation quick-create link that makes the cross-account role" }),
  external_id: Schema.String.annotations({ description: "The external id the role trusts; send it back with the role ARN" }),
  aws_account_connection: AwsAccountConnection
}).annotations({ identifier: "AwsSetupLink" })

export const DbProviderApiKeyRotated = Schema.Struct({
  environment_id: Schema.String,
  db_provider_api_key: DbProviderApiKeyInfo
}).annotations({ identifier: "DbProviderApiKeyRotated" })
