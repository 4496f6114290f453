-- Customers: one per org, created from events.org.created, closed by events.org.deleted.
create table customers (
  org_id            text primary key,
  status            text not null default 'active' check (status in ('active', 'closed')),
  -- The event that set the org up (Nats-Msg-Id); null when the delete arrived first.
  created_event_id  text unique,
  created_at        timestamptz not null default now(),
  closed_at         timestamptz,
  constraint closed_at_iff_closed check ((status = 'closed') = (closed_at is not null))
);

-- The org's subscription (one per org). A hosted checkout in progress is carried here too.
create table subscriptions (
  org_id                text primary key references customers (org_id),
  plan_id               text not null check (plan_id in ('free', 'pro', 'team')),
  status                text not null check (status in ('active', 'pending_checkout', 'canceled')),
  current_period_start  timestamptz not null,
  current_period_end    timestamptz not null,
  cancel_at_period_end  boolean not null default false,
  canceled_at           timestamptz,
  pending_plan_id       text check (pending_plan_id in ('free', 'pro', 'team')),
  checkout_session_id   text,
  checkout_url          text,
  created_at            timestamptz not null default now(),
  updated_at            timestamptz not null default now(),
  constraint period_forward check (current_period_end > current_period_start),
  constraint pending_iff_checkout check ((status = 'pending_checkout') = (pending_plan_id is not null and checkout_url is not null))
);

-- Credits as an append-only ledger: the balance is the sum. source_key makes every grant
-- idempotent (the free-tier grant is keyed by org, so a redelivered event adds nothing).
create table credit_ledger (
  id            bigserial primary key,
  org_id        text not null references customers (org_id),
  -- US cents; grants are positive, usage (later) negative.
  amount_cents  bigint not null check (amount_cents <> 0),
  kind          text not null check (kind in ('free_tier_grant', 'plan_grant')),
  source_key    text not null unique,
  created_at    timestamptz not null default now()
);

create index credit_ledger_by_org on credit_ledger (org_id);

create function credit_ledger_is_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'credit_ledger is append-only: % refused', tg_op using errcode = 'check_violation';
end $$;

create trigger credit_ledger_is_append_only before update or delete on credit_ledger
  for each row execute function credit_ledger_is_append_only();
create trigger credit_ledger_no_truncate before truncate on credit_ledger
  for each statement execute function credit_ledger_is_append_only();
