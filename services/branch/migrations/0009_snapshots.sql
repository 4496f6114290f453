-- Snapshots: named, immutable copies of a connector's mirror, kept as template databases on its
-- engine (nobody connects to them), and branches cut from them without pausing the mirror.
create table snapshots (
  id                   text primary key,
  org_id               text not null,
  connector_id         text not null,
  name                 text not null,
  status               text not null check (status in ('creating', 'ready', 'deleting', 'deleted', 'failed')),
  database_name        text not null,
  source_lsn           text,
  data_as_of           timestamptz,
  error                text,
  create_operation_id  text not null,
  delete_operation_id  text,
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now(),
  deleted_at           timestamptz
);

-- Names are unique among a connector's live snapshots.
create unique index snapshots_live_name on snapshots (connector_id, name) where status in ('creating', 'ready', 'deleting');
create index snapshots_connector on snapshots (connector_id, created_at desc);
create index snapshots_org_live on snapshots (org_id) where status in ('creating', 'ready', 'deleting');

alter table branches add column snapshot_id text;
create index branches_snapshot_creating on branches (snapshot_id) where status = 'creating';
