import { timingSafeEqual, createHash } from "node:crypto"
import { Config, Context, Effect, Layer } from "effect"
import { AwsAccountMismatch, ExternalIdMismatch, InvalidRoleArn } from "./domain/errors.js"

/** arn:aws:iam::<12 digits>:role/<optional path/>name — IAM's own character rules for paths and names. */
const ROLE_ARN = /^arn:aws(-us-gov|-cn)?:iam::(\d{12}):role\/((?:[\u0021-\u007e]{1,512}\/)?)([\w+=,.@-]{1,64})$/

/** The account id of a well-formed IAM role ARN, or None. */
export const parseRoleArn = (roleArn: string): { readonly accountId: string; readonly path: string; readonly name: string } | undefined => {
  const match = ROLE_ARN.exec(roleArn)
  if (match === null) return undefined
  return { accountId: match[2]!, path: `/${match[3] ?? ""}`, name: match[4]! }
}

// Constant-time comparison of the caller's external id with the stored one.
const sameSecret = (a: string, b: string) => timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest())

export interface SetupLinkInput {
  readonly region: string
  readonly environmentId: string
  readonly awsAccountId: string
  readonly externalId: string
}

export interface RoleCheck {
  readonly awsAccountId: string
  readonly expectedExternalId: string
  readonly roleArn: string
  readonly externalId: string
}

/**
 * The cloud as this unit needs it for environments: a link that creates the cross-account role,
 * and a check that a role is usable. The default adapter (`offline`) does not call AWS: it
 * validates what can be validated without it (ARN syntax, the ARN's account is the connection's,
 * the external id is the issued one). An adapter that calls sts:AssumeRole with the external id
 * is configuration away.
 */
export class CloudAccounts extends Context.Tag("@scion/connector/CloudAccounts")<
  CloudAccounts,
  {
    readonly setupLink: (input: SetupLinkInput) => Effect.Effect<string>
    readonly verifyRole: (input: RoleCheck) => Effect.Effect<void, InvalidRoleArn | AwsAccountMismatch | ExternalIdMismatch>
  }
>() {
  static offline(options: { readonly templateUrl: string; readonly scionAwsAccountId: string }): Layer.Layer<CloudAccounts> {
    return Layer.succeed(
      CloudAccounts,
      CloudAccounts.of({
        setupLink: (input) =>
          Effect.sync(() => {
            const params = new URLSearchParams({
              templateURL: options.templateUrl,
              stackName: `scion-${input.environmentId.replace(/_/g, "-")}`,
              param_ExternalId: input.externalId,
              param_ScionAwsAccountId: options.scionAwsAccountId
            })
            return `https://console.aws.amazon.com/cloudformation/home?region=${encodeURIComponent(input.region)}#/stacks/quickcreate?${params.toString()}`
          }),
        verifyRole: (input) =>
          Effect.gen(function* () {
            const arn = parseRoleArn(input.roleArn)
            if (arn === undefined) return yield* new InvalidRoleArn({ roleArn: input.roleArn })
            if (arn.accountId !== input.awsAccountId) return yield* new AwsAccountMismatch({ expected: input.awsAccountId, actual: arn.accountId })
            if (!sameSecret(input.externalId, input.expectedExternalId)) return yield* new ExternalIdMismatch()
          })
      })
    )
  }

  /**
   * AWS_SETUP_TEMPLATE_URL (the CloudFormation template of the cross-account role) and
   * SCION_AWS_ACCOUNT_ID (the account the role trusts), with defaults for local use.
   */
  static readonly layerConfig: Layer.Layer<CloudAccounts> = Layer.unwrapEffect(
    Effect.map(
      Config.all({
        templateUrl: Config.string("AWS_SETUP_TEMPLATE_URL").pipe(
          Config.withDefault("https://scion-public.s3.amazonaws.com/cloudformation/scion-cross-account-role.yaml")
        ),
        scionAwsAccountId: Config.string("SCION_AWS_ACCOUNT_ID").pipe(Config.withDefault("000000000000"))
      }),
      CloudAccounts.offline
    )
  ).pipe(Layer.orDie)
}
