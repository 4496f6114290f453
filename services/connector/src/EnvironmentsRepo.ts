import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { ApiKeyInfo, AwsAccountConnection, Cloud, Environment, PrivateLinkStatus } from "./domain/models.js"
import type { Envelope } from "./secrets/SecretStore.js"

/** The secret name of an environment's database-provider API key in the secrets table. */
export const DB_PROVIDER_API_KEY = "db_provider_api_key"

interface ConnectionRow {
  readonly id: string
  readonly environment_id: string
  readonly org_id: string
  readonly aws_account_id: string
  readonly external_id: string
  readonly role_arn: string | null
  readonly status: "pending" | "connected"
  readonly created_at: Date
  readonly updated_at: Date
  readonly connected_at: Date | null
}

interface EnvironmentRow {
  readonly id: string
  readonly org_id: string
  readonly name: string
  readonly cloud: Cloud
  readonly region: string
  readonly private_link_id: string | null
  readonly private_link_status: PrivateLinkStatus | null
  readonly created_by: string | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly connection: ConnectionRow | null
  readonly key_fingerprint: string | null
  readonly key_last4: string | null
  readonly key_rotated_at: Date | null
}

const toConnection = (row: ConnectionRow): AwsAccountConnection => ({
  id: row.id,
  environmentId: row.environment_id,
  orgId: row.org_id,
  awsAccountId: row.aws_account_id,
  externalId: row.external_id,
  roleArn: row.role_arn,
  status: row.status,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
  connectedAt: row.connected_at === null ? null : new Date(row.connected_at)
})

const toEnvironment = (row: EnvironmentRow): Environment => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  cloud: row.cloud,
  region: row.region,
  privateLinkId: row.private_link_id,
  privateLinkStatus: row.private_link_status,
  // Read through to_jsonb: timestamps arrive as strings.
  awsAccountConnection: row.connection === null ? null : toConnection(row.connection),
  dbProviderApiKey:
    row.key_fingerprint === null || row.key_rotated_at === null ? null : { fingerprint: row.key_fingerprint, last4: row.key_last4 ?? "", rotatedAt: row.key_rotated_at },
  createdBy: row.created_by,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

/** Environments, their AWS account connections and their secrets' metadata. */
export class EnvironmentsRepo extends Effect.Service<EnvironmentsRepo>()("@scion/connector/EnvironmentsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const select = sql.literal(`
      select e.id, e.org_id, e.name, e.cloud, e.region, e.private_link_id, e.private_link_status, e.created_by, e.created_at, e.updated_at,
             (select to_jsonb(c) from aws_account_connections c where c.environment_id = e.id) as connection,
             s.fingerprint as key_fingerprint, s.last4 as key_last4, s.rotated_at as key_rotated_at
      from environments e
      left join secrets s on s.owner_id = e.id and s.name = '${DB_PROVIDER_API_KEY}'`)
    const connectionColumns = sql.literal("id, environment_id, org_id, aws_account_id, external_id, role_arn, status, created_at, updated_at, connected_at")

    const find = (environmentId: string) =>
      sql<EnvironmentRow>`${select} where e.id = ${environmentId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toEnvironment)),
        Effect.orDie
      )

    return {
      find,

      listByOrg: (orgId: string) =>
        sql<EnvironmentRow>`${select} where e.org_id = ${orgId} order by e.created_at, e.id`.pipe(
          Effect.map((rows) => rows.map(toEnvironment)),
          Effect.orDie
        ),

      countByOrg: (orgId: string) =>
        sql<{ readonly n: number }>`select count(*)::int as n from environments where org_id = ${orgId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Effect.orDie
        ),

      /**
       * Serialises creates in one org for the transaction (this unit holds no org rows to lock),
       * so two concurrent creates cannot both take the plan's last slot.
       */
      lockOrg: (orgId: string) => sql`select pg_advisory_xact_lock(hashtextextended(${`environments:${orgId}`}, 0))`.pipe(Effect.asVoid, Effect.orDie),

      /** False when the org already has an environment of that name (case-insensitive). */
      insert: (input: {
        id: string
        orgId: string
        name: string
        cloud: Cloud
        region: string
        privateLinkId: string | null
        privateLinkStatus: PrivateLinkStatus | null
        createdBy: string | null
      }) =>
        sql`
          insert into environments (id, org_id, name, cloud, region, private_link_id, private_link_status, created_by)
          values (${input.id}, ${input.orgId}, ${input.name}, ${input.cloud}, ${input.region}, ${input.privateLinkId}, ${input.privateLinkStatus}, ${input.createdBy})
          on conflict do nothing
          returning id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),

      /** The environment's pending connection, replacing any earlier one (new id, new external id). */
      upsertConnection: (input: { id: string; environmentId: string; orgId: string; awsAccountId: string; externalId: string }) =>
        sql<ConnectionRow>`
          insert into aws_account_connections (id, environment_id, org_id, aws_account_id, external_id, status)
          values (${input.id}, ${input.environmentId}, ${input.orgId}, ${input.awsAccountId}, ${input.externalId}, 'pending')
          on conflict (environment_id) do update set
            id = excluded.id, aws_account_id = excluded.aws_account_id, external_id = excluded.external_id,
            role_arn = null, status = 'pending', created_at = now(), updated_at = now(), connected_at = null
          returning ${connectionColumns}`.pipe(
          Effect.map((rows) => toConnection(rows[0]!)),
          Effect.orDie
        ),

      findConnection: (connectionId: string) =>
        sql<ConnectionRow>`select ${connectionColumns} from aws_account_connections where id = ${connectionId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toConnection)),
          Effect.orDie
        ),

      connect: (connectionId: string, roleArn: string) =>
        sql<ConnectionRow>`
          update aws_account_connections set role_arn = ${roleArn}, status = 'connected', updated_at = now(), connected_at = coalesce(connected_at, now())
          where id = ${connectionId}
          returning ${connectionColumns}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toConnection)),
          Effect.orDie
        ),

      /** Stores (or replaces) an encrypted secret: the old envelope is overwritten, never kept. */
      putSecret: (input: { ownerId: string; name: string; envelope: Envelope; fingerprint: string; last4: string }) =>
        sql<{ readonly fingerprint: string; readonly last4: string; readonly rotated_at: Date }>`
          insert into secrets (owner_id, name, envelope, key_id, fingerprint, last4)
          values (${input.ownerId}, ${input.name}, ${JSON.stringify(input.envelope)}::jsonb, ${input.envelope.key_id}, ${input.fingerprint}, ${input.last4})
          on conflict (owner_id, name) do update set
            envelope = excluded.envelope, key_id = excluded.key_id, fingerprint = excluded.fingerprint, last4 = excluded.last4, rotated_at = clock_timestamp()
          returning fingerprint, last4, rotated_at`.pipe(
          Effect.map((rows): ApiKeyInfo => ({ fingerprint: rows[0]!.fingerprint, last4: rows[0]!.last4, rotatedAt: rows[0]!.rotated_at })),
          Effect.orDie
        ),

      getSecret: (ownerId: string, name: string) =>
        sql<{ readonly envelope: Envelope }>`select envelope from secrets where owner_id = ${ownerId} and name = ${name}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.envelope)),
          Effect.orDie
        ),

      touch: (environmentId: string) => sql`update environments set updated_at = now() where id = ${environmentId}`.pipe(Effect.asVoid, Effect.orDie)
    } as const
  })
}) {}
