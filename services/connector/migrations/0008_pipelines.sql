-- Pipelines (issue 11): a connector's replication is a pipeline — publication and slot on the
-- source, a mirror database and its subscription on the engine. The active one is the engines
-- row's names (branches are cut from its mirror); this table keeps the others: a deep reset's
-- shadow while it is built, the pipeline it replaced while a rollback may still return to it,
-- and the history of what was cleaned up.
create table if not exists pipelines (
  id                 text primary key,          -- the publication name, unique per source
  connector_id       text not null references connectors (id) on delete cascade,
  generation         integer not null,
  publication_name   text not null,
  slot_name          text not null,
  subscription_name  text not null,
  mirror_database    text not null,
  mirrored_tables    text[] not null default '{}',
  -- building (a deep reset at work) → shadow (validated) → active (cut over) → retired (kept for
  -- rollback until retain_until) → cleaned; failed when its build failed (and was cleaned up).
  status             text not null check (status in ('building', 'shadow', 'active', 'retired', 'failed', 'cleaned')),
  -- The connector_deep_reset operation that built it (a redelivery finds its pipeline again).
  operation_id       text unique,
  retired_at         timestamptz,
  retain_until       timestamptz,
  -- The connector_cdc_shadow_cleanup operation started for it, once its grace is over.
  cleanup_operation_id text,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  unique (connector_id, generation)
);
create index if not exists pipelines_retired on pipelines (retain_until) where status = 'retired';
