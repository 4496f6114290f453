import { group } from "../serve/handlers.js"
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import type * as pb from "@scion/proto/scion/identity/v1/project_pb"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { asCaller } from "../Authentication.js"
import type * as P from "../projectSchemas.js"
import { requiredFrom } from "./present.js"

/** Identity leaving out a required message or timestamp is a bug: it throws, the edge answers 500. */
const required = requiredFrom("identity")
const iso = (ts: Timestamp | undefined) => timestampDate(required(ts, "a timestamp")).toISOString()

export const project = (p: pb.Project | undefined): typeof P.Project.Type => {
  const v = required(p, "project")
  return {
    project_id: v.projectId,
    org_id: v.orgId,
    name: v.name,
    description: v.description === "" ? null : v.description,
    created_by: v.createdBy ?? null,
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt)
  }
}

export const ProjectsLive = group(Api, "projects", (handlers) =>
  handlers
    .handle("create", ({ payload }) =>
      asCaller((u) =>
        u.projects.createProject({
          orgId: payload.org_id,
          name: payload.name,
          ...(payload.description !== undefined ? { description: payload.description } : {})
        })
      ).pipe(Effect.map((r) => project(r.project)))
    )
    .handle("list", ({ urlParams }) => asCaller((u) => u.projects.listProjects({ orgId: urlParams.org_id })).pipe(Effect.map((r) => ({ projects: r.projects.map(project) }))))
    .handle("get", ({ path }) => asCaller((u) => u.projects.getProject({ projectId: path.project_id })).pipe(Effect.map((r) => project(r.project))))
    .handle("update", ({ path, payload }) =>
      asCaller((u) =>
        u.projects.updateProject({
          projectId: path.project_id,
          ...(payload.name !== undefined ? { name: payload.name } : {}),
          ...(payload.description !== undefined ? { description: payload.description } : {})
        })
      ).pipe(Effect.map((r) => project(r.project)))
    )
    .handle("delete", ({ path }) => asCaller((u) => u.projects.deleteProject({ projectId: path.project_id })).pipe(Effect.map((r) => ({ message: r.message }))))
)
