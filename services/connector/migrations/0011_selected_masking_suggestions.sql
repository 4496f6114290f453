-- What discovery suggests masking in the selected tables, derived from selected_schema_structure
-- when it is written: every branch create reads it (EngineAccessService, twice), and the structure
-- itself is megabytes for a selection of thousands of tables. Null for selections written before
-- this column: derived from the structure on read, as before.
alter table connectors add column selected_masking_suggestions jsonb;
