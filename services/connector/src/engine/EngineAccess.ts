import { dieOnSqlError, engineCopyLockKey, type Principal, tracedFn } from "@scion/kit"
import { Effect, Option, Redacted } from "effect"
import type { BranchingEngineStatus } from "../domain/models.js"
import { ConnectorsRepo } from "../connectors/ConnectorsRepo.js"
import { maskingSuggestionsOf, type SuggestedMasking } from "../connectors/SchemaIntrospection.js"
import { ConnectorNotFound, EngineUnavailable, PermissionDenied, SourcePositionUnavailable } from "../domain/errors.js"
import { storedPostgresDetails } from "../connectors/StoredDetails.js"
import { SecretStore } from "../secrets/SecretStore.js"
import { EngineSetupRepo } from "./EngineSetupRepo.js"
import { sourceSession } from "./PgSession.js"
import { writeHeartbeat } from "../replication/SourceCapture.js"
import { EngineProvisioner } from "./EngineProvisioner.js"

export interface BranchingEngineView {
  readonly connectorId: string
  readonly orgId: string
  readonly branchingEngineStatus: BranchingEngineStatus
  readonly host: string
  readonly port: number
  readonly superuserUsername: string
  readonly superuserPassword: Redacted.Redacted<string>
  readonly mirrorDatabase: string
  readonly subscriptionNames: ReadonlyArray<string>
  /** The advisory lock a template copy and our subscription changes both take (engine.proto). */
  readonly copyLockKey: string
  readonly fileCopyClone: boolean
  readonly pooler: { readonly host: string; readonly port: number } | null
  readonly maskingSuggestions: ReadonlyArray<SuggestedMasking>
  /** The open quarantine, when the replication is quarantined (a released one until it is restored). */
  readonly quarantine: { readonly id: string; readonly reason: string; readonly detail: string } | null
}

/**
 * Other units' access to a connector's engine (EngineAccessService): only service principals, as
 * the answer carries the engine's superuser credentials. An engine that is set up is started when
 * it is not running (an engine outlives the unit that made it).
 */
export class EngineAccess extends Effect.Service<EngineAccess>()("@scion/connector/EngineAccess", {
  effect: Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const provisioner = yield* EngineProvisioner
    const secrets = yield* SecretStore
    const setups = yield* EngineSetupRepo

    const get = tracedFn("EngineAccess.get")(function* (principal: Principal, connectorId: string) {
      if (principal.kind !== "service") return yield* new PermissionDenied({ orgId: principal.orgId ?? "", permission: "engines.access (service principals only)" })
      // One statement: every branch create asks this twice.
      const found = yield* setups.accessRow(connectorId)
      if (Option.isNone(found)) return yield* new ConnectorNotFound({ connectorId })
      const row = found.value
      const base = {
        connectorId: row.id,
        orgId: row.org_id,
        branchingEngineStatus: row.branching_engine_status,
        // Derived when the selection was written (migration 0011 filled older rows); else from the structure.
        maskingSuggestions: row.selected_masking_suggestions ?? maskingSuggestionsOf(row.selected_schema_structure),
        quarantine:
          row.quarantine_id === null ? null : { id: row.quarantine_id, reason: row.quarantine_reason ?? "", detail: row.quarantine_detail ?? "" }
      }
      if (!row.has_engine || row.host === null || row.mirror_database === null || row.subscription_name === null) {
        return { ...base, host: "", port: 0, superuserUsername: "", superuserPassword: Redacted.make(""), mirrorDatabase: "", subscriptionNames: [], copyLockKey: "", fileCopyClone: false, pooler: null } satisfies BranchingEngineView
      }
      const engine = yield* provisioner.start(row.id).pipe(
        Effect.map(Option.some),
        Effect.catchTag("EngineError", (e) => new EngineUnavailable({ connectorId: row.id, reason: e.message })),
        // Set up once, gone since (destroyed by hand): report it as not branchable.
        Effect.catchTag("EngineNotFound", () => Effect.succeed(Option.none()))
      )
      if (Option.isNone(engine)) {
        return { ...base, branchingEngineStatus: "failed", host: "", port: 0, superuserUsername: "", superuserPassword: Redacted.make(""), mirrorDatabase: "", subscriptionNames: [], copyLockKey: "", fileCopyClone: false, pooler: null } satisfies BranchingEngineView
      }
      return {
        ...base,
        host: engine.value.host,
        port: engine.value.port,
        superuserUsername: engine.value.superuser.username,
        superuserPassword: engine.value.superuser.password,
        mirrorDatabase: row.mirror_database,
        subscriptionNames: [row.subscription_name],
        copyLockKey: engineCopyLockKey(row.mirror_database),
        fileCopyClone: engine.value.fileCopyClone === true,
        pooler: engine.value.pooler ?? null
      } satisfies BranchingEngineView
    })

    /** The source's current WAL position: what a read-your-writes branch waits for the mirror to reach. */
    const sourcePosition = tracedFn("EngineAccess.sourcePosition")(function* (principal: Principal, connectorId: string) {
      if (principal.kind !== "service") return yield* new PermissionDenied({ orgId: principal.orgId ?? "", permission: "engines.access (service principals only)" })
      const unavailable = (reason: string) => new SourcePositionUnavailable({ connectorId, reason })
      // The details are the one read on the way (a missing connector has none: told apart only then).
      const details = yield* storedPostgresDetails(connectorId).pipe(
        Effect.provideService(ConnectorsRepo, repo),
        Effect.provideService(SecretStore, secrets),
        Effect.catchTag("StoredDetailsUnusable", (e) =>
          Effect.flatMap(repo.find(connectorId), (found) => Effect.fail(Option.isNone(found) ? new ConnectorNotFound({ connectorId }) : unavailable(e.reason)))
        )
      )
      return yield* Effect.scoped(
        Effect.gen(function* () {
          const source = yield* sourceSession(details, details.password, { applicationName: "scion-engine-access", connectMillis: 5_000, queryMillis: 5_000 })
          const [row] = yield* source.query<{ lsn: string }>("select pg_current_wal_lsn()::text as lsn")
          // A published commit right after the position, so the mirror's applied position passes
          // it even when nothing the selection holds changes.
          yield* writeHeartbeat(source, connectorId).pipe(Effect.ignore)
          return row?.lsn ?? "0/0"
        })
      ).pipe(Effect.mapError((e) => unavailable(e.reason)))
    })

    return { get: (principal: Principal, connectorId: string) => dieOnSqlError(get(principal, connectorId)), sourcePosition } as const
  })
}) {}
