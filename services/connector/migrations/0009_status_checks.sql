-- The connector's statuses are closed sets (connector.proto's IndexingStatus and
-- BranchingEngineStatus): the database refuses a value the code does not know.
alter table connectors
  add constraint connectors_indexing_status_check check (indexing_status in ('not_indexed', 'indexing', 'indexed', 'failed')),
  add constraint connectors_branching_engine_status_check
    check (branching_engine_status in ('not_set_up', 'setting_up', 'ready', 'degraded', 'failed_validation', 'failed'));
