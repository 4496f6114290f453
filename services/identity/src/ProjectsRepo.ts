import { SqlClient, SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Project } from "./domain/models.js"

interface ProjectRow {
  readonly id: string
  readonly org_id: string
  readonly name: string
  readonly description: string
  readonly created_by_user_id: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toProject = (row: ProjectRow): Project => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  description: row.description,
  createdBy: row.created_by_user_id,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

/** A unique violation (the per-org name index): the caller turns it into PROJECT_NAME_TAKEN. */
const isUniqueViolation = (error: SqlError.SqlError) => (error.cause as { code?: string } | undefined)?.code === "23505"

/** Projects: org-scoped rows; names unique per org, case-insensitively (projects_org_name). */
export class ProjectsRepo extends Effect.Service<ProjectsRepo>()("@scion/identity/ProjectsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal("id, org_id, name, description, created_by_user_id, created_at, updated_at")

    return {
      /** None when the org already has a project of that name. */
      insert: (input: { id: string; orgId: string; name: string; description: string; createdBy: string | null }) =>
        sql<ProjectRow>`
          insert into projects (id, org_id, name, description, created_by_user_id)
          values (${input.id}, ${input.orgId}, ${input.name}, ${input.description}, ${input.createdBy})
          on conflict do nothing
          returning ${columns}`.pipe(Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toProject)), Effect.orDie),

      find: (projectId: string) =>
        sql<ProjectRow>`select ${columns} from projects where id = ${projectId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toProject)),
          Effect.orDie
        ),

      listByOrg: (orgId: string) =>
        sql<ProjectRow>`select ${columns} from projects where org_id = ${orgId} order by created_at, id`.pipe(
          Effect.map((rows) => rows.map(toProject)),
          Effect.orDie
        ),

      countByOrg: (orgId: string) =>
        sql<{ readonly n: number }>`select count(*)::int as n from projects where org_id = ${orgId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Effect.orDie
        ),

      /**
       * Changes the given fields. Some(None) when the new name is taken in the org; None when the
       * project is gone.
       */
      update: (projectId: string, changes: { name?: string | undefined; description?: string | undefined }) =>
        sql<ProjectRow>`
          update projects set
            name = coalesce(${changes.name ?? null}, name),
            description = coalesce(${changes.description ?? null}, description),
            updated_at = now()
          where id = ${projectId}
          returning ${columns}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => Option.some(toProject(row)))),
          Effect.catchIf(isUniqueViolation, () => Effect.succeed(Option.some(Option.none<Project>()))),
          Effect.orDie
        ),

      delete: (projectId: string) =>
        sql<ProjectRow>`delete from projects where id = ${projectId} returning ${columns}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toProject)),
          Effect.orDie
        )
    } as const
  })
}) {}
