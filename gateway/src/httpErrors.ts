/**
 * The gateway's error bodies, as schemas only: the API definition (Api.ts) and its clients (the
 * SDK) import these without the server's RPC mapping (errors.ts).
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema, SchemaAST } from "effect"

// ---------------------------------------------------------------------------------------------
// Error bodies. Every error other than 422 is `{"detail": "<message>"}`: one class per status, so
// handlers' error types and the OpenAPI description both say which statuses exist. They share the
// component name ApiError (class identifiers differ: Schema tells classes apart by them). The
// bodies are written by edge.ts.
// ---------------------------------------------------------------------------------------------

const detail = { detail: Schema.String.annotations({ description: "What went wrong, for humans." }) }
const status = <A>(code: number, description: string): Schema.Annotations.Schema<A> => ({
  ...HttpApiSchema.annotations<A>({ status: code, description }),
  [SchemaAST.JSONIdentifierAnnotationId]: "ApiError"
})

export class BadRequest extends Schema.Class<BadRequest>("BadRequest")(
  detail,
  status(400, "Invalid request for the current state: sole owner, last org, unknown role, scope outside the role, …")
) {}
export class Unauthorized extends Schema.Class<Unauthorized>("Unauthorized")(
  detail,
  status(401, "Missing, invalid, expired or revoked bearer token, wrong credentials, or an API key on a dashboard-session-only endpoint")
) {}
export class Forbidden extends Schema.Class<Forbidden>("Forbidden")(detail, status(403, "The caller lacks the permission or is not a member of the org")) {}
export class NotFound extends Schema.Class<NotFound>("NotFound")(detail, status(404, "Not found or not visible to the caller")) {}
export class Conflict extends Schema.Class<Conflict>("Conflict")(detail, status(409, "Conflicts with the current state (already a member, email taken, …)")) {}
export class TooManyRequests extends Schema.Class<TooManyRequests>("TooManyRequests")(detail, status(429, "Too many requests: a rate limit (Retry-After says when to retry) or a plan's request quota")) {}
export class InternalError extends Schema.Class<InternalError>("InternalError")(detail, status(500, "Internal error; details are logged, never returned")) {}
export class Unavailable extends Schema.Class<Unavailable>("Unavailable")(detail, status(503, "The work could not start; safe to retry")) {}

export type HttpError = BadRequest | Unauthorized | Forbidden | NotFound | Conflict | TooManyRequests | InternalError | Unavailable
export type HttpStatus = 400 | 401 | 403 | 404 | 409 | 429 | 500 | 503

/** Status → error class: the closed set of non-validation errors the gateway answers with. */
export const errorByStatus = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  429: TooManyRequests,
  500: InternalError,
  503: Unavailable
} as const satisfies Record<HttpStatus, new (props: { readonly detail: string }) => HttpError>

export const httpErrors = Object.values(errorByStatus)

// ---------------------------------------------------------------------------------------------
// 422: {"detail": [{"loc": [...], "msg": "...", "type": "...", "ctx"?: {...}}]}
// ---------------------------------------------------------------------------------------------

export const ValidationIssue = Schema.Struct({
  loc: Schema.Array(Schema.String).annotations({
    description: 'Where the problem is: "body", "query", "path" or "header", then the field path, e.g. ["body","name"]'
  }),
  msg: Schema.String,
  type: Schema.String.annotations({ description: "Machine-readable kind: missing, string_type, string_too_short, value_error, json_invalid, …" }),
  ctx: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations({ identifier: "ValidationIssue" })
export type ValidationIssue = typeof ValidationIssue.Type

export class ValidationError extends Schema.Class<ValidationError>("ValidationError")(
  { detail: Schema.Array(ValidationIssue) },
  HttpApiSchema.annotations({ status: 422, description: "Validation error: malformed body, path, query or header" })
) {}
