-- Freshness (issue 11): what a create asked for and what the copy contains.
-- allow_stale: branch even while the connector's replication is quarantined (engine degraded).
-- consistent_with_source / min_source_lsn: copy only once the mirror has applied the source up to
-- its WAL position at acceptance, or up to the given position.
alter table branches add column if not exists allow_stale boolean not null default false;
alter table branches add column if not exists consistent_with_source boolean not null default false;
alter table branches add column if not exists min_source_lsn pg_lsn;
-- The source WAL position the mirror had applied at the cut, and the source time the copy is at
-- least as fresh as (the newest heartbeat it holds).
alter table branches add column if not exists source_lsn pg_lsn;
alter table branches add column if not exists data_as_of timestamptz;
