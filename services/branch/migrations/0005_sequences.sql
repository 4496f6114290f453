-- The create job's sequences step (replication carries no sequence values; the step moves the
-- branch's sequences past the data it holds), recorded so a redelivery does not repeat it.
-- Numbered after 0004: the migrator runs only files numbered past the last one applied.
alter table branches add column if not exists sequences_aligned_at timestamptz;
