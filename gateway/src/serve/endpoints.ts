import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpMethod from "@effect/platform/HttpMethod"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Either, Option, ParseResult, Schema, SchemaAST as AST } from "effect"
import { Authentication, SessionAuthentication } from "../security.js"
import { type Route, routeOf } from "../validation.js"

/** Who may call an endpoint: anyone, any valid bearer token, or a dashboard session only. */
export type Security = "none" | "any" | "session"

/** What a handler receives, decoded by the endpoint's schemas (HttpApi's request shape). */
export interface DecodedRequest {
  path?: unknown
  urlParams?: unknown
  payload?: unknown
  headers?: unknown
}

/** An endpoint of the API as the edge serves it: its route, who may call it, its schemas compiled once. */
export interface CompiledEndpoint {
  readonly group: string
  readonly name: string
  readonly route: Route
  readonly security: Security
  /** The request's parts through the endpoint's schemas; a failure is a 422 the edge spells out. */
  readonly decode: (parts: {
    readonly params: Record<string, string>
    readonly query: Record<string, string | Array<string>>
    readonly body: unknown
    readonly headers: Readonly<Record<string, unknown>>
  }) => Either.Either<DecodedRequest, ParseResult.ParseError>
  /** The handler's value as its response: status, content type and body from the success schemas. */
  readonly encode: (value: unknown) => Option.Option<HttpServerResponse.HttpServerResponse>
}

const securityOf = (middleware: ReadonlySet<unknown>, where: string): Security => {
  for (const tag of middleware) {
    if (tag !== Authentication && tag !== SessionAuthentication) throw new Error(`${where}: the gateway's edge does not serve this middleware`)
  }
  return middleware.has(SessionAuthentication) ? "session" : middleware.has(Authentication) ? "any" : "none"
}

/**
 * Whether a query parameter of this schema takes one string (else it takes a list, and a single
 * value is handed over as a list of one), as HttpApi decides it.
 */
const takesOneString = (ast: AST.AST, key?: string): boolean => {
  switch (ast._tag) {
    case "StringKeyword":
    case "Literal":
    case "TemplateLiteral":
    case "Enums":
      return true
    case "TypeLiteral": {
      if (key === undefined) return false
      const property = ast.propertySignatures.find((p) => p.name === key)
      return property !== undefined ? takesOneString(property.type) : ast.indexSignatures.some((index) => takesOneString(index.type))
    }
    case "Union":
      return ast.types.some((member) => takesOneString(member, key))
    case "Suspend":
      return takesOneString(ast.f(), key)
    case "Refinement":
    case "Transformation":
      return takesOneString(ast.from, key)
    default:
      return false
  }
}

const decoder = (schema: Option.Option<Schema.Schema.Any>) =>
  Option.map(schema, (s) => Schema.decodeUnknownEither(s as Schema.Schema<unknown, unknown>))

const responseOf = (member: Schema.Schema.Any) => {
  const status = HttpApiSchema.getStatusSuccess(member)
  if (HttpApiSchema.isVoid(member.ast)) return () => HttpServerResponse.empty({ status })
  const encoding = HttpApiSchema.getEncoding(member.ast)
  switch (encoding.kind) {
    case "Json":
      return (body: unknown) => HttpServerResponse.unsafeJson(body, { status, contentType: encoding.contentType })
    case "Text":
      return (body: unknown) => HttpServerResponse.text(body as string, { status, contentType: encoding.contentType })
    case "Uint8Array":
      return (body: unknown) => HttpServerResponse.uint8Array(body as Uint8Array, { status, contentType: encoding.contentType })
    case "UrlParams":
      return (body: unknown) => HttpServerResponse.urlParams(body as never, { status, contentType: encoding.contentType })
  }
}

/** Every endpoint of an API, compiled for the edge. */
export const compileEndpoints = (api: HttpApi.HttpApi.Any): ReadonlyArray<CompiledEndpoint> => {
  const compiled: Array<CompiledEndpoint> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ group, endpoint: declared, middleware }) => {
      const endpoint = declared as unknown as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
      const route = routeOf(declared)
      const where = `${group.identifier}.${endpoint.name}`
      const decodePath = decoder(endpoint.pathSchema)
      const decodeUrlParams = decoder(endpoint.urlParamsSchema)
      const decodePayload = decoder(endpoint.payloadSchema)
      const decodeHeaders = decoder(endpoint.headersSchema)
      const urlParamsAst = Option.map(endpoint.urlParamsSchema, (s) => s.ast)
      const bodyRead = HttpMethod.hasBody(endpoint.method)
      const members = new Set<Schema.Schema.Any>()
      HttpApiSchema.deunionize(members, endpoint.successSchema)
      const encoders = [...members].map((member) => {
        // With several success schemas the value's type picks one (as HttpApi's union does); with
        // one, encoding alone checks the value (a second walk of every response for nothing).
        const is = members.size > 1 ? Schema.is(member as Schema.Schema<unknown, unknown>) : () => true
        const encode = Schema.encodeEither(member as Schema.Schema<unknown, unknown>)
        const respond = responseOf(member)
        return (value: unknown): Option.Option<HttpServerResponse.HttpServerResponse> =>
          is(value) ? Either.match(encode(value), { onLeft: () => Option.none(), onRight: (body) => Option.some(respond(body)) }) : Option.none()
      })
      compiled.push({
        group: group.identifier,
        name: endpoint.name,
        route,
        security: securityOf(middleware, where),
        decode: ({ params, query, body, headers }) => {
          const request: DecodedRequest = {}
          if (Option.isSome(decodePath)) {
            const path = decodePath.value(params)
            if (Either.isLeft(path)) return Either.left(path.left)
            request.path = path.right
          }
          if (Option.isSome(decodePayload)) {
            // Without a body (GET, DELETE) HttpApi reads a payload from the query.
            const payload = decodePayload.value(bodyRead ? body : query)
            if (Either.isLeft(payload)) return Either.left(payload.left)
            request.payload = payload.right
          }
          if (Option.isSome(decodeHeaders)) {
            const decoded = decodeHeaders.value(headers)
            if (Either.isLeft(decoded)) return Either.left(decoded.left)
            request.headers = decoded.right
          }
          if (Option.isSome(decodeUrlParams) && Option.isSome(urlParamsAst)) {
            const normalized: Record<string, string | Array<string>> = {}
            for (const key in query) {
              const value = query[key]!
              normalized[key] = Array.isArray(value) || takesOneString(urlParamsAst.value, key) ? value : [value]
            }
            const urlParams = decodeUrlParams.value(normalized)
            if (Either.isLeft(urlParams)) return Either.left(urlParams.left)
            request.urlParams = urlParams.right
          }
          return Either.right(request)
        },
        encode: (value) => {
          for (const encode of encoders) {
            const response = encode(value)
            if (Option.isSome(response)) return response
          }
          return Option.none()
        }
      })
    }
  })
  return compiled
}
