-- Discovery and selection (issue 5). The jobs this unit starts go through its own outbox (kit's
-- outboxDdl), written in the same transaction as the connector's state.
create table if not exists outbox (
  id           bigserial primary key,
  subject      text not null,
  msg_id       text not null unique,
  payload      jsonb not null,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
create index if not exists outbox_unpublished on outbox (id) where published_at is null;

alter table connectors
  -- The discovery operation last started for the connector: a discover while it is still pending
  -- or running joins it (the operation unit says which).
  add column discovery_operation_id text,
  -- Stable digest of schema_structure without row estimates and sizes: schema_version moves only
  -- when this changes.
  add column schema_hash text,
  add column last_discovered_at timestamptz,
  -- Bumped by every replica-identity decisions write: a write made against an older one is a
  -- conflict (409), so two concurrent writers cannot silently merge.
  add column replica_identity_decisions_version integer not null default 0;

-- One row per finished discovery operation: a redelivered job finds its outcome here and answers
-- the same result instead of bumping schema_version twice.
create table discovery_runs (
  operation_id   text primary key,
  connector_id   text not null references connectors (id) on delete cascade,
  schema_version integer not null,
  changed        boolean not null,
  result         jsonb not null,
  finished_at    timestamptz not null default now()
);
