-- The quarantine monitor: whether the subscription's apply-error count rose in the engine's last
-- round. One rise alone is a stream the source broke (a restart or failover ends the walsender,
-- and the subscription counts it as an apply error) and reconnects from by itself; a count that
-- rises round after round is a change the mirror cannot apply.
alter table engines add column if not exists apply_errors_rose boolean not null default false;
