import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import * as present from "./present.js"

export const OperationsLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  handlers.handle("get", ({ path, urlParams }) =>
    asCaller((u) => u.operation.getOperation({ id: path.operation_id, waitSeconds: urlParams.wait ?? 0 })).pipe(
      Effect.map((r) => present.operation(r.operation))
    )
  )
)
