-- Branches cut from connectors' engines, the idempotency records of their creates, masking rules,
-- and the outbox of branch jobs.

create table branches (
  id                  text primary key,
  org_id              text not null,
  connector_id        text not null,
  name                text not null,
  service_type        text not null default 'postgres',
  -- creating → active → deleting → deleted; creating → failed (nothing left on the engine).
  status              text not null check (status in ('creating', 'active', 'deleting', 'deleted', 'failed')),
  -- On the engine: the database and the login role, named from the branch id.
  database_name       text not null unique,
  role_name           text not null unique,
  -- The role's password, AES-256-GCM encrypted (bound to the branch id); never stored in clear.
  password_envelope   jsonb,
  -- Where the branch was cut (the engine can move later; URLs are built from these).
  engine_host         text,
  engine_port         integer,
  pooler_host         text,
  pooler_port         integer,
  create_operation_id text not null unique,
  delete_operation_id text,
  -- Steps of the create job, each recorded when finished so a redelivery resumes.
  copied_at           timestamptz,
  role_created_at     timestamptz,
  read_ready_at       timestamptz,
  write_ready_at      timestamptz,
  masked_ready_at     timestamptz,
  error               text,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now(),
  deleted_at          timestamptz
);

-- One live branch per name on a connector; failed and deleted names can be used again.
create unique index branches_live_name on branches (connector_id, name) where status in ('creating', 'active', 'deleting');
create index branches_connector on branches (connector_id, created_at desc);

-- X-Idempotency-Key records: per org, kept for 24 hours (see the README).
create table idempotency_keys (
  org_id       text not null,
  key          text not null,
  -- connector_id, service_type and name of the first request.
  fingerprint  text not null,
  branch_id    text not null references branches (id) on delete cascade,
  operation_id text not null,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null,
  primary key (org_id, key)
);
create index idempotency_keys_expiry on idempotency_keys (expires_at);

-- Masking rules per connector and column, applied to branches created after they are set.
create table masking_rules (
  connector_id text not null,
  org_id       text not null,
  schema_name  text not null,
  table_name   text not null,
  column_name  text not null,
  method       text not null check (method in ('hash', 'email', 'null', 'redact')),
  position     integer not null,
  primary key (connector_id, schema_name, table_name, column_name)
);

create table outbox (
  id           bigserial primary key,
  subject      text not null,
  msg_id       text not null unique,
  payload      jsonb not null,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
create index outbox_unpublished on outbox (id) where published_at is null;
