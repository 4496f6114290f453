-- Operations: the interface's Operation fields plus the worker's heartbeat.
create table operations (
  id            text primary key,
  org_id        text not null,
  type          text not null check (type in (
                  'connector_engine_setup', 'connector_reset', 'connector_deep_reset', 'connector_discovery',
                  'connector_delete', 'connector_secret_purge', 'connector_rollout', 'connector_replication_rollback',
                  'connector_cdc_cutover', 'connector_cdc_shadow_cleanup', 'environment_deploy', 'environment_destroy',
                  'branch_create', 'branch_delete')),
  resource_id   text not null,
  status        text not null default 'pending' check (status in ('pending', 'running', 'completed', 'failed')),
  stage         text,
  stage_label   text,
  progress      integer check (progress between 0 and 100),
  result        jsonb,
  error         text,
  setup_status  jsonb,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  started_at    timestamptz,
  completed_at  timestamptz,
  heartbeat_at  timestamptz not null default now(),
  constraint completed_at_iff_terminal check ((status in ('completed', 'failed')) = (completed_at is not null)),
  constraint started_unless_pending check (status = 'pending' or started_at is not null),
  constraint setup_status_only_for_engine_setup check ((type = 'connector_engine_setup') = (setup_status is not null))
);

create index operations_by_resource on operations (org_id, resource_id, created_at desc);
-- The sweeper's scan: running operations by last heartbeat.
create index operations_running_by_heartbeat on operations (heartbeat_at) where status = 'running';

-- Defence in depth for the state machine: a terminal operation never changes.
create function operations_terminal_is_final() returns trigger language plpgsql as $$
begin
  if old.status in ('completed', 'failed') then
    raise exception 'operation % is % and cannot change', old.id, old.status using errcode = 'check_violation';
  end if;
  return new;
end $$;

create trigger operations_terminal_is_final before update on operations
  for each row execute function operations_terminal_is_final();
