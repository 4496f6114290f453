import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpMethod from "@effect/platform/HttpMethod"
import { Either, Option, ParseResult, Schema, SchemaAST as AST } from "effect"
import type { ValidationIssue } from "./errors.js"

/**
 * Request validation in the interface's 422 shape. The edge server decodes a request's parts with
 * the endpoint's schemas; when they refuse it, the same parts are decoded again here (errors: all)
 * so every entry's loc starts with the part it is about: "path", "body", "header" or "query".
 */

export interface Route {
  readonly method: HttpMethod.HttpMethod
  /** The endpoint's template as the OpenAPI description names it, e.g. /v1/branches/{branch_id}. */
  readonly template: string
  readonly pattern: RegExp
  readonly params: ReadonlyArray<string>
  readonly schemas: { readonly [K in "pathSchema" | "payloadSchema" | "headersSchema" | "urlParamsSchema"]: Option.Option<AST.AST> }
}

/** A route's literal segment as requests spell it: "::" is a literal colon ("subscriptions::update"). */
const literalSegment = (segment: string) => segment.replace(/::/g, ":")
const isParameter = (segment: string) => segment.startsWith(":")
const parameterName = (segment: string) => segment.slice(1).replace(/\?$/, "")

/** An endpoint's route: its template as the OpenAPI description names it, its pattern and schemas. */
export const routeOf = (endpoint: HttpApiEndpoint.HttpApiEndpoint<string, HttpMethod.HttpMethod>): Route => {
  const segments = endpoint.path.split("/")
  const { pathSchema, payloadSchema, headersSchema, urlParamsSchema } = endpoint
  return {
    method: endpoint.method,
    template: segments.map((segment) => (isParameter(segment) ? `{${parameterName(segment)}}` : literalSegment(segment))).join("/"),
    pattern: new RegExp(`^${segments.map((segment) => (isParameter(segment) ? "([^/]+)" : literalSegment(segment).replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("/")}/?$`),
    params: segments.filter(isParameter).map(parameterName),
    schemas: {
      pathSchema: Option.map(pathSchema, (s) => s.ast),
      payloadSchema: Option.map(payloadSchema, (s) => s.ast),
      headersSchema: Option.map(headersSchema, (s) => s.ast),
      urlParamsSchema: Option.map(urlParamsSchema, (s) => s.ast)
    }
  }
}

/** The endpoint templates of an API, matched by method and path. */
export const routesOf = (api: HttpApi.HttpApi.Any): ReadonlyArray<Route> => {
  const routes: Array<Route> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, { onGroup: () => {}, onEndpoint: ({ endpoint }) => void routes.push(routeOf(endpoint)) })
  return routes
}

export const matchRoute = (routes: ReadonlyArray<Route>, method: string, pathname: string) => {
  for (const route of routes) {
    if (route.method !== method) continue
    const match = route.pattern.exec(pathname)
    if (match === null) continue
    const params: Record<string, string> = {}
    route.params.forEach((name, i) => {
      const raw = match[i + 1] ?? ""
      try {
        params[name] = decodeURIComponent(raw)
      } catch {
        params[name] = raw
      }
    })
    return { route, params }
  }
  return undefined
}

/** Whether a request's declared content type is one HttpApi reads as JSON (absent counts as JSON). */
export const isJsonContentType = (contentType: string | undefined) => contentType === undefined || contentType.toLowerCase().includes("application/json")

/** A request's JSON body as read: its value, or why it has none (a 422 issue on the body). */
export type JsonBody = { readonly _tag: "Value"; readonly value: unknown } | { readonly _tag: "Issue"; readonly issue: ValidationIssue }

/** A body that could not be read (it broke off, or went past the size limit while streaming). */
export const unreadableBody: JsonBody = { _tag: "Issue", issue: { loc: ["body"], msg: "The request body could not be read", type: "json_invalid" } }

/** The JSON body in `text`. */
export const jsonBodyOf = (text: string): JsonBody => {
  if (text.trim() === "") return { _tag: "Issue", issue: { loc: ["body"], msg: "Field required: a JSON object body", type: "missing" } }
  try {
    return { _tag: "Value", value: JSON.parse(text) as unknown }
  } catch (error) {
    return { _tag: "Issue", issue: { loc: ["body"], msg: `JSON decode error: ${(error as Error).message}`, type: "json_invalid" } }
  }
}

/** Whether a route reads a JSON body: it declares one and its method carries one. */
export const readsBody = (route: Route) => Option.isSome(route.schemas.payloadSchema) && HttpMethod.hasBody(route.method)

/** The query of a URL as HttpApi hands it to schemas: one value as a string, several as an array. */
export const queryOf = (url: URL): Record<string, string | Array<string>> => {
  const query: Record<string, string | Array<string>> = {}
  for (const key of new Set(url.searchParams.keys())) {
    const values = url.searchParams.getAll(key)
    query[key] = values.length === 1 ? values[0]! : values
  }
  return query
}

/**
 * Every validation problem of a request for a matched route, in the 422 detail shape: its path
 * parameters, body (when the route reads one), headers and query, each against the endpoint's schema.
 */
export const requestIssues = (
  { route, params }: { readonly route: Route; readonly params: Record<string, string> },
  parts: { readonly headers: Readonly<Record<string, unknown>>; readonly url: URL; readonly body: JsonBody | undefined }
): ReadonlyArray<ValidationIssue> => {
  const { schemas } = route
  const issues: Array<ValidationIssue> = []
  const check = (ast: Option.Option<AST.AST>, input: unknown, where: string) => {
    if (Option.isNone(ast)) return
    const result = Schema.decodeUnknownEither(Schema.make(ast.value), { errors: "all" })(input)
    if (Either.isLeft(result)) issues.push(...formatIssue(result.left.issue, [where]))
  }
  check(schemas.pathSchema, params, "path")
  if (readsBody(route) && parts.body !== undefined) {
    if (parts.body._tag === "Issue") issues.push(parts.body.issue)
    else check(schemas.payloadSchema, parts.body.value, "body")
  }
  check(schemas.headersSchema, parts.headers, "header")
  check(schemas.urlParamsSchema, queryOf(parts.url), "query")
  return issues
}

/** C0 controls and DEL: never part of an id, a name or a query value. */
const CONTROL = /[\u0000-\u001f\u007f]/
/** In body strings tab, newline and carriage return may be free text; NUL never reaches Postgres. */
const BODY_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/

const controlIssue = (loc: ReadonlyArray<string>): ValidationIssue => ({ loc, msg: "Must not contain control characters", type: "string_pattern_mismatch" })

/**
 * How deep a JSON body may nest. No request of the interface goes past a handful of levels; the
 * walk below (and every schema after it) recurses, so a few kilobytes of `[[[[…` must not reach them.
 */
export const MAX_BODY_DEPTH = 32

/**
 * Control characters anywhere in a matched request's path parameters, query values or JSON body
 * strings, in the 422 shape: checked before any schema or unit sees the request, so no value
 * carrying one reaches a database (Postgres refuses NUL in text, which would surface as a 5xx).
 */
export const controlIssues = ({ params }: { readonly params: Record<string, string> }, url: URL, body: JsonBody | undefined): Array<ValidationIssue> => {
  const issues: Array<ValidationIssue> = []
  for (const name in params) if (CONTROL.test(params[name]!)) issues.push(controlIssue(["path", name]))
  if (url.search !== "") for (const [key, value] of url.searchParams) if (CONTROL.test(key) || CONTROL.test(value)) issues.push(controlIssue(["query", key.replace(CONTROL, "?")]))
  if (body?._tag === "Value") {
    let tooDeep = false
    const walk = (value: unknown, loc: ReadonlyArray<string>): void => {
      if (tooDeep) return
      if (loc.length > MAX_BODY_DEPTH) {
        tooDeep = true
        issues.push({ loc: ["body"], msg: `JSON nested deeper than ${MAX_BODY_DEPTH} levels`, type: "json_invalid" })
        return
      }
      if (typeof value === "string") {
        if (BODY_CONTROL.test(value)) issues.push(controlIssue(loc))
      } else if (Array.isArray(value)) value.forEach((item, i) => walk(item, [...loc, String(i)]))
      else if (typeof value === "object" && value !== null) {
        for (const [key, item] of Object.entries(value)) {
          if (BODY_CONTROL.test(key)) issues.push(controlIssue([...loc, key.replace(BODY_CONTROL, "?")]))
          else walk(item, [...loc, key])
        }
      }
    }
    walk(body.value, ["body"])
  }
  return issues
}

// ---------------------------------------------------------------------------------------------
// ParseIssue → [{loc, msg, type, ctx?}]. Inputs are never echoed back (they may be passwords).
// ---------------------------------------------------------------------------------------------

const issue = (loc: ReadonlyArray<string>, msg: string, type: string, ctx?: Record<string, unknown>): ValidationIssue =>
  ctx === undefined ? { loc, msg, type } : { loc, msg, type, ctx }

const isLiteralUnion = (ast: AST.AST): ast is AST.Union<AST.Literal> => AST.isUnion(ast) && ast.types.every(AST.isLiteral)

const quote = (value: unknown) => (typeof value === "string" ? `'${value}'` : String(value))

const describe = (ast: AST.AST): string => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "a valid string"
    case "NumberKeyword":
      return "a valid number"
    case "BooleanKeyword":
      return "a valid boolean"
    case "TypeLiteral":
      return "a JSON object"
    case "TupleType":
      return "a valid array"
    case "Literal":
      return ast.literal === null ? "null" : quote(ast.literal)
    case "Union":
      return ast.types.map(describe).join(" or ")
    case "Refinement":
    case "Transformation":
      return describe(ast.from)
    default:
      return "of the expected type"
  }
}

const typeCode = (ast: AST.AST): string => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "string_type"
    case "NumberKeyword":
      return "number_type"
    case "BooleanKeyword":
      return "bool_type"
    case "TypeLiteral":
      return "object_type"
    case "TupleType":
      return "list_type"
    case "Literal":
      return "literal_error"
    case "Union":
      return isLiteralUnion(ast) ? "literal_error" : typeCode(ast.types.find((t) => !(AST.isLiteral(t) && t.literal === null)) ?? ast)
    case "Refinement":
    case "Transformation":
      return typeCode(ast.from)
    default:
      return "type_error"
  }
}

const typeIssue = (ast: AST.AST, loc: ReadonlyArray<string>): ValidationIssue =>
  isLiteralUnion(ast) || AST.isLiteral(ast)
    ? issue(loc, `Input should be ${describe(ast)}`, "literal_error", { expected: describe(ast) })
    : issue(loc, `Input should be ${describe(ast)}`, typeCode(ast))

const customMessage = (ast: AST.AST, parseIssue: ParseResult.ParseIssue): string | undefined => {
  const annotation = AST.getMessageAnnotation(ast)
  if (Option.isNone(annotation)) return undefined
  const out = annotation.value(parseIssue)
  if (typeof out === "string") return out
  if (typeof out === "object" && "message" in out && typeof out.message === "string") return out.message
  return undefined
}

const refinementIssue = (parseIssue: ParseResult.Refinement, loc: ReadonlyArray<string>): ValidationIssue => {
  const ast = parseIssue.ast
  const id = Option.getOrUndefined(AST.getSchemaIdAnnotation(ast))
  const json = Option.getOrElse(AST.getJSONSchemaAnnotation(ast), () => ({})) as Record<string, unknown>
  switch (id) {
    case Schema.MinLengthSchemaId:
      return issue(loc, `String should have at least ${json.minLength} character(s)`, "string_too_short", { min_length: json.minLength })
    case Schema.MaxLengthSchemaId:
      return issue(loc, `String should have at most ${json.maxLength} character(s)`, "string_too_long", { max_length: json.maxLength })
    case Schema.MinItemsSchemaId:
      return issue(loc, `List should have at least ${json.minItems} item(s)`, "too_short", { min_length: json.minItems })
    case Schema.MaxItemsSchemaId:
      return issue(loc, `List should have at most ${json.maxItems} item(s)`, "too_long", { max_length: json.maxItems })
    case Schema.PatternSchemaId:
      return issue(loc, customMessage(ast, parseIssue) ?? `String should match the pattern ${json.pattern}`, "string_pattern_mismatch", { pattern: json.pattern })
    case Schema.IntSchemaId:
      return issue(loc, "Input should be a valid integer", "int_type")
    default:
      return issue(loc, customMessage(ast, parseIssue) ?? "Value is not valid", "value_error")
  }
}

const membersOf = (composite: ParseResult.Composite): ReadonlyArray<ParseResult.ParseIssue> =>
  Array.isArray(composite.issues) ? (composite.issues as ReadonlyArray<ParseResult.ParseIssue>) : [composite.issues as ParseResult.ParseIssue]

/** Members of a union that failed for a reason other than being the wrong type. */
const unionIssues = (composite: ParseResult.Composite, loc: ReadonlyArray<string>): Array<ValidationIssue> => {
  const specific = membersOf(composite).filter((m) => m._tag !== "Type")
  return specific.length > 0 ? specific.flatMap((m) => formatIssue(m, loc)) : [typeIssue(composite.ast, loc)]
}

export const formatIssue = (parseIssue: ParseResult.ParseIssue, loc: ReadonlyArray<string>): Array<ValidationIssue> => {
  switch (parseIssue._tag) {
    case "Pointer":
      return formatIssue(parseIssue.issue, [...loc, ...(Array.isArray(parseIssue.path) ? parseIssue.path : [parseIssue.path]).map(String)])
    case "Composite":
      if (AST.isUnion(parseIssue.ast)) return unionIssues(parseIssue, loc)
      return membersOf(parseIssue).flatMap((i) => formatIssue(i, loc))
    case "Missing":
      return [issue(loc, "Field required", "missing")]
    case "Unexpected":
      return [issue(loc, "Extra inputs are not permitted", "extra_forbidden")]
    case "Type":
      return [typeIssue(parseIssue.ast, loc)]
    case "Forbidden":
      return [issue(loc, parseIssue.message ?? "Value is not allowed", "value_error")]
    case "Transformation":
      return formatIssue(parseIssue.issue, loc)
    case "Refinement":
      return parseIssue.kind === "From" ? formatIssue(parseIssue.issue, loc) : [refinementIssue(parseIssue, loc)]
  }
}
