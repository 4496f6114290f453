-- Environments: where an org's engines run. org_id is identity's id (no foreign key across units).
create table environments (
  id                  text primary key,
  org_id              text not null,
  name                text not null check (char_length(name) between 1 and 100),
  cloud               text not null check (cloud in ('aws')),
  region              text not null,
  private_link_id     text,
  private_link_status text check (private_link_status in ('pending', 'active')),
  created_by          text,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now(),
  check ((private_link_id is null) = (private_link_status is null))
);
create unique index environments_org_name on environments (org_id, lower(name));
create index environments_org on environments (org_id, created_at, id);

-- One AWS account connection per environment; a new setup link replaces the pending one (new id,
-- new external id). The external id is not a secret (it guards against the confused deputy).
create table aws_account_connections (
  id             text primary key,
  environment_id text not null unique references environments (id) on delete cascade,
  org_id         text not null,
  aws_account_id text not null check (aws_account_id ~ '^[0-9]{12}$'),
  external_id    text not null,
  role_arn       text,
  status         text not null check (status in ('pending', 'connected')),
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  connected_at   timestamptz
);

-- Secrets, encrypted by SecretStore (AES-256-GCM envelope, key id inside). One row per owner and
-- name: a rotation replaces the row, so an old value is never kept. Fingerprint and last4 let a
-- user recognise the value without it being readable.
create table secrets (
  owner_id    text not null,
  name        text not null,
  envelope    jsonb not null,
  key_id      text not null,
  fingerprint text not null,
  last4       text not null,
  rotated_at  timestamptz not null default now(),
  primary key (owner_id, name)
);
