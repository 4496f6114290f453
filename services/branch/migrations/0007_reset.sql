-- The reset last started (issue 13): a second reset, or a delete, waits for it to end.
alter table branches add column reset_operation_id text;
