import { Caller, effectService, type Routes } from "@scion/kit"
import { EnvironmentService } from "@scion/proto/scion/connector/v1/environment_pb"
import { Effect, Option, Redacted } from "effect"
import { type ConnectorError, InvalidArgument, toWireError, Unauthenticated } from "../domain/errors.js"
import { codeHostRoutes } from "../codehost/rpc.js"
import { Environments } from "../Environments.js"
import { connectorServiceRoutes } from "./connectors.js"
import { engineAccessRoutes } from "./engineAccess.js"
import { apiKeyInfoToProto, cloudFromProto, connectionToProto, environmentToProto } from "./mapping.js"

/** The verified principal of the request; none means UNAUTHENTICATED. */
const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

/** EnvironmentService and ConnectorService as Connect routes over the Environments and Connectors services. */
export const connectorRoutes = Effect.gen(function* () {
  const environments = yield* Environments

  const routes = yield* effectService<typeof EnvironmentService, ConnectorError, never>(
    EnvironmentService,
    {
      listEnvironments: (req) =>
        Effect.map(Effect.flatMap(caller, (p) => environments.list(p, req.orgId)), (list) => ({ environments: list.map(environmentToProto) })),
      getEnvironment: (req) => Effect.map(Effect.flatMap(caller, (p) => environments.get(p, req.environmentId)), (e) => ({ environment: environmentToProto(e) })),
      createEnvironment: (req) =>
        Effect.gen(function* () {
          const principal = yield* caller
          const cloud = cloudFromProto[req.cloud]
          if (cloud === undefined) return yield* new InvalidArgument({ field: "cloud", message: "cloud is required: aws" })
          const environment = yield* environments.create(principal, { orgId: req.orgId, name: req.name, cloud, region: req.region, privateLinkId: req.privateLinkId })
          return { environment: environmentToProto(environment) }
        }),
      createAwsSetupLink: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => environments.createAwsSetupLink(p, { environmentId: req.environmentId, awsAccountId: req.awsAccountId })),
          (link) => ({ url: link.url, externalId: link.externalId, awsAccountConnection: connectionToProto(link.connection) })
        ),
      updateAwsAccountConnection: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) =>
            environments.updateAwsAccountConnection(p, { connectionId: req.awsAccountConnectionId, roleArn: req.roleArn, externalId: req.externalId })
          ),
          (connection) => ({ awsAccountConnection: connectionToProto(connection) })
        ),
      // The key is wrapped in Redacted as soon as it arrives, so no log line can print it.
      rotateDbProviderApiKey: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => environments.rotateDbProviderApiKey(p, { environmentId: req.environmentId, apiKey: Redacted.make(req.apiKey) })),
          (rotated) => ({ environmentId: rotated.environmentId, dbProviderApiKey: apiKeyInfoToProto(rotated.info) })
        )
    },
    toWireError
  )
  return [routes, yield* connectorServiceRoutes, yield* codeHostRoutes, yield* engineAccessRoutes] as ReadonlyArray<Routes>
})
