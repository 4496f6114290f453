-- What discovery suggests masking in the selected tables, derived from selected_schema_structure
-- when it is written (ConnectorsRepo): every branch create reads it (EngineAccessService, twice),
-- and the structure itself is megabytes for a selection of thousands of tables. Filled here for
-- the selections written before (format 1 structures, in the structure's order; ~0.8 s for a
-- 5 MB structure of 2,000 tables on this machine's Postgres 15).
alter table connectors add column selected_masking_suggestions jsonb;

update connectors c set selected_masking_suggestions = (
  select coalesce(jsonb_agg(jsonb_build_object('schema', s->>'name', 'table', t->>'name', 'column', col->>'name', 'method', col->>'masking_suggestion')), '[]'::jsonb)
  from jsonb_array_elements(case when c.selected_schema_structure->>'format' = '1' and jsonb_typeof(c.selected_schema_structure->'databases') = 'array'
                                 then c.selected_schema_structure->'databases' else '[]'::jsonb end) d,
       jsonb_array_elements(case when jsonb_typeof(d->'schemas') = 'array' then d->'schemas' else '[]'::jsonb end) s,
       jsonb_array_elements(case when jsonb_typeof(s->'tables') = 'array' then s->'tables' else '[]'::jsonb end) t,
       jsonb_array_elements(case when jsonb_typeof(t->'columns') = 'array' then t->'columns' else '[]'::jsonb end) col
  where jsonb_typeof(col->'masking_suggestion') = 'string'
)
where c.selected_schema_structure is not null;
