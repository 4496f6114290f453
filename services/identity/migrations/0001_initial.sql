-- Identity: users, sessions, orgs, memberships, roles, invites, API keys and the event outbox.
-- Runs with search_path set to the unit's schema (identity); forward-only.

create table users (
  id                text primary key,
  email             text not null unique check (email = lower(email)),
  full_name         text not null,
  password_hash     text not null,
  email_verified_at timestamptz,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now()
);

-- Dashboard sessions; the token itself is never stored, only its SHA-256 digest.
create table sessions (
  id           text primary key,
  user_id      text not null references users (id) on delete cascade,
  token_digest text not null unique,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null
);
create index sessions_user on sessions (user_id);

create table email_verifications (
  id           text primary key,
  user_id      text not null references users (id) on delete cascade,
  email        text not null,
  token_digest text not null unique,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null,
  used_at      timestamptz
);
create index email_verifications_user on email_verifications (user_id);

create table orgs (
  id                 text primary key,
  name               text not null check (char_length(name) between 1 and 100),
  created_by_user_id text references users (id) on delete set null,
  -- AIP-155: a retried CreateOrg with the same request_id finds the first org.
  request_id         text,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);
create unique index orgs_request on orgs (created_by_user_id, request_id) where request_id is not null;

-- The org roles. Their permission sets mirror src/domain/roles.ts (a test keeps them equal).
create table roles (
  id          text primary key,
  role_key    text not null unique,
  name        text not null,
  description text not null,
  permissions text[] not null,
  rank        integer not null unique
);
insert into roles (id, role_key, name, description, permissions, rank) values
  ('role_org_viewer', 'viewer', 'Viewer', 'Read-only access to the org and its resources',
   array['org.read', 'billing.read', 'projects.read', 'connectors.read', 'environments.read', 'branches.read', 'operations.read'], 0),
  ('role_org_member', 'member', 'Member', 'Create and modify resources such as connectors, projects and branches',
   array['org.read', 'billing.read', 'projects.read', 'connectors.read', 'environments.read', 'branches.read', 'operations.read',
         'api_keys.read', 'api_keys.create', 'api_keys.delete',
         'projects.create', 'projects.update', 'connectors.create', 'connectors.update', 'branches.create', 'branches.delete'], 1),
  ('role_org_admin', 'admin', 'Admin', 'Administrative access: members, invites and shared resources, except deleting the org',
   array['org.read', 'billing.read', 'projects.read', 'connectors.read', 'environments.read', 'branches.read', 'operations.read',
         'api_keys.read', 'api_keys.create', 'api_keys.delete',
         'projects.create', 'projects.update', 'connectors.create', 'connectors.update', 'branches.create', 'branches.delete',
         'projects.delete', 'connectors.delete', 'connectors.admin', 'environments.manage',
         'org.update', 'orgs.share', 'orgs.invite_users', 'org.remove_members'], 2),
  ('role_org_owner', 'owner', 'Owner', 'Full control of the org, including billing and deleting it',
   array['org.read', 'billing.read', 'projects.read', 'connectors.read', 'environments.read', 'branches.read', 'operations.read',
         'api_keys.read', 'api_keys.create', 'api_keys.delete',
         'projects.create', 'projects.update', 'connectors.create', 'connectors.update', 'branches.create', 'branches.delete',
         'projects.delete', 'connectors.delete', 'connectors.admin', 'environments.manage',
         'org.update', 'orgs.share', 'orgs.invite_users', 'org.remove_members',
         'org.delete', 'billing.manage'], 3);

create table memberships (
  org_id    text not null references orgs (id) on delete cascade,
  user_id   text not null references users (id) on delete cascade,
  joined_at timestamptz not null default now(),
  primary key (org_id, user_id)
);
create index memberships_user on memberships (user_id, joined_at);

create table api_keys (
  id            text primary key,
  org_id        text not null references orgs (id) on delete cascade,
  name          text not null,
  mode          text not null check (mode in ('live', 'test')),
  key_prefix    text not null,
  secret_digest text not null unique,
  scopes        text[] not null default '{}',
  created_by    text references users (id) on delete set null,
  created_at    timestamptz not null default now(),
  expires_at    timestamptz,
  revoked_at    timestamptz,
  last_used_at  timestamptz
);
create index api_keys_org on api_keys (org_id, created_at desc);

-- A member's role is its grant (removed with the membership); an API key's role is its grant.
create table role_grants (
  id                 text primary key,
  org_id             text not null references orgs (id) on delete cascade,
  user_id            text references users (id) on delete cascade,
  api_key_id         text references api_keys (id) on delete cascade,
  role_id            text not null references roles (id),
  granted_by_user_id text references users (id) on delete set null,
  created_at         timestamptz not null default now(),
  check ((user_id is null) <> (api_key_id is null)),
  foreign key (org_id, user_id) references memberships (org_id, user_id) on delete cascade
);
create unique index role_grants_member on role_grants (org_id, user_id) where user_id is not null;
create unique index role_grants_api_key on role_grants (api_key_id) where api_key_id is not null;
create index role_grants_user on role_grants (user_id) where user_id is not null;
create index role_grants_granted_by on role_grants (granted_by_user_id) where granted_by_user_id is not null;

-- Tokens are kept in clear: accepting also requires the invitee's verified email to match.
create table invites (
  id                  text primary key,
  org_id              text not null references orgs (id) on delete cascade,
  email               text not null check (email = lower(email)),
  role_id             text not null references roles (id),
  token               text not null unique,
  invited_by_user_id  text references users (id) on delete set null,
  created_at          timestamptz not null default now(),
  expires_at          timestamptz not null,
  accepted_at         timestamptz,
  accepted_by_user_id text references users (id) on delete set null,
  revoked_at          timestamptz
);
-- At most one open invite per email and org: a new invite replaces (revokes) the previous one.
create unique index invites_open on invites (org_id, email) where accepted_at is null and revoked_at is null;
create index invites_email on invites (email) where accepted_at is null and revoked_at is null;
create index invites_invited_by on invites (invited_by_user_id) where invited_by_user_id is not null;
create index api_keys_created_by on api_keys (created_by) where created_by is not null;

-- Events written in the same transaction as the change they announce; a relay publishes them.
create table outbox (
  id           bigserial primary key,
  subject      text not null,
  msg_id       text not null unique,
  payload      jsonb not null,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
create index outbox_unpublished on outbox (id) where published_at is null;
