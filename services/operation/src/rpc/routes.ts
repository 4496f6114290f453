import { Caller, effectService, type Routes } from "@scion/kit"
import { OperationService, OperationType as PbType } from "@scion/proto/scion/operation/v1/operation_pb"
import { Effect, Option } from "effect"
import { InvalidArgument, type OperationError, toWireError, Unauthenticated } from "../domain/errors.js"
import type { Report } from "../domain/models.js"
import { Operations } from "../Operations.js"
import { operationToProto, statusFromProto, typeFromProto } from "./mapping.js"

/** The verified principal of the request; none means UNAUTHENTICATED. */
const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

/** OperationService as Connect routes over the Operations service. */
export const operationRoutes = Effect.gen(function* () {
  const operations = yield* Operations

  const routes = yield* effectService<typeof OperationService, OperationError, never>(
    OperationService,
    {
      createOperation: (req) =>
        Effect.gen(function* () {
          const principal = yield* caller
          const type = typeFromProto[req.type]
          if (type === undefined || req.type === PbType.UNSPECIFIED) return yield* new InvalidArgument({ field: "type", message: "type is required" })
          const { operation, created } = yield* operations.create(principal, { id: req.id, orgId: req.orgId, type, resourceId: req.resourceId })
          return { operation: operationToProto(operation), created }
        }),
      getOperation: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => operations.get(p, req.id, req.waitSeconds)),
          (op) => ({ operation: operationToProto(op) })
        ),
      reportOperation: (req) =>
        Effect.gen(function* () {
          const principal = yield* caller
          const status = statusFromProto[req.status]
          const report: Report = {
            id: req.id,
            ...(status !== undefined ? { status } : {}),
            ...(req.stage !== undefined ? { stage: req.stage } : {}),
            ...(req.stageLabel !== undefined ? { stageLabel: req.stageLabel } : {}),
            ...(req.progress !== undefined ? { progress: req.progress } : {}),
            ...(req.result !== undefined ? { result: req.result } : {}),
            ...(req.error !== undefined ? { error: req.error } : {}),
            ...(req.setupStatus !== undefined ? { setupStatus: req.setupStatus } : {})
          }
          return { operation: operationToProto(yield* operations.report(principal, report)) }
        }),
      listOperations: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => operations.list(p, req.orgId, req.resourceId)),
          (list) => ({ operations: list.map(operationToProto) })
        )
    },
    toWireError
  )
  return [routes] as ReadonlyArray<Routes>
})
