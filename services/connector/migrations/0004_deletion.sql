-- Deletion (issue 5): the deletion lock and the connector_delete operation last started.
alter table connectors
  -- While true, DELETE of the connector answers 409 (POST/DELETE .../deletion-lock move it).
  add column if not exists deletion_locked boolean not null default false,
  -- The connector_delete operation last started: while it is pending or running, another delete
  -- and lock/unlock answer 409 (the operation unit says which).
  add column if not exists delete_operation_id text;

-- The project-deletion consumer finds a project's connectors.
create index if not exists connectors_project on connectors (project_id) where project_id is not null;
