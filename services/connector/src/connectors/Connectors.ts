import { transactional, tracedFn } from "@scion/kit"
import { ProjectDirectory } from "../ProjectDirectory.js"
import { SqlClient } from "@effect/sql"
import type { Principal } from "@scion/kit"
import { Effect, Option, Redacted } from "effect"
import { ConnectorNotFound, InvalidArgument, InvalidConnectionDetails, PreflightFailed, PrivateLinkRequired, SecretStoreFailure } from "../domain/errors.js"
import { Ids } from "../domain/ids.js"
import type { Byoc, Connector, ConnectorAccess } from "../domain/models.js"
import { Entitlements } from "../Entitlements.js"
import { EnvironmentsRepo } from "../EnvironmentsRepo.js"
import { type AccessError, type ConnectorPermission, OrgAccess } from "../Identity.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { type ValidDetails, validateDetails } from "./ConnectionDetails.js"
import { CONNECTION_DETAILS, ConnectorsRepo } from "./ConnectorsRepo.js"
import { type PreflightReport, reportOf, SourceProbe } from "./Preflight.js"

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

const invalid = (field: string, message: string) => Effect.fail(new InvalidArgument({ field, message }))

/** The associated data binding a connector's details to that connector and that use. */
export const connectorSecretAad = (connectorId: string) => `connector:${connectorId}:${CONNECTION_DETAILS}`

/** Where the connector's engine runs and through which network path. */
export interface Placement {
  readonly byoc: Byoc | null
  readonly useEnvironment: boolean
  readonly environmentId: string | null
  readonly privateLinkId: string | null
}

export interface PreflightInput {
  readonly orgId: string
  readonly serviceName: string
  /** Redacted from the moment the request arrives: no log line can print it. */
  readonly connectionDetails: Redacted.Redacted<unknown>
  readonly environmentId?: string | undefined
  readonly privateLinkId?: string | undefined
}

export interface CreateInput extends PreflightInput {
  readonly projectId?: string | undefined
  readonly name?: string | undefined
  readonly byoc?: string | undefined
  readonly useEnvironment: boolean
}

export interface ConnectorView {
  readonly connector: Connector
  readonly access: ConnectorAccess
}

const optionalText = (field: string, value: string | undefined, max = 200) => {
  const trimmed = value?.trim() ?? ""
  if (trimmed === "") return Effect.succeed(null)
  if (trimmed.length > max || CONTROL.test(trimmed)) return invalid(field, `${field} must be at most ${max} characters without control characters`)
  return Effect.succeed(trimmed)
}

const defaultName = (valid: ValidDetails) => (valid.serviceName === "postgresql" ? `${valid.details.database}@${valid.details.host}` : valid.details.organization)

/** Non-PostgreSQL services have nothing to probe at preflight: the report says so honestly. */
const shapeOnlyReport = (serviceName: string): PreflightReport => ({
  preflight_pass: true,
  checks: [{ id: "connection_details", status: "pass", message: `${serviceName} connection_details are well formed (checked by shape only; no call to ${serviceName} is made)`, remedy: null }],
  provider: serviceName
})

/**
 * Connectors: preflight, create, read and update, with connection details kept only in the
 * secret store. Another org's connector answers as a missing one; lists and creates in an org
 * the caller does not belong to are NOT_A_MEMBER.
 */
export class Connectors extends Effect.Service<Connectors>()("@scion/connector/Connectors", {
  effect: Effect.gen(function* () {
    const access = yield* OrgAccess
    const repo = yield* ConnectorsRepo
    const environments = yield* EnvironmentsRepo
    const entitlements = yield* Entitlements
    const secrets = yield* SecretStore
    const probe = yield* SourceProbe
    const projects = yield* ProjectDirectory
    const sql = yield* SqlClient.SqlClient

    const transaction = transactional(sql)

    /** An API key acts in its own org; a session caller must name one. */
    const orgOf = (principal: Principal, orgId: string) => {
      const named = orgId.trim()
      if (named !== "") return Effect.succeed(named)
      if (principal.kind === "api_key" && principal.orgId !== undefined && principal.orgId !== null) return Effect.succeed(principal.orgId)
      return invalid("org_id", "org_id is required")
    }

    /** Whether the caller holds a permission; refusals are a false, other failures pass through. */
    const holds = (principal: Principal, orgId: string, permission: ConnectorPermission) =>
      access.require(principal, orgId, permission).pipe(
        Effect.as(true),
        Effect.catchTags({ PermissionDenied: () => Effect.succeed(false), NotAMember: () => Effect.succeed(false) })
      )

    const accessOf = (principal: Principal, orgId: string) =>
      Effect.all({ canUpdate: holds(principal, orgId, "connectors.update"), canDelete: holds(principal, orgId, "connectors.delete") }, { concurrency: 2 })

    /** The connector if the caller holds `permission` in its org; other orgs' are not found. */
    const visible = (principal: Principal, connectorId: string, permission: ConnectorPermission) =>
      Effect.gen(function* () {
        const found = yield* repo.find(connectorId)
        if (Option.isNone(found)) return yield* new ConnectorNotFound({ connectorId })
        yield* access
          .require(principal, found.value.orgId, permission)
          .pipe(Effect.catchTag("NotAMember", (): Effect.Effect<void, AccessError | ConnectorNotFound> => Effect.fail(new ConnectorNotFound({ connectorId }))))
        return found.value
      })

    /**
     * The environment named for placement must be the org's; an environment with an active
     * private link needs private_link_id (the interface's 400), and it must be that link.
     */
    const checkPlacement = (orgId: string, input: { environmentId?: string | undefined; privateLinkId?: string | undefined; byoc?: string | undefined; useEnvironment?: boolean }) =>
      Effect.gen(function* () {
        const byocRaw = input.byoc?.trim() ?? ""
        if (byocRaw !== "" && byocRaw !== "environment" && byocRaw !== "self_managed") {
          return yield* invalid("byoc", "byoc must be null, environment or self_managed")
        }
        const byoc = byocRaw === "" ? null : (byocRaw as Byoc)
        const environmentId = yield* optionalText("environment_id", input.environmentId)
        const privateLinkId = yield* optionalText("private_link_id", input.privateLinkId)
        const useEnvironment = input.useEnvironment === true
        if ((useEnvironment || byoc === "environment") && environmentId === null) {
          return yield* invalid("environment_id", "environment_id is required with use_environment or byoc environment")
        }
        if (environmentId !== null) {
          const environment = yield* environments.find(environmentId)
          if (Option.isNone(environment) || environment.value.orgId !== orgId) {
            return yield* invalid("environment_id", `environment ${environmentId} is not an environment of org ${orgId}`)
          }
          if (environment.value.privateLinkStatus === "active") {
            if (privateLinkId === null) return yield* new PrivateLinkRequired({ environmentId })
            if (privateLinkId !== environment.value.privateLinkId) {
              return yield* invalid("private_link_id", `private_link_id is not the private link of environment ${environmentId}`)
            }
          }
        }
        return { byoc, useEnvironment, environmentId, privateLinkId } satisfies Placement
      })

    /** Probes a PostgreSQL source (or vouches for a code host's shape); never stores anything. */
    const runPreflight = (valid: ValidDetails) =>
      valid.serviceName === "postgresql" ? Effect.map(probe.probe(valid.details, valid.details.password), (outcome) => reportOf(outcome, valid.details)) : Effect.succeed(shapeOnlyReport(valid.serviceName))

    /** The gate create and update run: a failing report is PreflightFailed with the whole report. */
    const gate = (valid: ValidDetails, byoc: Byoc | null) =>
      Effect.gen(function* () {
        // self_managed: the customer runs the engine; non-PostgreSQL: nothing to replicate from.
        if (valid.serviceName !== "postgresql" || byoc === "self_managed") return null
        const report = yield* runPreflight(valid)
        if (!report.preflight_pass) return yield* new PreflightFailed({ report })
        return report.provider
      })

    const encryptDetails = (connectorId: string, valid: ValidDetails) => secrets.encrypt(Redacted.make(JSON.stringify(valid.details)), connectorSecretAad(connectorId))

    const readDetails = (connector: Connector) =>
      Effect.gen(function* () {
        const envelope = yield* repo.getDetails(connector.id)
        if (Option.isNone(envelope)) return yield* new SecretStoreFailure({ reason: "the connector's connection details are missing" })
        const plaintext = yield* secrets.decrypt(envelope.value, connectorSecretAad(connector.id))
        return yield* Effect.try({
          try: () => JSON.parse(Redacted.value(plaintext)) as Record<string, unknown>,
          catch: () => new SecretStoreFailure({ reason: "the stored connection details are not readable" })
        })
      })

    const reread = (connectorId: string) =>
      Effect.flatMap(repo.find(connectorId), Option.match({ onNone: () => Effect.fail(new ConnectorNotFound({ connectorId })), onSome: Effect.succeed }))

    const preflight = tracedFn("Connectors.preflight")(function* (principal: Principal, input: PreflightInput) {
      const orgId = yield* orgOf(principal, input.orgId)
      yield* access.require(principal, orgId, "connectors.create")
      const valid = yield* validateDetails(input.serviceName.trim(), Redacted.value(input.connectionDetails))
      yield* checkPlacement(orgId, input)
      const report = yield* runPreflight(valid)
      yield* Effect.logInfo("preflight probed").pipe(Effect.annotateLogs({ org_id: orgId, service_name: valid.serviceName, pass: report.preflight_pass, provider: report.provider }))
      return report
    })

    const create = tracedFn("Connectors.create")(function* (principal: Principal, input: CreateInput) {
      const orgId = yield* orgOf(principal, input.orgId)
      yield* access.require(principal, orgId, "connectors.create")
      const valid = yield* validateDetails(input.serviceName.trim(), Redacted.value(input.connectionDetails))
      const placement = yield* checkPlacement(orgId, input)
      const projectId = yield* optionalText("project_id", input.projectId)
      if (projectId !== null && !(yield* projects.inOrg(principal, orgId, projectId))) {
        return yield* invalid("project_id", `project ${projectId} is not a project of org ${orgId}`)
      }
      const name = (yield* optionalText("name", input.name)) ?? defaultName(valid).slice(0, 200)
      // A full plan is refused before the source is probed; the check is repeated under the lock.
      yield* entitlements.requireRoom(orgId, "connectors", yield* repo.countByOrg(orgId))
      // The gate runs before any row or secret exists: a failing source leaves nothing behind.
      const sourceProvider = yield* gate(valid, placement.byoc)
      const id = yield* Ids.connector
      const envelope = yield* encryptDetails(id, valid)
      yield* transaction(
        Effect.gen(function* () {
          yield* repo.lockOrg(orgId)
          yield* entitlements.requireRoom(orgId, "connectors", yield* repo.countByOrg(orgId))
          yield* repo.insert({
            id,
            orgId,
            projectId,
            name,
            serviceName: valid.serviceName,
            connectorCategory: valid.category,
            ...placement,
            sourceProvider,
            createdBy: principal.userId ?? null
          })
          yield* repo.putDetails(id, envelope)
        })
      )
      yield* Effect.logInfo("connector created").pipe(Effect.annotateLogs({ org_id: orgId, connector_id: id, service_name: valid.serviceName }))
      return { connector: yield* reread(id), access: yield* accessOf(principal, orgId) } satisfies ConnectorView
    })

    const list = tracedFn("Connectors.list")(function* (
      principal: Principal,
      input: { orgId: string; connectorCategory?: string | undefined; serviceName?: string | undefined }
    ) {
      const orgId = yield* orgOf(principal, input.orgId)
      yield* access.require(principal, orgId, "connectors.read")
      const connectors = yield* repo.listByOrg(orgId, {
        connectorCategory: input.connectorCategory?.trim() || undefined,
        serviceName: input.serviceName?.trim() || undefined
      })
      const rights = yield* accessOf(principal, orgId)
      return connectors.map((connector): ConnectorView => ({ connector, access: rights }))
    })

    const get = tracedFn("Connectors.get")(function* (principal: Principal, connectorId: string) {
      const connector = yield* visible(principal, connectorId, "connectors.read")
      return { connector, access: yield* accessOf(principal, connector.orgId) } satisfies ConnectorView
    })

    /**
     * Renames and/or replaces the details. Details that differ from the stored ones are re-tested
     * with the create gate (same skips) and reset indexing_status; identical ones change nothing.
     */
    const update = tracedFn("Connectors.update")(function* (
      principal: Principal,
      input: { connectorId: string; name?: string | undefined; connectionDetails?: Redacted.Redacted<unknown> | undefined }
    ) {
      const connector = yield* visible(principal, input.connectorId, "connectors.update")
      if (input.name === undefined && input.connectionDetails === undefined) return yield* invalid("body", "No fields to update: send name and/or connection_details")
      const name = input.name === undefined ? undefined : yield* optionalText("name", input.name)
      if (input.name !== undefined && name === null) return yield* invalid("name", "name must not be empty")
      let detailsChanged = false
      let sourceProvider: string | null = connector.sourceProvider
      let envelope = Option.none<Effect.Effect.Success<ReturnType<typeof encryptDetails>>>()
      if (input.connectionDetails !== undefined) {
        const valid = yield* validateDetails(connector.serviceName, Redacted.value(input.connectionDetails)).pipe(
          // The service of a connector is fixed: an unsupported one here is a stored row we cannot read.
          Effect.catchTag("UnsupportedService", (e) => Effect.fail(new InvalidConnectionDetails({ serviceName: e.serviceName, problem: "the connector's service no longer accepts details" })))
        )
        const stored = yield* readDetails(connector)
        detailsChanged = JSON.stringify(stored) !== JSON.stringify(valid.details)
        if (detailsChanged) {
          sourceProvider = yield* gate(valid, connector.byoc)
          envelope = Option.some(yield* encryptDetails(connector.id, valid))
        }
      }
      yield* transaction(
        Effect.gen(function* () {
          yield* repo.update(connector.id, { name: name ?? undefined, detailsChanged, sourceProvider })
          if (Option.isSome(envelope)) yield* repo.putDetails(connector.id, envelope.value)
        })
      )
      yield* Effect.logInfo("connector updated").pipe(Effect.annotateLogs({ connector_id: connector.id, details_changed: detailsChanged }))
      return { connector: yield* reread(connector.id), access: yield* accessOf(principal, connector.orgId) } satisfies ConnectorView
    })

    /** The decrypted details, for callers who may change them (connectors.update). */
    const connectionDetails = tracedFn("Connectors.connectionDetails")(function* (principal: Principal, connectorId: string) {
      const connector = yield* visible(principal, connectorId, "connectors.update")
      const details = yield* readDetails(connector)
      yield* Effect.logInfo("connection details read").pipe(Effect.annotateLogs({ connector_id: connector.id }))
      return details
    })

    return { preflight, create, list, get, update, connectionDetails, visible } as const
  })
}) {}
