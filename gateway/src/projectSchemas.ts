import { Schema } from "effect"

// ---------------------------------------------------------------------------------------------
// Projects: org-scoped metadata served by identity. The interface leaves the bodies unshown;
// these are ours (services/identity/README.md, "Projects").
// ---------------------------------------------------------------------------------------------

const Timestamp = Schema.String.annotations({ description: "ISO 8601 timestamp, UTC", jsonSchema: { format: "date-time" } })
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({ description: "An opaque id" })

// C0/C1 control characters; descriptions may still use line breaks and tabs.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
const CONTROL_BUT_WHITESPACE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/

const nameText = "The project's name: 1..100 characters after trimming surrounding whitespace, no control characters; unique in the org (case-insensitive)"
export const ProjectName = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.minLength(1),
    Schema.maxLength(100),
    Schema.filter((s) => !CONTROL.test(s), { message: () => "Value must not contain control characters" })
  )
).annotations({ description: nameText, jsonSchema: { type: "string", minLength: 1, maxLength: 100, description: nameText } })

const descriptionText = "Free text of at most 1000 characters after trimming; line breaks and tabs allowed, other control characters not. Empty clears it."
export const ProjectDescription = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.maxLength(1000),
    Schema.filter((s) => !CONTROL_BUT_WHITESPACE.test(s), { message: () => "Value must not contain control characters other than line breaks and tabs" })
  )
).annotations({ description: descriptionText, jsonSchema: { type: "string", maxLength: 1000, description: descriptionText } })

export const ProjectPath = Schema.Struct({ project_id: Id })

export const ProjectListQuery = Schema.Struct({
  org_id: Id.annotations({ description: "The org whose projects to list (required)" })
})

export const CreateProjectRequest = Schema.Struct({
  org_id: Id.annotations({ description: "The org the project belongs to; an API key may name only its own org" }),
  name: ProjectName,
  description: Schema.optional(ProjectDescription)
}).annotations({ identifier: "CreateProjectRequest" })

export const UpdateProjectRequest = Schema.Struct({
  name: Schema.optional(ProjectName),
  description: Schema.optional(ProjectDescription)
}).annotations({ identifier: "UpdateProjectRequest", description: "Only the fields given change; an object with neither is 400." })

export const Project = Schema.Struct({
  project_id: Schema.String,
  org_id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String).annotations({ description: "null when none was given" }),
  created_by: Schema.NullOr(Schema.String).annotations({ description: "The creating user; null for an API key whose creator is gone, or once the user is deleted" }),
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "Project" })

export const ProjectList = Schema.Struct({ projects: Schema.Array(Project) }).annotations({
  identifier: "ProjectList",
  description: "The org's projects, oldest first"
})

export const ProjectDeleted = Schema.Struct({ message: Schema.String }).annotations({ identifier: "ProjectDeleted" })
