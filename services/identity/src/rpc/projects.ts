import type { MessageInitShape } from "@bufbuild/protobuf"
import { timestampFromDate } from "@bufbuild/protobuf/wkt"
import { Caller, effectService } from "@scion/kit"
import { ProjectService, type ProjectSchema } from "@scion/proto/scion/identity/v1/project_pb"
import { Effect, Option } from "effect"
import { type IdentityError, toWireError, Unauthenticated } from "../domain/errors.js"
import type { Project } from "../domain/models.js"
import { Projects } from "../Projects.js"

const caller = Effect.flatMap(
  Caller,
  Option.match({ onNone: () => Effect.fail(new Unauthenticated()), onSome: ({ principal }) => Effect.succeed(principal) })
)

export const projectToProto = (p: Project): MessageInitShape<typeof ProjectSchema> => ({
  projectId: p.id,
  orgId: p.orgId,
  name: p.name,
  description: p.description,
  ...(p.createdBy !== null ? { createdBy: p.createdBy } : {}),
  createdAt: timestampFromDate(p.createdAt),
  updatedAt: timestampFromDate(p.updatedAt)
})

/** ProjectService as Connect routes over the Projects service. */
export const projectRoutes = Effect.gen(function* () {
  const projects = yield* Projects
  return yield* effectService<typeof ProjectService, IdentityError, never>(
    ProjectService,
    {
      createProject: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => projects.create(p, { orgId: req.orgId, name: req.name, description: req.description })),
          (project) => ({ project: projectToProto(project) })
        ),
      listProjects: (req) => Effect.map(Effect.flatMap(caller, (p) => projects.list(p, req.orgId)), (list) => ({ projects: list.map(projectToProto) })),
      getProject: (req) => Effect.map(Effect.flatMap(caller, (p) => projects.get(p, req.projectId)), (project) => ({ project: projectToProto(project) })),
      updateProject: (req) =>
        Effect.map(
          Effect.flatMap(caller, (p) => projects.update(p, { projectId: req.projectId, name: req.name, description: req.description })),
          (project) => ({ project: projectToProto(project) })
        ),
      deleteProject: (req) => Effect.map(Effect.flatMap(caller, (p) => projects.delete(p, req.projectId)), (result) => ({ message: result.message }))
    },
    toWireError
  )
})
