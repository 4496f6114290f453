-- 0008's NOTIFY carried an empty payload, which the relay's listener (@effect/sql-pg) drops: the
-- relay only ever woke on its poll (25 ms), so a job waited ~15 ms on average before it was
-- published. With a payload the wake-up arrives.
create or replace function outbox_wake() returns trigger language plpgsql as $$
begin
  perform pg_notify('branch_outbox', 'outbox');
  return null;
end
$$;
