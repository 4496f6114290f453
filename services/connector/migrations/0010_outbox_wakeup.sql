-- The relay sleeps between polls (200 ms); a committed outbox row (a discovery, setup, delete or
-- pipeline job) wakes it at once: NOTIFY is delivered at commit. The payload is not read, but the
-- relay's listener (@effect/sql-pg) drops notifications without one.
create or replace function outbox_wake() returns trigger language plpgsql as $$
begin
  perform pg_notify('connector_outbox', 'outbox');
  return null;
end
$$;

create trigger outbox_wake after insert on outbox for each statement execute function outbox_wake();
