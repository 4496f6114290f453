import type * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import { Chunk, Context, Effect, Layer } from "effect"
import { pipeArguments } from "effect/Pipeable"
import type { Scope } from "effect"
import type { EdgeRequest } from "./EdgeRequest.js"

/** One endpoint's implementation, as `HttpApiBuilder.Handlers` holds it. */
export type HandlerItem = HttpApiBuilder.Handlers.Item<unknown, unknown>

/**
 * A group's implemented endpoints and the services they run with (the context its layer was built
 * in): the edge server serves them (`EdgeServer.ts`).
 */
export interface GroupHandlers {
  readonly items: ReadonlyArray<HandlerItem>
  readonly context: Context.Context<never>
}

/** The tag under which a group's handlers are provided, by the group's name. */
export const groupHandlersTag = (groupName: string) => Context.GenericTag<GroupHandlers>(`@scion/gateway/handlers/${groupName}`)

/** What a group's layer provides: its handlers, under `groupHandlersTag(Name)`. */
export interface ImplementedGroup<Name extends string> {
  readonly _: unique symbol
  readonly name: Name
}

const handlersOf = (group: HttpApiGroup.HttpApiGroup.AnyWithProps, items: Chunk.Chunk<HandlerItem>): unknown => ({
  group,
  handlers: items,
  // The types allow only the group's own endpoints, each once.
  handle(name: string, handler: HandlerItem["handler"], options?: { readonly uninterruptible?: boolean | undefined }) {
    return handlersOf(group, Chunk.append(items, { endpoint: group.endpoints[name]!, handler, withFullRequest: false, uninterruptible: options?.uninterruptible ?? false }))
  },
  // The edge hands handlers the decoded request, never the platform's raw one: none of ours asks.
  handleRaw(name: string) {
    const handler = () => Effect.dieMessage(`${group.identifier}.${name}: handleRaw is not served by the gateway's edge`)
    return handlersOf(group, Chunk.append(items, { endpoint: group.endpoints[name]!, handler, withFullRequest: true, uninterruptible: false }))
  },
  pipe() {
    // eslint-disable-next-line prefer-rest-params
    return pipeArguments(this, arguments)
  }
})

/**
 * `HttpApiBuilder.group`'s form and types, for the gateway's own edge: the same `build` (handlers
 * added with `.handle`, checked against the group's endpoints), but the handlers are kept for the
 * edge server to call (which authenticates the endpoints the API marks, with `Authenticator`), rather than mounted on the platform's router, whose per-request pipeline
 * (router, route context, a merge of the group's whole context, schema-driven decoding middleware)
 * cost the gateway more CPU a request than the request's own work.
 */
export const group = <
  ApiId extends string,
  Groups extends HttpApiGroup.HttpApiGroup.Any,
  ApiError,
  ApiR,
  const Name extends HttpApiGroup.HttpApiGroup.Name<Groups>,
  Return
>(
  api: HttpApi.HttpApi<ApiId, Groups, ApiError, ApiR>,
  groupName: Name,
  build: (handlers: HttpApiBuilder.Handlers.FromGroup<ApiError, ApiR, HttpApiGroup.HttpApiGroup.WithName<Groups, Name>>) => HttpApiBuilder.Handlers.ValidateReturn<Return>
): Layer.Layer<ImplementedGroup<Name>, HttpApiBuilder.Handlers.Error<Return>, HttpApiMiddleware.HttpApiMiddleware.Without<Exclude<HttpApiBuilder.Handlers.Context<Return>, Scope.Scope | EdgeRequest>>> => {
  const definition = (api as unknown as HttpApi.HttpApi.AnyWithProps).groups[groupName]!
  const tag = groupHandlersTag(groupName)
  return Layer.effect(
    tag,
    Effect.gen(function* () {
      const context = yield* Effect.context<never>()
      const built: unknown = build(handlersOf(definition, Chunk.empty()) as never)
      const handlers = (Effect.isEffect(built) ? yield* (built as Effect.Effect<unknown>) : built) as HttpApiBuilder.Handlers<unknown, unknown, unknown, HttpApiEndpoint.HttpApiEndpoint.Any>
      return { items: Chunk.toReadonlyArray(handlers.handlers) as ReadonlyArray<HandlerItem>, context }
    })
  ) as never
}
