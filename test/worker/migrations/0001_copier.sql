-- The outbox the starting side writes jobs into (kit OutboxRelay publishes it).
create table outbox (
  id           bigserial primary key,
  subject      text not null,
  msg_id       text not null unique,
  payload      jsonb not null,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
create index outbox_unpublished on outbox (id) where published_at is null;

-- How far each copy got: advanced in the same transaction as the rows it copied, so a
-- redelivered job resumes after the last committed batch and never copies a row twice.
create table copy_progress (
  operation_id text primary key,
  last_id      bigint not null default 0,
  rows_copied  bigint not null default 0,
  batches      integer not null default 0
);

-- Every delivery the handler saw (attempt = the bus's delivery count): tests read it to tell a
-- redelivery (attempt > 1) from a duplicate message (a second attempt 1).
create table job_deliveries (
  id           bigserial primary key,
  operation_id text not null,
  attempt      integer not null,
  seen_at      timestamptz not null default now()
);
