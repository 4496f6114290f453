import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt"
import type { Branch } from "@scion/proto/scion/branch/v1/branch_pb"

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
  creating: "creating",
  active: "active",
  deleting: "deleting",
  deleted: "deleted",
  failed: "failed"
} as const satisfies Record<BranchStatusName, BranchStatusName>

/** A branch whose wire form breaks the contract (an unknown status, no creation time): a defect. */
export class BranchContractViolation extends Error {
  constructor(readonly field: string) {
    super(`the branch unit answered a branch without a valid ${field}`)
  }
}

const iso = (ts: Timestamp | undefined) => (ts === undefined ? null : timestampDate(ts).toISOString())

export const branchJson = (b: Branch): BranchJson => {
  const status = branchStatuses[b.status as BranchStatusName]
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
