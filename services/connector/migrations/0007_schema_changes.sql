-- Schema changes on the source (issue 11): how each engine follows them, and what happened to
-- each change seen.

-- capture: event triggers on the source log each DDL into scion.schema_log, which the mirror
-- applies in commit order; reconcile: the monitor diffs the catalogs when apply errors show drift.
alter table engines add column if not exists schema_follow text not null default 'reconcile'
  check (schema_follow in ('capture', 'reconcile'));
-- Whether the source carries Scion's heartbeat table (in the publication): the connector writes it
-- every few seconds and the mirror's copy says how fresh the mirror is.
alter table engines add column if not exists heartbeat boolean not null default false;
-- The last mirror-side result (scion.schema_change_results.log_id) copied into schema_changes.
alter table engines add column if not exists schema_log_position bigint not null default 0;

create table if not exists schema_changes (
  id            bigserial primary key,
  connector_id  text not null references connectors (id) on delete cascade,
  -- captured: applied by the mirror from the source's log; reconciled: by the monitor's diff.
  mode          text not null check (mode in ('captured', 'reconciled')),
  -- The source's scion.schema_log id (captured), unique per connector; null when reconciled.
  source_log_id bigint,
  command_tag   text not null,
  object_identity text,
  statement     text,
  status        text not null check (status in ('applied', 'skipped', 'reconciled', 'failed')),
  actions       jsonb not null default '[]',
  error         text,
  tables_added  jsonb not null default '[]',
  source_committed_at timestamptz,
  applied_at    timestamptz not null default now()
);
create unique index if not exists schema_changes_source_log on schema_changes (connector_id, source_log_id) where source_log_id is not null;
create index if not exists schema_changes_recent on schema_changes (connector_id, id desc);

-- Freshness, stated: the mirror's replication as the monitor last measured it
-- ({status, lag_bytes, last_applied_at, active_pipeline_id, schema_follow, measured_at}); null
-- until an engine is set up.
alter table connectors add column if not exists replication jsonb;
