-- The relay sleeps between polls; a committed outbox row wakes it at once (NOTIFY is delivered at
-- commit), so events such as access changes reach the bus in milliseconds rather than a poll.
create or replace function outbox_wake() returns trigger language plpgsql as $$
begin
  perform pg_notify('identity_outbox', '');
  return null;
end
$$;

create trigger outbox_wake after insert on outbox for each statement execute function outbox_wake();
