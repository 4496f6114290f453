-- Protection and expiry (issue 13): a protected branch refuses delete; an expired one is deleted
-- by the sweeper through a branch_delete operation.
alter table branches add column protected boolean not null default false;
alter table branches add column expires_at timestamptz;
create index branches_expiring on branches (expires_at) where expires_at is not null and status in ('active', 'failed');
