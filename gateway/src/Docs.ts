import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Context, Effect, Layer } from "effect"

const DOCS_PATH = "/v1/docs"

/**
 * GET /v1/docs, the API reference page (Scalar), made on its first request. Its script is 3.4 MB,
 * and `HttpApiScalar.layer` builds the page (another 3.4 MB) when the gateway starts and keeps it
 * for the life of the process: ~10 MB of every gateway's memory for a page few requests ask for
 * (issue 12's memory target). Loaded lazily, it lives in a chunk of the bundle of its own; the page
 * itself is still `HttpApiScalar`'s, served by a router of its own.
 */
export const DocsLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const api = yield* HttpApi.Api
    const docsApp = yield* Effect.cached(
      Effect.promise(() => import("@effect/platform/HttpApiScalar")).pipe(
        // One build shares the memoized Router.Live between the two layers: the route lands in it.
        Effect.flatMap((Scalar) => Layer.build(Layer.merge(HttpApiBuilder.Router.Live, Scalar.layer({ path: DOCS_PATH })))),
        Effect.flatMap((context) => Context.get(context, HttpApiBuilder.Router).router),
        Effect.provideService(HttpApi.Api, api),
        Effect.scoped
      )
    )
    yield* router.get(DOCS_PATH, Effect.flatMap(docsApp, (app) => app))
  })
)
