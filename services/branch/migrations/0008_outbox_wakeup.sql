-- The relay sleeps between polls; a committed outbox row (a branch create's job) wakes it at once
-- (NOTIFY is delivered at commit), so a job reaches its worker without waiting out a poll.
create or replace function outbox_wake() returns trigger language plpgsql as $$
begin
  perform pg_notify('branch_outbox', '');
  return null;
end
$$;

create trigger outbox_wake after insert on outbox for each statement execute function outbox_wake();
