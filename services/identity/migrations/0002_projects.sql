-- Projects: org-scoped metadata. Names are unique per org case-insensitively; a project goes with
-- its org (cascade), and its creator may be deleted (set null).
create table projects (
  id                 text primary key,
  org_id             text not null references orgs (id) on delete cascade,
  name               text not null check (char_length(name) between 1 and 100),
  description        text not null default '' check (char_length(description) <= 1000),
  created_by_user_id text references users (id) on delete set null,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);
create unique index projects_org_name on projects (org_id, lower(name));
create index projects_org on projects (org_id, created_at, id);
