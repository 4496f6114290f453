-- Optimistic concurrency for reports: a report reads the row, decides, and writes only if the
-- version it read is still current (one statement, no explicit transaction or row lock held
-- across round trips). Every write bumps it.
alter table operations add column version bigint not null default 0;
