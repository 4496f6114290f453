-- snapshot_create, snapshot_delete: our extension of the interface's operation types (connector snapshots).
alter table operations drop constraint operations_type_check;
alter table operations add constraint operations_type_check check (type in (
  'connector_engine_setup', 'connector_reset', 'connector_deep_reset', 'connector_discovery',
  'connector_delete', 'connector_secret_purge', 'connector_rollout', 'connector_replication_rollback',
  'connector_cdc_cutover', 'connector_cdc_shadow_cleanup', 'environment_deploy', 'environment_destroy',
  'branch_create', 'branch_delete', 'branch_reset', 'snapshot_create', 'snapshot_delete'));
