import { type Principal, tracedFn } from "@scion/kit"
import { Clock, Effect, Option } from "effect"
import { Access } from "./Access.js"
import { Database } from "./Database.js"
import { Entitlements } from "./Entitlements.js"
import { InvalidArgument, NoFieldsToUpdate, NotAMember, ProjectNameTaken, ProjectNotFound } from "./domain/errors.js"
import { Ids } from "./domain/ids.js"
import type { Project } from "./domain/models.js"
import { OrgsRepo } from "./OrgsRepo.js"
import { OutboxRepo } from "./OutboxRepo.js"
import { ProjectsRepo } from "./ProjectsRepo.js"

export const PROJECT_NAME_MAX = 100
export const PROJECT_DESCRIPTION_MAX = 1000

// C0 and C1 control characters; a description may still span lines and use tabs.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
const CONTROL_BUT_WHITESPACE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/

/** Trimmed, 1..100 characters, no control characters. */
export const projectName = (value: string): Effect.Effect<string, InvalidArgument> => {
  const name = value.trim()
  if (name.length < 1 || name.length > PROJECT_NAME_MAX) {
    return Effect.fail(new InvalidArgument({ field: "name", message: `name must be 1 to ${PROJECT_NAME_MAX} characters` }))
  }
  if (CONTROL.test(name)) return Effect.fail(new InvalidArgument({ field: "name", message: "name must not contain control characters" }))
  return Effect.succeed(name)
}

/** Trimmed, at most 1000 characters; line breaks and tabs allowed, other control characters not. */
export const projectDescription = (value: string): Effect.Effect<string, InvalidArgument> => {
  const description = value.trim()
  if (description.length > PROJECT_DESCRIPTION_MAX) {
    return Effect.fail(new InvalidArgument({ field: "description", message: `description must be at most ${PROJECT_DESCRIPTION_MAX} characters` }))
  }
  if (CONTROL_BUT_WHITESPACE.test(description)) {
    return Effect.fail(new InvalidArgument({ field: "description", message: "description must not contain control characters" }))
  }
  return Effect.succeed(description)
}

/**
 * Projects: org-scoped metadata. Another org's project is PROJECT_NOT_FOUND (never 403); a list of
 * an org the caller is not in is NOT_A_MEMBER, like every org-scoped list.
 */
export class Projects extends Effect.Service<Projects>()("@scion/identity/Projects", {
  effect: Effect.gen(function* () {
    const access = yield* Access
    const db = yield* Database
    const repo = yield* ProjectsRepo
    const orgs = yield* OrgsRepo
    const outbox = yield* OutboxRepo
    const entitlements = yield* Entitlements

    /** The project and the caller's standing in its org; invisible projects are not found. */
    const visible = (principal: Principal, projectId: string, permission: string) =>
      Effect.gen(function* () {
        const found = yield* repo.find(projectId)
        if (Option.isNone(found)) return yield* new ProjectNotFound({ projectId })
        const granted = yield* access
          .require(principal, found.value.orgId, permission)
          .pipe(Effect.catchIf((e): e is NotAMember => e._tag === "NotAMember", () => Effect.fail(new ProjectNotFound({ projectId }))))
        return { project: found.value, granted }
      })

    /**
     * Needs projects.create and room in the org's plan. The org row is locked while counting and
     * asking billing, so two concurrent creates cannot both take the last slot.
     */
    const create = tracedFn("Projects.create")(function* (principal: Principal, input: { orgId: string; name: string; description?: string | undefined }) {
      const granted = yield* access.require(principal, input.orgId, "projects.create")
      const name = yield* projectName(input.name)
      const description = yield* projectDescription(input.description ?? "")
      const project = yield* db.transaction(
        Effect.gen(function* () {
          yield* orgs.lock(input.orgId)
          yield* entitlements.requireRoom(input.orgId, "projects", yield* repo.countByOrg(input.orgId))
          const inserted = yield* repo.insert({ id: yield* Ids.project, orgId: input.orgId, name, description, createdBy: granted.userId })
          if (Option.isNone(inserted)) return yield* new ProjectNameTaken({ orgId: input.orgId, name })
          return inserted.value
        })
      )
      yield* Effect.logInfo("project created").pipe(Effect.annotateLogs({ org_id: project.orgId, project_id: project.id }))
      return project
    })

    const list = tracedFn("Projects.list")(function* (principal: Principal, orgId: string) {
      yield* access.require(principal, orgId, "projects.read")
      return yield* repo.listByOrg(orgId)
    })

    const get = tracedFn("Projects.get")(function* (principal: Principal, projectId: string) {
      return (yield* visible(principal, projectId, "projects.read")).project
    })

    /** Changes only the fields given; none is NO_FIELDS_TO_UPDATE. */
    const update = tracedFn("Projects.update")(function* (
      principal: Principal,
      input: { projectId: string; name?: string | undefined; description?: string | undefined }
    ) {
      const { project } = yield* visible(principal, input.projectId, "projects.update")
      if (input.name === undefined && input.description === undefined) return yield* new NoFieldsToUpdate()
      const name = input.name === undefined ? undefined : yield* projectName(input.name)
      const description = input.description === undefined ? undefined : yield* projectDescription(input.description)
      const updated = yield* repo.update(project.id, { name, description })
      if (Option.isNone(updated)) return yield* new ProjectNotFound({ projectId: project.id })
      if (Option.isNone(updated.value)) return yield* new ProjectNameTaken({ orgId: project.orgId, name: name ?? project.name })
      return updated.value.value
    })

    /**
     * Needs projects.delete. The row goes and `events.project.deleted` is written in the same
     * transaction: the units owning the project's children delete them when they consume it.
     */
    const remove = tracedFn("Projects.delete")(function* (principal: Principal, projectId: string) {
      const { granted } = yield* visible(principal, projectId, "projects.delete")
      const deleted: Project = yield* db.transaction(
        Effect.gen(function* () {
          const gone = yield* repo.delete(projectId)
          if (Option.isNone(gone)) return yield* new ProjectNotFound({ projectId })
          const now = new Date(yield* Clock.currentTimeMillis)
          yield* outbox.write(`project.deleted.${projectId}`, {
            subject: "events.project.deleted",
            payload: { project_id: projectId, org_id: gone.value.orgId, name: gone.value.name, deleted_by_user_id: granted.userId, deleted_at: now.toISOString() }
          })
          return gone.value
        })
      )
      yield* Effect.logInfo("project deleted").pipe(Effect.annotateLogs({ org_id: deleted.orgId, project_id: projectId }))
      return { message: `Project ${deleted.name} (${projectId}) was deleted`, project: deleted }
    })

    return { create, list, get, update, delete: remove } as const
  })
}) {}
