import { group } from "../serve/handlers.js"
import * as pb from "@scion/proto/scion/connector/v1/code_host_pb"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller, Authenticated, rateLimitKey } from "../Authentication.js"
import { RateLimits } from "../RateLimits.js"
import type * as H from "../codeHostSchemas.js"
import { requiredFrom } from "./present.js"

/** The connector unit answering an unknown status is a bug: it throws, the edge answers 500. */
const required = requiredFrom("connector")

const repoStatuses = {
  [pb.RepoValidationStatus.UNSPECIFIED]: undefined,
  [pb.RepoValidationStatus.VALID]: "valid",
  [pb.RepoValidationStatus.PRIVATE]: "private",
  [pb.RepoValidationStatus.INVALID]: "invalid",
  [pb.RepoValidationStatus.ERROR]: "error"
} as const satisfies Record<pb.RepoValidationStatus, typeof H.RepoValidation.Type["status"] | undefined>

const authStatuses = {
  [pb.AuthValidationStatus.UNSPECIFIED]: undefined,
  [pb.AuthValidationStatus.VALID]: "valid",
  [pb.AuthValidationStatus.INVALID]: "invalid",
  [pb.AuthValidationStatus.ERROR]: "error"
} as const satisfies Record<pb.AuthValidationStatus, typeof H.AuthValidation.Type["status"] | undefined>

const authTypes = { pat: pb.CodeHostAuthType.PAT, oauth: pb.CodeHostAuthType.OAUTH } as const satisfies Record<
  typeof H.ValidateAuthRequest.Type["auth_type"],
  pb.CodeHostAuthType
>

/** The helpers call out to GitHub: a smaller bucket per caller, beside the general one. */
const codeHostQuota = Effect.flatMap(Effect.all([RateLimits, Authenticated]), ([limits, { principal }]) => limits.take("code_host", rateLimitKey(principal)))

export const CodeHostLive = group(Api, "codeHost", (handlers) =>
  handlers
    .handle("validateRepo", ({ payload }) =>
      Effect.zipRight(
        codeHostQuota,
        asCaller((u) =>
        u.codeHost.validateRepo({
          orgId: payload.org_id ?? "",
          repo: payload.repo,
          ...(payload.code_host_token != null && payload.code_host_token !== "" ? { codeHostToken: payload.code_host_token } : {})
        })
      ).pipe(Effect.map((r) => ({ valid: r.valid, status: required(repoStatuses[r.status], "a known repo status"), message: r.message })))
      )
    )
    .handle("validateAuth", ({ payload }) =>
      Effect.zipRight(
        codeHostQuota,
        asCaller((u) =>
        u.codeHost.validateAuth({
          orgId: payload.org_id ?? "",
          authType: authTypes[payload.auth_type],
          ...(payload.auth_type === "pat"
            ? { accessToken: payload.access_token }
            : { appId: String(payload.app_id), installationId: String(payload.installation_id), privateKey: payload.private_key })
        })
      ).pipe(
        Effect.map((r) => ({
          valid: r.valid,
          status: required(authStatuses[r.status], "a known auth status"),
          message: r.message,
          username: r.username ?? null
        }))
      )
      )
    )
)
