-- Masking policy per connector (issue 11): strict refuses branches while a column discovery
-- flags as personal or secret has neither a rule nor a mark as safe; permissive (the default
-- without a row) only suggests.
create table if not exists masking_policies (
  connector_id text primary key,
  org_id       text not null,
  policy       text not null check (policy in ('permissive', 'strict')),
  -- [{schema, table, column}] the connector's admins marked as needing no masking.
  safe_columns jsonb not null default '[]',
  updated_at   timestamptz not null default now()
);
