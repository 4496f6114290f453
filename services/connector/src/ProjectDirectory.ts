import type { Transport } from "@connectrpc/connect"
import { Code, IdentityUnavailable, makeEffectClient, type Principal } from "@scion/kit"
import { ProjectService } from "@scion/proto/scion/identity/v1/project_pb"
import { Context, Effect, Layer } from "effect"

/**
 * Whether a project id names a project of an org, as identity (which owns projects) answers the
 * request's caller: a connector may only be placed in its own org's project, so a deleted
 * project's event (which names its org) finds exactly its children. Another org's project, an
 * unknown one and one the caller may not read are all "not in the org".
 */
export class ProjectDirectory extends Context.Tag("@scion/connector/ProjectDirectory")<
  ProjectDirectory,
  { readonly inOrg: (principal: Principal, orgId: string, projectId: string) => Effect.Effect<boolean, IdentityUnavailable> }
>() {
  /** Identity's ProjectService over `transport`, asked as the caller of the request being served. */
  static fromTransport(transport: Transport): Layer.Layer<ProjectDirectory> {
    return Layer.sync(ProjectDirectory, () => {
      const projects = makeEffectClient(ProjectService, transport)
      return ProjectDirectory.of({
        // Service principals read no org's projects; a user's or key's question travels with the
        // request's token (the server bridge puts it in the fiber).
        inOrg: (principal, orgId, projectId) =>
          principal.kind === "service" ? Effect.succeed(false) : projects.getProject({ projectId }).pipe(
            Effect.map((response) => response.project?.orgId === orgId),
            Effect.catchAll((error) =>
              error.code === Code.NotFound || error.code === Code.PermissionDenied ? Effect.succeed(false) : Effect.fail(new IdentityUnavailable({ cause: `${error.codeName}: ${error.reason}` }))
            )
          )
      })
    })
  }
}
