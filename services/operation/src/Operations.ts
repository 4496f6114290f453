import { SqlClient } from "@effect/sql"
import { Draining, type Principal, tracedFn, transactional } from "@scion/kit"
import { Clock, Duration, Effect, Either, Option } from "effect"
import { OperationConfig } from "./config.js"
import { InvalidArgument, NotAMember, OperationIdConflict, OperationNotFound } from "./domain/errors.js"
import { isTerminal, type NewOperation, type Operation, OPERATION_TYPES, type Report, SETUP_STATUS_TYPE } from "./domain/models.js"
import { decide } from "./domain/stateMachine.js"
import { OrgAccess } from "./Identity.js"
import { OperationChanges } from "./OperationChanges.js"
import { OperationsRepo } from "./OperationsRepo.js"

/** Operation ids are chosen by the unit that starts the work: `op_` and 1..120 URL-safe characters. */
export const OPERATION_ID = /^op_[A-Za-z0-9_-]{1,120}$/
export const MAX_WAIT_SECONDS = 10
const MAX_REFERENCE = 200
/** Rows a replica keeps of what it wrote last (see `remembered`). */
const MAX_REMEMBERED = 10_000

const invalid = (field: string, message: string) => new InvalidArgument({ field, message })

/** The operation state machine, org-scoped for the calling principal. */
export class Operations extends Effect.Service<Operations>()("@scion/operation/Operations", {
  effect: Effect.gen(function* () {
    const repo = yield* OperationsRepo
    const access = yield* OrgAccess
    const changes = yield* OperationChanges
    const config = yield* OperationConfig
    const draining = yield* Draining
    const sql = yield* SqlClient.SqlClient

    const transaction = transactional(sql)

    /**
     * The row as this replica last wrote it, by operation id, while the operation runs. A worker's
     * reports mostly reach the replica that created or last updated its operation, so the common
     * report is decided from this and written in one statement instead of a read and a write. The
     * write's version check makes a stale entry (another replica or the sweeper wrote since) cost
     * a read and a retry, never a lost update; and only a write is decided from an entry: a
     * refusal or an identical repeat is always decided from the row. Oldest first out.
     */
    const remembered = new Map<string, Operation>()
    const remember = (operation: Operation) =>
      Effect.sync(() => {
        remembered.delete(operation.id)
        if (isTerminal(operation.status)) return
        remembered.set(operation.id, operation)
        if (remembered.size > MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!)
      })

    const checkId = (id: string) => (OPERATION_ID.test(id) ? Effect.void : Effect.fail(invalid("id", "id must be op_ followed by 1..120 of A-Z a-z 0-9 _ -")))

    /** The operation if the principal may see it; another org's operation is not found, never forbidden. */
    const findVisible = (principal: Principal, id: string) =>
      Effect.gen(function* () {
        const found = yield* repo.find(id)
        if (Option.isNone(found)) return yield* new OperationNotFound({ operationId: id })
        if (!(yield* access.isMember(principal, found.value.orgId))) return yield* new OperationNotFound({ operationId: id })
        return found.value
      })

    const create = tracedFn("Operations.create")(function* (principal: Principal, input: NewOperation) {
      yield* checkId(input.id)
      if (input.orgId === "" || input.orgId.length > MAX_REFERENCE) return yield* invalid("org_id", "org_id is required")
      if (!OPERATION_TYPES.includes(input.type)) return yield* invalid("type", "type is required")
      if (input.resourceId === "" || input.resourceId.length > MAX_REFERENCE) {
        return yield* invalid("resource_id", `resource_id is required (at most ${MAX_REFERENCE} characters)`)
      }
      if (!(yield* access.isMember(principal, input.orgId))) return yield* new NotAMember({ orgId: input.orgId })
      const inserted = yield* repo.insert({ ...input, setupStatus: input.type === SETUP_STATUS_TYPE ? {} : null })
      if (Option.isSome(inserted)) {
        yield* remember(inserted.value)
        return { operation: inserted.value, created: true }
      }
      const existing = yield* repo.find(input.id).pipe(Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage(`operation ${input.id} vanished`), onSome: Effect.succeed })))
      if (existing.orgId === input.orgId && existing.type === input.type && existing.resourceId === input.resourceId) {
        return { operation: existing, created: false }
      }
      return yield* new OperationIdConflict({ operationId: input.id })
    })

    /**
     * One operation. With a wait, holds until it is completed or failed or the wait elapses:
     * subscribes to its change announcements first, then reads, so a change committed by any
     * replica between the read and the wait still wakes us; each announcement carries the
     * operation as written, and the row is re-read only when none came for a while.
     */
    const get = tracedFn("Operations.get")(function* (principal: Principal, id: string, waitSeconds: number) {
      if (!Number.isInteger(waitSeconds) || waitSeconds < 0 || waitSeconds > MAX_WAIT_SECONDS) {
        return yield* invalid("wait_seconds", `wait_seconds must be an integer from 0 to ${MAX_WAIT_SECONDS}`)
      }
      if (waitSeconds === 0) return yield* findVisible(principal, id)
      return yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* changes.subscribe(id)
          const deadline = (yield* Clock.currentTimeMillis) + waitSeconds * 1000
          let current: Operation = yield* findVisible(principal, id)
          while (!isTerminal(current.status)) {
            const remaining = deadline - (yield* Clock.currentTimeMillis)
            if (remaining <= 0) break
            const woke = yield* Effect.raceFirst(
              Effect.timeoutOption(subscription.next, Duration.millis(Math.min(remaining, config.waitRecheckSeconds * 1000))),
              Effect.as(draining.started, "draining" as const)
            )
            // This replica is shutting down: answer what we have, the client waits again elsewhere.
            if (woke === "draining") break
            if (Option.isSome(woke)) {
              // The change carries the operation as written: no re-read. Announcements may
              // arrive out of order; an older version never replaces a newer one.
              if (woke.value.version > current.version) current = woke.value
              continue
            }
            // Nothing heard for a while: an announcement may have been lost, so read the row.
            const reread = yield* repo.find(id)
            if (Option.isNone(reread)) return yield* new OperationNotFound({ operationId: id })
            current = reread.value
          }
          return current
        })
      )
    })

    /**
     * Applies a worker's report through the state machine; announces the change after it is
     * written. The common case costs one statement (decided from the row this replica wrote last,
     * written if its version still stands), or two: read, decide, write if the version is still
     * the one read. A report that loses that race (another write on the same operation came
     * first) decides again under the row lock, so contention never livelocks.
     */
    const report = tracedFn("Operations.report")(function* (principal: Principal, input: Report) {
      yield* checkId(input.id)
      const apply = (current: Operation) =>
        Effect.gen(function* () {
          const decision = decide(current, input)
          if (Either.isLeft(decision)) return yield* decision.left
          if (decision.right._tag === "Unchanged") return { operation: current, changed: false }
          const written = yield* repo.updateIfVersion(input.id, current.version, decision.right.changes)
          return Option.match(written, { onNone: () => undefined, onSome: (operation) => ({ operation, changed: true }) })
        })
      let outcome = yield* writeFromRemembered(principal, input)
      if (outcome === undefined) outcome = yield* apply(yield* findVisible(principal, input.id))
      if (outcome === undefined) {
        outcome = yield* transaction(
          Effect.gen(function* () {
            const locked = yield* repo.findForUpdate(input.id)
            if (Option.isNone(locked)) return yield* new OperationNotFound({ operationId: input.id })
            const applied = yield* apply(locked.value)
            return applied ?? (yield* Effect.dieMessage(`operation ${input.id} changed under its row lock`))
          })
        )
      }
      if (outcome.changed) {
        yield* remember(outcome.operation)
        yield* changes.publish(outcome.operation)
      }
      return outcome.operation
    })

    /** The report written against the remembered row, when that decides a write and the write lands. */
    const writeFromRemembered = (principal: Principal, input: Report) =>
      Effect.gen(function* () {
        const current = remembered.get(input.id)
        if (current === undefined || !(yield* access.isMember(principal, current.orgId))) return undefined
        const decision = decide(current, input)
        if (Either.isLeft(decision) || decision.right._tag !== "Update") return undefined
        const written = yield* repo.updateIfVersion(input.id, current.version, decision.right.changes)
        return Option.match(written, { onNone: () => undefined, onSome: (operation) => ({ operation, changed: true }) })
      })

    const list = tracedFn("Operations.list")(function* (principal: Principal, orgId: string, resourceId: string) {
      if (orgId === "") return yield* invalid("org_id", "org_id is required")
      if (resourceId === "") return yield* invalid("resource_id", "resource_id is required")
      if (!(yield* access.isMember(principal, orgId))) return yield* new NotAMember({ orgId })
      return yield* repo.listByResource(orgId, resourceId)
    })

    return { create, get, report, list } as const
  })
}) {}
