-- The quarantine monitor: when it first saw the engine's subscription disabled. A branch create
-- pauses the subscription for a moment; only a pause longer than the grace is a stop.
alter table engines add column if not exists subscription_disabled_since timestamptz;
