import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import { type Branch, BranchStatus, type Snapshot, SnapshotStatus } from "@scion/proto/scion/branch/v1/branch_pb"

/**
 * The interface's Branch, as JSON: one presenter for both places a branch is answered — the
 * branch_create operation's result (the branch unit) and GET/list (the gateway). The gateway's
 * schema is checked against BranchJson, so a field added to one and not the other fails to compile.
 */
export interface BranchJson {
  readonly branch_id: string
  readonly name: string
  readonly connector_id: string
  readonly service_type: "postgres"
  readonly status: BranchStatusName
  readonly branch_url: string | null
  readonly pooled_branch_url: string | null
  readonly pooled_branch_prisma_url: string | null
  readonly created_at: string
  readonly read_ready_at: string | null
  readonly write_ready_at: string | null
  readonly masked_ready_at: string | null
  readonly error: string | null
  readonly data_as_of: string | null
  readonly source_lsn: string | null
  readonly protected: boolean
  readonly expires_at: string | null
  readonly snapshot_id: string | null
}

export type BranchStatusName = "creating" | "active" | "deleting" | "deleted" | "failed"

const branchStatuses = {
  [BranchStatus.UNSPECIFIED]: undefined,
  [BranchStatus.CREATING]: "creating",
  [BranchStatus.ACTIVE]: "active",
  [BranchStatus.DELETING]: "deleting",
  [BranchStatus.DELETED]: "deleted",
  [BranchStatus.FAILED]: "failed"
} as const satisfies Record<BranchStatus, BranchStatusName | undefined>

const branchStatusesByName = {
  creating: BranchStatus.CREATING,
  active: BranchStatus.ACTIVE,
  deleting: BranchStatus.DELETING,
  deleted: BranchStatus.DELETED,
  failed: BranchStatus.FAILED
} as const satisfies Record<BranchStatusName, BranchStatus>

/** A branch status on the wire (the branch unit's answers). */
export const branchStatusToProto = (status: BranchStatusName): BranchStatus => branchStatusesByName[status]

/** A branch whose wire form breaks the contract (an unknown status, no creation time): a defect. */
export class BranchContractViolation extends Error {
  constructor(readonly field: string) {
    super(`the branch unit answered a branch without a valid ${field}`)
  }
}

const iso = (ts: Timestamp | undefined) => (ts === undefined ? null : timestampDate(ts).toISOString())

export const branchJson = (b: Branch): BranchJson => {
  const status = branchStatuses[b.status]
  if (status === undefined) throw new BranchContractViolation("status")
  const createdAt = iso(b.createdAt)
  if (createdAt === null) throw new BranchContractViolation("created_at")
  return {
    branch_id: b.branchId,
    name: b.name,
    connector_id: b.connectorId,
    service_type: "postgres",
    status,
    branch_url: b.branchUrl ?? null,
    pooled_branch_url: b.pooledBranchUrl ?? null,
    pooled_branch_prisma_url: b.pooledBranchPrismaUrl ?? null,
    created_at: createdAt,
    read_ready_at: iso(b.readReadyAt),
    write_ready_at: iso(b.writeReadyAt),
    masked_ready_at: iso(b.maskedReadyAt),
    error: b.error ?? null,
    data_as_of: iso(b.dataAsOf),
    source_lsn: b.sourceLsn ?? null,
    protected: b.protected,
    expires_at: iso(b.expiresAt),
    snapshot_id: b.snapshotId ?? null
  }
}

/** The Snapshot JSON (our extension): GET/list at the gateway and the snapshot_create result. */
export interface SnapshotJson {
  readonly snapshot_id: string
  readonly connector_id: string
  readonly name: string
  readonly status: SnapshotStatusName
  readonly data_as_of: string | null
  readonly source_lsn: string | null
  readonly error: string | null
  readonly created_at: string
}

export type SnapshotStatusName = "creating" | "ready" | "deleting" | "deleted" | "failed"

const snapshotStatuses = {
  [SnapshotStatus.UNSPECIFIED]: undefined,
  [SnapshotStatus.CREATING]: "creating",
  [SnapshotStatus.READY]: "ready",
  [SnapshotStatus.DELETING]: "deleting",
  [SnapshotStatus.DELETED]: "deleted",
  [SnapshotStatus.FAILED]: "failed"
} as const satisfies Record<SnapshotStatus, SnapshotStatusName | undefined>

const snapshotStatusesByName = {
  creating: SnapshotStatus.CREATING,
  ready: SnapshotStatus.READY,
  deleting: SnapshotStatus.DELETING,
  deleted: SnapshotStatus.DELETED,
  failed: SnapshotStatus.FAILED
} as const satisfies Record<SnapshotStatusName, SnapshotStatus>

/** A snapshot status on the wire (the branch unit's answers). */
export const snapshotStatusToProto = (status: SnapshotStatusName): SnapshotStatus => snapshotStatusesByName[status]

export const snapshotJson = (s: Snapshot): SnapshotJson => {
  const status = snapshotStatuses[s.status]
  if (status === undefined) throw new BranchContractViolation("snapshot status")
  const createdAt = iso(s.createdAt)
  if (createdAt === null) throw new BranchContractViolation("snapshot created_at")
  return {
    snapshot_id: s.snapshotId,
    connector_id: s.connectorId,
    name: s.name,
    status,
    data_as_of: iso(s.dataAsOf),
    source_lsn: s.sourceLsn ?? null,
    error: s.error ?? null,
    created_at: createdAt
  }
}
