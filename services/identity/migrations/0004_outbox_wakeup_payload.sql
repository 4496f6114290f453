-- 0003's NOTIFY carried an empty payload, which the relay's listener (@effect/sql-pg) drops: the
-- relay only ever woke on its poll. With a payload the wake-up arrives.
create or replace function outbox_wake() returns trigger language plpgsql as $$
begin
  perform pg_notify('identity_outbox', 'outbox');
  return null;
end
$$;
