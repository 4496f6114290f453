-- Connectors: links to source databases. org_id and project_id are identity's ids (no foreign key
-- across units). Connection details live only in `secrets` as (connector id, 'connection_details'),
-- encrypted; nothing here is a credential.
create table connectors (
  id                         text primary key,
  org_id                     text not null,
  project_id                 text,
  name                       text not null check (char_length(name) between 1 and 200),
  service_name               text not null,
  connector_category         text not null,
  byoc                       text check (byoc in ('environment', 'self_managed')),
  use_environment            boolean not null default false,
  private_link_id            text,
  environment_id             text references environments (id) on delete restrict,
  source_provider            text,
  schema_structure           jsonb,
  schema_version             integer not null default 0,
  selection_schema_version   integer,
  selected_schema_version    integer not null default 0,
  last_indexed_version       integer not null default 0,
  selected_entity_paths      text[] not null default '{}',
  selected_schema_structure  jsonb,
  indexing_status            text not null default 'not_indexed',
  branching_engine_status    text not null default 'not_set_up',
  replica_identity_preflight jsonb,
  created_by                 text,
  created_at                 timestamptz not null default now(),
  updated_at                 timestamptz not null default now()
);
create index connectors_org on connectors (org_id, created_at, id);
