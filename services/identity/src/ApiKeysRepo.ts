import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { ApiKey } from "./domain/models.js"
import { knownRole } from "./domain/roles.js"
import type { ApiKeyMode } from "./domain/secrets.js"

interface ApiKeyRow {
  readonly id: string
  readonly org_id: string
  readonly name: string
  readonly mode: ApiKeyMode
  readonly key_prefix: string
  readonly role_id: string
  readonly scopes: ReadonlyArray<string>
  readonly created_by: string | null
  readonly created_at: Date
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  readonly last_used_at: Date | null
}

const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  mode: row.mode,
  keyPrefix: row.key_prefix,
  roleId: row.role_id,
  roleKey: knownRole(row.role_id).key,
  scopes: row.scopes,
  status: row.revoked_at === null ? "active" : "revoked",
  createdBy: row.created_by,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  revokedAt: row.revoked_at,
  lastUsedAt: row.last_used_at
})

/** What authenticating or authorizing with a key needs to know. */
export interface ActiveKey {
  readonly id: string
  readonly orgId: string
  readonly createdBy: string | null
  readonly roleId: string
  readonly scopes: ReadonlyArray<string>
  /** When the key stops working by itself; no standing or principal outlives it. */
  readonly expiresAt: Date | null
}

interface ActiveKeyRow {
  readonly id: string
  readonly org_id: string
  readonly created_by: string | null
  readonly role_id: string
  readonly scopes: ReadonlyArray<string>
  readonly expires_at: Date | null
}

const toActiveKey = (row: ActiveKeyRow): ActiveKey => ({
  id: row.id,
  orgId: row.org_id,
  createdBy: row.created_by,
  roleId: row.role_id,
  scopes: row.scopes,
  expiresAt: row.expires_at
})

/** Org API keys and their role grants. Secrets are stored as SHA-256 digests only. */
export class ApiKeysRepo extends Effect.Service<ApiKeysRepo>()("@scion/identity/ApiKeysRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const select = sql.literal(`
      select k.id, k.org_id, k.name, k.mode, k.key_prefix, g.role_id, k.scopes, k.created_by, k.created_at, k.expires_at, k.revoked_at, k.last_used_at
      from api_keys k join role_grants g on g.api_key_id = k.id`)
    const active = sql.literal("k.revoked_at is null and (k.expires_at is null or k.expires_at > now())")

    return {
      insert: (input: {
        id: string
        orgId: string
        name: string
        mode: ApiKeyMode
        keyPrefix: string
        secretDigest: string
        roleId: string
        scopes: ReadonlyArray<string>
        createdBy: string | null
        expiresAt: Date | null
        grantId: string
      }) =>
        sql`
          with k as (
            insert into api_keys (id, org_id, name, mode, key_prefix, secret_digest, scopes, created_by, expires_at)
            values (${input.id}, ${input.orgId}, ${input.name}, ${input.mode}, ${input.keyPrefix}, ${input.secretDigest},
                    ${input.scopes}::text[], ${input.createdBy}, ${input.expiresAt})
            returning id, org_id
          )
          insert into role_grants (id, org_id, api_key_id, role_id, granted_by_user_id)
          select ${input.grantId}, org_id, id, ${input.roleId}, ${input.createdBy} from k`.pipe(
          Effect.zipRight(sql<ApiKeyRow>`${select} where k.id = ${input.id}`),
          Effect.flatMap((rows) => Effect.fromNullable(rows[0])),
          Effect.map(toApiKey),
          Effect.orDie
        ),

      /**
       * The hot path for API keys: one read on the unique digest index. `stale` says whether
       * last_used_at is more than a minute old, so the caller can record use off the path.
       */
      authenticate: (secretDigest: string) =>
        sql<ActiveKeyRow & { readonly stale: boolean }>`
          select k.id, k.org_id, k.created_by, g.role_id, k.scopes, k.expires_at,
                 (k.last_used_at is null or k.last_used_at < now() - interval '1 minute') as stale
          from api_keys k join role_grants g on g.api_key_id = k.id
          where k.secret_digest = ${secretDigest} and ${active}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({ key: toActiveKey(row), stale: row.stale }))),
          Effect.orDie
        ),

      /** Records use, at most once a minute per key. */
      touch: (id: string) =>
        sql`update api_keys set last_used_at = now() where id = ${id} and (last_used_at is null or last_used_at < now() - interval '1 minute')`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),

      findActive: (id: string) =>
        sql<ActiveKeyRow>`
          select k.id, k.org_id, k.created_by, g.role_id, k.scopes, k.expires_at
          from api_keys k join role_grants g on g.api_key_id = k.id
          where k.id = ${id} and ${active}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toActiveKey)),
          Effect.orDie
        ),

      /** Active keys first (newest first), then revoked keys (most recently revoked first). */
      list: (orgId: string) =>
        sql<ApiKeyRow>`
          ${select} where k.org_id = ${orgId}
          order by (k.revoked_at is not null), coalesce(k.revoked_at, k.created_at) desc, k.id desc`.pipe(
          Effect.map((rows) => rows.map(toApiKey)),
          Effect.orDie
        ),

      /** False when the key is unknown in this org or already revoked. */
      revoke: (orgId: string, id: string) =>
        sql`update api_keys set revoked_at = now() where id = ${id} and org_id = ${orgId} and revoked_at is null returning id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )
    } as const
  })
}) {}
