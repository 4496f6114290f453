import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { Projects, ROLES } from "../src/index.js"
import { IdentityWithBilling } from "../../../test/support/units.js"
import { addMember, createKey, createOrg, identityTestLayer, outboxRows, signUp } from "./support.js"

describe("projects", () => {
  layer(identityTestLayer(), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("creates, lists, gets, updates and deletes a project with an events.project.deleted outbox row", () =>
      Effect.gen(function* () {
        const projects = yield* Projects
        const { principal, userId } = yield* signUp("projects")
        const org = yield* createOrg(principal, "Projects Inc")
        const created = yield* projects.create(principal, { orgId: org.orgId, name: "  Web App  ", description: "The storefront" })
        expect(created).toMatchObject({ orgId: org.orgId, name: "Web App", description: "The storefront", createdBy: userId })
        expect(created.id).toMatch(/^prj_/)
        const other = yield* projects.create(principal, { orgId: org.orgId, name: "Billing" })
        expect(other.description).toBe("")
        expect((yield* projects.list(principal, org.orgId)).map((p) => p.id)).toEqual([created.id, other.id])
        expect(yield* projects.get(principal, created.id)).toEqual(created)

        const renamed = yield* projects.update(principal, { projectId: created.id, name: "Web" })
        expect(renamed).toMatchObject({ name: "Web", description: "The storefront" })
        const described = yield* projects.update(principal, { projectId: created.id, description: "" })
        expect(described).toMatchObject({ name: "Web", description: "" })
        expect(yield* Effect.flip(projects.update(principal, { projectId: created.id }))).toMatchObject({ _tag: "NoFieldsToUpdate" })

        const deleted = yield* projects.delete(principal, created.id)
        expect(deleted.message).toContain(created.id)
        expect(yield* Effect.flip(projects.get(principal, created.id))).toMatchObject({ _tag: "ProjectNotFound" })
        const rows = (yield* outboxRows("events.project.deleted")).filter((r) => r.payload.project_id === created.id)
        expect(rows).toHaveLength(1)
        expect(rows[0]?.msg_id).toBe(`project.deleted.${created.id}`)
        expect(rows[0]?.payload).toEqual({ project_id: created.id, org_id: org.orgId, name: "Web", deleted_by_user_id: userId, deleted_at: expect.stringMatching(/Z$/) })
      })
    )

    it.effect("names are unique per org, case-insensitively; other orgs may reuse them", () =>
      Effect.gen(function* () {
        const projects = yield* Projects
        const { principal } = yield* signUp("dupes")
        const org = yield* createOrg(principal, "Dupes")
        const second = yield* createOrg(principal, "Dupes 2")
        const first = yield* projects.create(principal, { orgId: org.orgId, name: "API" })
        expect(yield* Effect.flip(projects.create(principal, { orgId: org.orgId, name: "api" }))).toMatchObject({ _tag: "ProjectNameTaken" })
        yield* projects.create(principal, { orgId: second.orgId, name: "API" })
        const web = yield* projects.create(principal, { orgId: org.orgId, name: "Web" })
        expect(yield* Effect.flip(projects.update(principal, { projectId: web.id, name: "Api" }))).toMatchObject({ _tag: "ProjectNameTaken" })
        // Renaming to its own name in another case is allowed.
        expect(yield* projects.update(principal, { projectId: first.id, name: "Api" })).toMatchObject({ name: "Api" })
      })
    )

    it.effect("validates names and descriptions", () =>
      Effect.gen(function* () {
        const projects = yield* Projects
        const { principal } = yield* signUp("validate")
        const org = yield* createOrg(principal, "Validate")
        for (const name of ["", "  ", "x".repeat(101), "bad\u0007name", "two\nlines"]) {
          expect(yield* Effect.flip(projects.create(principal, { orgId: org.orgId, name }))).toMatchObject({ _tag: "InvalidArgument", field: "name" })
        }
        expect(yield* Effect.flip(projects.create(principal, { orgId: org.orgId, name: "ok", description: "d".repeat(1001) }))).toMatchObject({
          _tag: "InvalidArgument",
          field: "description"
        })
        yield* projects.create(principal, { orgId: org.orgId, name: "x".repeat(100), description: "line 1\nline 2\ttab".padEnd(1000, ".") })
      })
    )

    it.effect("another org's project is not found; permissions follow the role table", () =>
      Effect.gen(function* () {
        const projects = yield* Projects
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal, "Roles")
        const stranger = yield* signUp("stranger")
        yield* createOrg(stranger.principal, "Elsewhere")
        const project = yield* projects.create(owner.principal, { orgId: org.orgId, name: "Shared" })

        expect(yield* Effect.flip(projects.get(stranger.principal, project.id))).toMatchObject({ _tag: "ProjectNotFound" })
        expect(yield* Effect.flip(projects.update(stranger.principal, { projectId: project.id, name: "x" }))).toMatchObject({ _tag: "ProjectNotFound" })
        expect(yield* Effect.flip(projects.delete(stranger.principal, project.id))).toMatchObject({ _tag: "ProjectNotFound" })
        expect(yield* Effect.flip(projects.list(stranger.principal, org.orgId))).toMatchObject({ _tag: "NotAMember" })
        expect(yield* Effect.flip(projects.create(stranger.principal, { orgId: org.orgId, name: "x" }))).toMatchObject({ _tag: "NotAMember" })

        const viewer = yield* addMember(owner.principal, org.orgId, "viewer")
        const member = yield* addMember(owner.principal, org.orgId, "member")
        const admin = yield* addMember(owner.principal, org.orgId, "admin")
        expect(yield* projects.list(viewer.principal, org.orgId)).toHaveLength(1)
        expect(yield* Effect.flip(projects.create(viewer.principal, { orgId: org.orgId, name: "v" }))).toMatchObject({ _tag: "PermissionDenied", permission: "projects.create" })
        expect(yield* Effect.flip(projects.update(viewer.principal, { projectId: project.id, name: "v" }))).toMatchObject({ _tag: "PermissionDenied" })
        const byMember = yield* projects.create(member.principal, { orgId: org.orgId, name: "By member" })
        yield* projects.update(member.principal, { projectId: byMember.id, description: "edited" })
        expect(yield* Effect.flip(projects.delete(member.principal, byMember.id))).toMatchObject({ _tag: "PermissionDenied", permission: "projects.delete" })
        yield* projects.delete(admin.principal, byMember.id)

        // An API key scoped to projects.read reads but cannot create.
        const reader = yield* createKey(owner.principal, org.orgId, ROLES.member.id, ["projects.read"])
        expect(yield* projects.get(reader.principal, project.id)).toMatchObject({ id: project.id })
        expect(yield* Effect.flip(projects.create(reader.principal, { orgId: org.orgId, name: "k" }))).toMatchObject({ _tag: "PermissionDenied" })
      })
    )
  })

  // Plan limits from the billing unit itself: an org billing has not set up yet is on free.
  const limitedLayer = IdentityWithBilling.pipe(Layer.provideMerge(Logger.minimumLogLevel(LogLevel.Warning)))
  layer(limitedLayer, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("a create beyond the plan's limit fails with PLAN_LIMIT_REACHED: billing's free plan, ten projects", () =>
      Effect.gen(function* () {
        const projects = yield* Projects
        const { principal } = yield* signUp("limited")
        const org = yield* createOrg(principal, "Limited")
        for (let n = 1; n <= 10; n++) yield* projects.create(principal, { orgId: org.orgId, name: `Project ${n}` })
        const refused = yield* Effect.flip(projects.create(principal, { orgId: org.orgId, name: "Eleven" }))
        expect(refused).toMatchObject({ _tag: "PlanLimitReached", limit: 10, planId: "free", resource: "projects" })
        expect(refused.message).toContain("free")
      })
    )
  })
})
