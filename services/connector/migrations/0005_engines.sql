-- Engines (issue 5): one branching engine per connector, its setup, readiness evidence and
-- quarantine. The engine's superuser credentials stay with the EngineProvisioner adapter (its
-- record for the local adapter, a Kubernetes Secret for the Kubernetes one); nothing here is a
-- credential.

alter table connectors
  -- The connector_engine_setup (or connector_rollout) operation last started: while it is pending
  -- or running, another setup answers 409 and joins nothing.
  add column if not exists setup_operation_id text;

create table if not exists engines (
  connector_id       text primary key references connectors (id) on delete cascade,
  -- Where the engine runs (what the provisioner answered) and what was made in it.
  host               text,
  port               integer,
  instance_name      text,
  mirror_database    text not null,
  publication_name   text not null,
  slot_name          text not null,
  subscription_name  text not null,
  -- The tables the mirror holds (database.schema.table paths) as of the last completed setup or
  -- rollout.
  mirrored_tables    text[] not null default '{}',
  -- The steps the setup last completed, in order: a redelivered job reports where it resumed.
  steps              jsonb not null default '[]',
  -- The quarantine monitor: one replica checks an engine at a time (a lease), and the apply
  -- errors it last saw (an increase is a break).
  monitor_lease_until    timestamptz,
  last_apply_error_count bigint,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);

-- Readiness evidence: append-only, one row per table and check of an attempt.
create table if not exists readiness_checks (
  id           bigserial primary key,
  connector_id text not null references connectors (id) on delete cascade,
  attempt_id   text not null,
  check_name   text not null,
  table_path   text,
  status       text not null check (status in ('pass', 'fail')),
  message      text not null,
  pod_name     text not null,
  checked_at   timestamptz not null default now()
);
create index if not exists readiness_checks_attempt on readiness_checks (connector_id, attempt_id, id);
create index if not exists readiness_checks_recent on readiness_checks (connector_id, checked_at desc, id desc);

-- Quarantined replication: the monitor pauses a connector's replication when it breaks and
-- records why; release moves it to released, and the monitor restores the pipeline and deletes
-- the row.
create table if not exists quarantine_entries (
  id           text primary key,
  connector_id text not null references connectors (id) on delete cascade,
  status       text not null check (status in ('quarantined', 'released')),
  reason       text not null,
  detail       text not null,
  quarantined_at timestamptz not null default now(),
  released_at  timestamptz,
  released_by  text
);
-- At most one open entry per connector: the monitor never quarantines twice for one break.
create unique index if not exists quarantine_open on quarantine_entries (connector_id) where status in ('quarantined', 'released');
