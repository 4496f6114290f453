/**
 * Schema following, the mirror side (services/connector/README.md, "Schema changes"): what Scion
 * installs on an engine's mirror database, in both modes. With capture, a trigger enabled ALWAYS
 * on the replicated log diffs each snapshot against what the mirror holds and alters the mirror
 * inside the apply worker's transaction (a row that needs a new column arrives after the column
 * exists); reconciliation calls the same functions (`scion.alter_table`, `ensure_type`,
 * `ensure_function`, `create_table`) from the connector. Every function runs with
 * `search_path = pg_catalog`, so the names Postgres prints compare as text with the source's.
 */
import { HEARTBEAT_DDL } from "./SourceCaptureSql.js"

/**
 * The version of Scion's objects on a mirror, kept as the comment of its `scion` schema. Bump it
 * when they change: a mirror set up by an older connector gets them again before reconciliation
 * calls one it may lack (setup and roll-outs install them anyway).
 */
export const MIRROR_OBJECTS_VERSION = "scion mirror objects 7"

/** Whether the mirror's objects are this version's (one row, `current`). */
export const MIRROR_OBJECTS_CURRENT_SQL = `select coalesce(obj_description(to_regnamespace('scion'), 'pg_namespace') = '${MIRROR_OBJECTS_VERSION}', false) as current`

/**
 * The mirror side, idempotent: the replicated log and heartbeat (same columns as the source),
 * the mirror's own bookkeeping (which source table each mirror table is, by source oid, with the
 * snapshot it last applied; the schemas it mirrors whole; the log position of its setup; the
 * outcome of each change), and the apply trigger, enabled ALWAYS so the apply worker fires it.
 */
export const mirrorFollowingInstall: ReadonlyArray<string> = [
  "create schema if not exists scion",
  `create table if not exists scion.schema_log (
     id bigint primary key,
     at timestamptz not null,
     command_tag text not null,
     object_identity text,
     statement text,
     change jsonb not null
   )`,
  HEARTBEAT_DDL,
  `create table if not exists scion.mirror_tables (
     source_relid bigint primary key,
     schema_name text not null,
     table_name text not null,
     snapshot jsonb not null,
     log_id bigint not null,
     -- Reconciliation: a change that is not additive waits until the mirror has applied the
     -- source up to the position where it was first seen (rows older than it have the old shape).
     reconcile_after pg_lsn
   )`,
  // Which source type each mirror type is (snapshots carry the source's oid): a type renamed or
  // moved on the source is renamed or moved here, not made again beside the one columns use.
  `create table if not exists scion.mirror_types (
     source_oid bigint primary key,
     schema_name text not null,
     type_name text not null
   )`,
  // Tables a change rewrote (scion.alter_table), to be copied again from the source
  // (replication/TableRecopy.ts): `error` is why the last attempt did not finish.
  `create table if not exists scion.recopy_requests (
     source_relid bigint primary key,
     requested_at timestamptz not null default now(),
     copy_started_at timestamptz,
     error text
   )`,
  "create table if not exists scion.selection (schema_name text primary key)",
  "create table if not exists scion.apply_state (singleton boolean primary key default true check (singleton), setup_log_id bigint not null)",
  `create table if not exists scion.schema_change_results (
     log_id bigint primary key,
     source_at timestamptz not null,
     applied_at timestamptz not null default now(),
     command_tag text not null,
     object_identity text,
     statement text,
     status text not null,
     actions jsonb not null default '[]',
     error text,
     tables_added jsonb not null default '[]'
   )`,
  // A failed change is answered (the quarantine it opened released) once: until then the
  // monitor holds the engine degraded, since the table no longer follows the source.
  "alter table scion.schema_change_results add column if not exists answered boolean not null default false",
  `create or replace function scion.column_sql(col jsonb) returns text
   language sql immutable set search_path = pg_catalog as $fn$
     select format('%I %s', col->>'name', col->>'type')
       || coalesce(' collate ' || (col->>'collation'), '')
       || case when col->>'generated' in ('s', 'v') then format(' generated always as (%s) %s', col->>'default', case col->>'generated' when 's' then 'stored' else 'virtual' end)
               when col->>'identity' in ('a', 'd') then format(' generated %s as identity', case col->>'identity' when 'a' then 'always' else 'by default' end)
               when col->>'default' is not null then ' default ' || (col->>'default')
               else '' end
       || case when (col->>'not_null')::boolean then ' not null' else '' end
   $fn$`,
  // Sequences a default names (nextval('…'::regclass)) exist before the column that uses them.
  `create or replace function scion.ensure_sequences(col jsonb) returns jsonb
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     done jsonb := '[]';
     found text[];
     stmt text;
   begin
     if col->>'default' is null or (col->>'identity') in ('a', 'd') or (col->>'generated') in ('s', 'v') then
       return done;
     end if;
     for found in select regexp_matches(col->>'default', 'nextval\\(''((?:[^'']|'''')+)''::regclass\\)', 'g') loop
       if to_regclass(replace(found[1], '''''', '''')) is null then
         stmt := 'create sequence if not exists ' || replace(found[1], '''''', '''');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     return done;
   end
   $fn$`,
  // A type as the source's snapshot has it (typeSnapshotsSql): made when missing; an enum gains
  // its new labels in place, a domain its default, not-null and checks, a composite its
  // attributes. Ranges are made only (their definition cannot change).
  `create or replace function scion.ensure_type(typ jsonb) returns jsonb
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     done jsonb := '[]';
     stmt text;
     label text;
     previous text;
     present record;
     item jsonb;
     wanted jsonb;
     target text := format('%I.%I', typ->>'schema', typ->>'name');
     known record;
     ordinal int;
     noun text := case when typ->>'kind' = 'd' then 'domain' else 'type' end;
   begin
     -- The source renamed or moved a type the mirror has: follow it (columns keep their type).
     select m.schema_name, m.type_name into known from scion.mirror_types m where m.source_oid = (typ->>'oid')::bigint;
     if found and (known.schema_name, known.type_name) is distinct from (typ->>'schema', typ->>'name')
        and exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = known.schema_name and t.typname = known.type_name)
        and not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = typ->>'schema' and t.typname = typ->>'name') then
       if known.schema_name <> typ->>'schema' then
         execute format('create schema if not exists %I', typ->>'schema');
         stmt := format('alter %s %I.%I set schema %I', noun, known.schema_name, known.type_name, typ->>'schema');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       if known.type_name <> typ->>'name' then
         stmt := format('alter %s %I.%I rename to %I', noun, typ->>'schema', known.type_name, typ->>'name');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end if;
     if typ ? 'oid' then
       insert into scion.mirror_types (source_oid, schema_name, type_name) values ((typ->>'oid')::bigint, typ->>'schema', typ->>'name')
         on conflict (source_oid) do update set schema_name = excluded.schema_name, type_name = excluded.type_name;
     end if;
     select t.oid, t.typrelid, t.typnotnull, pg_get_expr(t.typdefaultbin, 0) as default_expr into present
       from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = typ->>'schema' and t.typname = typ->>'name';
     if not found then
       stmt := case typ->>'kind'
         when 'e' then format('create type %s as enum (%s)', target,
                              (select coalesce(string_agg(quote_literal(l), ', ' order by o), '') from jsonb_array_elements_text(typ->'labels') with ordinality as x(l, o)))
         when 'd' then format('create domain %s as %s', target, typ->>'base_type')
                       || coalesce(' collate ' || (typ->>'collation'), '')
                       || coalesce(' default ' || (typ->>'default'), '')
                       || case when (typ->>'not_null')::boolean then ' not null' else '' end
                       || coalesce((select string_agg(format(' constraint %I %s', k->>'name', k->>'definition'), '' order by k->>'name') from jsonb_array_elements(typ->'checks') k), '')
         when 'c' then format('create type %s as (%s)', target,
                              (select coalesce(string_agg(format('%I %s', a->>'name', a->>'type') || coalesce(' collate ' || (a->>'collation'), ''), ', ' order by o), '')
                               from jsonb_array_elements(typ->'attributes') with ordinality as x(a, o)))
         when 'r' then format('create type %s as range (subtype = %s', target, typ->>'subtype')
                       || coalesce(', collation = ' || (typ->>'collation'), '')
                       || coalesce(', subtype_diff = ' || (typ->>'subtype_diff'), '') || ')'
       end;
       if stmt is null then
         return done;
       end if;
       execute format('create schema if not exists %I', typ->>'schema');
       execute stmt;
       return done || to_jsonb(stmt);
     end if;
     if typ->>'kind' = 'e' then
       -- A renamed label (the snapshot has only the labels, in order): one the source no longer
       -- has whose place holds a label the mirror lacks. Adding it instead would leave the mirror's
       -- rows with the old label.
       for label, ordinal in select e.enumlabel, (row_number() over (order by e.enumsortorder))::int from pg_enum e where e.enumtypid = present.oid order by e.enumsortorder loop
         if not (typ->'labels') ? label and typ->'labels'->>(ordinal - 1) is not null
            and not exists (select 1 from pg_enum e where e.enumtypid = present.oid and e.enumlabel = typ->'labels'->>(ordinal - 1)) then
           stmt := format('alter type %s rename value %L to %L', target, label, typ->'labels'->>(ordinal - 1));
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
       for label in select l from jsonb_array_elements_text(typ->'labels') with ordinality as x(l, o) order by o loop
         if not exists (select 1 from pg_enum e where e.enumtypid = present.oid and e.enumlabel = label) then
           if previous is null then
             stmt := format('alter type %s add value if not exists %L before %L', target, label, typ->'labels'->>1);
           else
             stmt := format('alter type %s add value if not exists %L after %L', target, label, previous);
           end if;
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
         previous := label;
       end loop;
     elsif typ->>'kind' = 'd' then
       if present.default_expr is distinct from typ->>'default' then
         stmt := case when typ->>'default' is null then format('alter domain %s drop default', target) else format('alter domain %s set default %s', target, typ->>'default') end;
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       if present.typnotnull is distinct from (typ->>'not_null')::boolean then
         stmt := format('alter domain %s %s not null', target, case when (typ->>'not_null')::boolean then 'set' else 'drop' end);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       -- Checks by name: one gone or changed on the source is dropped, then the missing are added.
       for item in select jsonb_build_object('name', k.conname, 'definition', pg_get_constraintdef(k.oid)) from pg_constraint k where k.contypid = present.oid and k.contype = 'c' loop
         if not (typ->'checks') @> jsonb_build_array(item) then
           stmt := format('alter domain %s drop constraint %I', target, item->>'name');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
       for item in select * from jsonb_array_elements(typ->'checks') loop
         if not exists (select 1 from pg_constraint k where k.contypid = present.oid and k.contype = 'c' and k.conname = item->>'name') then
           stmt := format('alter domain %s add constraint %I %s', target, item->>'name', item->>'definition');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
     elsif typ->>'kind' = 'c' then
       -- A renamed attribute (the snapshot has no attnums): one the source no longer names whose
       -- place, among the live attributes, holds a name the mirror lacks, of the same type. A drop
       -- and an add instead would empty it in every row the mirror holds.
       for item in select jsonb_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), 'position', row_number() over (order by a.attnum))
                   from pg_attribute a where a.attrelid = present.typrelid and a.attnum > 0 and not a.attisdropped order by a.attnum loop
         wanted := typ->'attributes'->((item->>'position')::int - 1);
         if wanted is not null and wanted->>'type' = item->>'type'
            and not exists (select 1 from jsonb_array_elements(typ->'attributes') a where a->>'name' = item->>'name')
            and not exists (select 1 from pg_attribute a where a.attrelid = present.typrelid and a.attnum > 0 and not a.attisdropped and a.attname = wanted->>'name') then
           stmt := format('alter type %s rename attribute %I to %I', target, item->>'name', wanted->>'name');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
       -- Then by name: dropped, retyped, then added in the source's order.
       for item in select jsonb_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod)) from pg_attribute a
                   where a.attrelid = present.typrelid and a.attnum > 0 and not a.attisdropped order by a.attnum loop
         wanted := (select a from jsonb_array_elements(typ->'attributes') a where a->>'name' = item->>'name');
         if wanted is null then
           stmt := format('alter type %s drop attribute %I', target, item->>'name');
         elsif wanted->>'type' <> item->>'type' then
           stmt := format('alter type %s alter attribute %I type %s', target, item->>'name', wanted->>'type');
         else
           continue;
         end if;
         execute stmt;
         done := done || to_jsonb(stmt);
       end loop;
       for item in select a from jsonb_array_elements(typ->'attributes') with ordinality as x(a, o) order by o loop
         if not exists (select 1 from pg_attribute a where a.attrelid = present.typrelid and a.attnum > 0 and not a.attisdropped and a.attname = item->>'name') then
           stmt := format('alter type %s add attribute %I %s', target, item->>'name', item->>'type') || coalesce(' collate ' || (item->>'collation'), '');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
     end if;
     return done;
   end
   $fn$`,
  // A function as the source prints it (functionSnapshotsSql): made, or replaced when its
  // definition differs. Bodies are not checked (one may name what the mirror lacks, or what a
  // later statement makes): they run in branches, where the source's schema is.
  `create or replace function scion.ensure_function(fn jsonb) returns jsonb
   language plpgsql set search_path = pg_catalog set check_function_bodies = off as $fn$
   declare
     present text;
   begin
     select pg_get_functiondef(p.oid) into present from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = fn->>'schema' and p.proname = fn->>'name' and pg_get_function_identity_arguments(p.oid) = fn->>'arguments';
     if present is not distinct from fn->>'definition' then
       return '[]';
     end if;
     execute format('create schema if not exists %I', fn->>'schema');
     execute fn->>'definition';
     return jsonb_build_array(format('create or replace function %I.%I(%s)', fn->>'schema', fn->>'name', fn->>'arguments'));
   end
   $fn$`,
  // What a table of a captured change needs, made before the table changes (it travels with
  // it): the types its columns use, then the functions it calls.
  `create or replace function scion.ensure_table_dependencies(change jsonb, relid text) returns jsonb
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     done jsonb := '[]';
     item jsonb;
   begin
     for item in select jsonb_array_elements(t->'types') from jsonb_array_elements(coalesce(change->'table_dependencies', '[]')) t where t->>'relid' = relid loop
       done := done || scion.ensure_type(item);
     end loop;
     for item in select jsonb_array_elements(coalesce(t->'functions', '[]')) from jsonb_array_elements(coalesce(change->'table_dependencies', '[]')) t where t->>'relid' = relid loop
       done := done || scion.ensure_function(item);
     end loop;
     return done;
   end
   $fn$`,
  "drop function if exists scion.ensure_enum(jsonb)",
  `create or replace function scion.create_table(snap jsonb) returns jsonb
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     done jsonb := '[]';
     stmt text;
     col jsonb;
     con jsonb;
     idx jsonb;
     target text := format('%I.%I', snap->>'schema', snap->>'name');
   begin
     execute format('create schema if not exists %I', snap->>'schema');
     for col in select * from jsonb_array_elements(snap->'columns') loop
       done := done || scion.ensure_sequences(col);
     end loop;
     stmt := format('create table %s (%s)', target, concat_ws(', ',
       (select string_agg(scion.column_sql(c), ', ' order by (c->>'attnum')::int) from jsonb_array_elements(snap->'columns') c),
       (select string_agg(format('constraint %I %s', k->>'name', k->>'definition'), ', ') from jsonb_array_elements(snap->'constraints') k where k->>'kind' <> 'f')));
     execute stmt;
     done := done || to_jsonb(stmt);
     for con in select * from jsonb_array_elements(snap->'constraints') k where k->>'kind' = 'f' loop
       -- Foreign keys only among mirrored tables (the table itself counts).
       if (con->>'ref_relid')::bigint = (snap->>'relid')::bigint or exists (select 1 from scion.mirror_tables m where m.source_relid = (con->>'ref_relid')::bigint) then
         stmt := format('alter table %s add constraint %I %s', target, con->>'name', con->>'definition');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     for idx in select * from jsonb_array_elements(snap->'indexes') loop
       execute idx->>'definition';
       done := done || to_jsonb(idx->>'definition');
     end loop;
     return done;
   end
   $fn$`,
  // The mirror follows prev -> next: columns matched by source attnum (a rename is a rename),
  // then constraints and indexes compared with what the mirror has now, by name and definition.
  `create or replace function scion.alter_table(prev jsonb, next jsonb) returns jsonb
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     done jsonb := '[]';
     stmt text;
     target text;
     rel oid;
     old_col jsonb;
     new_col jsonb;
     live record;
     con jsonb;
     idx jsonb;
     want text;
     filenode oid;
     swapped boolean;
   begin
     target := format('%I.%I', prev->>'schema', prev->>'name');
     if prev->>'schema' <> next->>'schema' then
       execute format('create schema if not exists %I', next->>'schema');
       stmt := format('alter table %s set schema %I', target, next->>'schema');
       execute stmt;
       done := done || to_jsonb(stmt);
       target := format('%I.%I', next->>'schema', prev->>'name');
     end if;
     if prev->>'name' <> next->>'name' then
       stmt := format('alter table %s rename to %I', target, next->>'name');
       execute stmt;
       done := done || to_jsonb(stmt);
     end if;
     target := format('%I.%I', next->>'schema', next->>'name');
     rel := target::regclass;
     filenode := pg_relation_filenode(rel);

     -- Constraints and indexes renamed: one the source no longer names whose definition it has
     -- under a name the mirror lacks is renamed in place (dropped, a key would take the foreign
     -- keys that use it with it, and an index would be built again).
     for live in select k.conname as name, pg_get_constraintdef(k.oid) as definition from pg_constraint k
                 where k.conrelid = rel and k.contype in ('p', 'u', 'c', 'x', 'f') order by k.conname loop
       continue when exists (select 1 from jsonb_array_elements(next->'constraints') c where c->>'name' = live.name);
       want := (select c->>'name' from jsonb_array_elements(next->'constraints') c
                where c->>'definition' = live.definition and not exists (select 1 from pg_constraint k where k.conrelid = rel and k.conname = c->>'name')
                order by c->>'name' limit 1);
       if want is not null then
         stmt := format('alter table %s rename constraint %I to %I', target, live.name, want);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     for live in select ic.relname as name, pg_get_indexdef(i.indexrelid) as definition from pg_index i join pg_class ic on ic.oid = i.indexrelid
                 where i.indrelid = rel and not exists (select 1 from pg_constraint k where k.conindid = i.indexrelid and k.conrelid = rel) order by ic.relname loop
       continue when exists (select 1 from jsonb_array_elements(next->'indexes') x where x->>'name' = live.name);
       want := (select x->>'name' from jsonb_array_elements(next->'indexes') x
                where replace(replace(x->>'definition', ' ON ONLY ', ' ON '), ' INDEX ' || quote_ident(x->>'name') || ' ON ', ' INDEX ' || quote_ident(live.name) || ' ON ') = live.definition
                  and to_regclass(format('%I.%I', next->>'schema', x->>'name')) is null
                order by x->>'name' limit 1);
       if want is not null then
         stmt := format('alter index %I.%I rename to %I', next->>'schema', live.name, want);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;

     -- Constraints the source no longer has (before their columns go).
     for live in select k.conname as name from pg_constraint k where k.conrelid = rel and k.contype in ('p', 'u', 'c', 'x', 'f') loop
       if not exists (select 1 from jsonb_array_elements(next->'constraints') c where c->>'name' = live.name) then
         stmt := format('alter table %s drop constraint if exists %I cascade', target, live.name);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     -- Indexes the source no longer has.
     for live in select ic.relname as name from pg_index i join pg_class ic on ic.oid = i.indexrelid
                 where i.indrelid = rel and not exists (select 1 from pg_constraint k where k.conindid = i.indexrelid and k.conrelid = rel) loop
       if not exists (select 1 from jsonb_array_elements(next->'indexes') x where x->>'name' = live.name) then
         stmt := format('drop index if exists %I.%I', next->>'schema', live.name);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;

     -- Columns by source attnum: dropped, renamed, added, then altered in place.
     for old_col in select * from jsonb_array_elements(prev->'columns') loop
       if not exists (select 1 from jsonb_array_elements(next->'columns') c where (c->>'attnum')::int = (old_col->>'attnum')::int) then
         stmt := format('alter table %s drop column if exists %I cascade', target, old_col->>'name');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     -- Names that changed places (two columns swapped by renames; reconciliation sees only the
     -- end): each goes by a name of its own first. Rows that arrived meanwhile went by name, into
     -- the other column: the table is copied again (below).
     swapped := exists (select 1 from jsonb_array_elements(prev->'columns') o join jsonb_array_elements(next->'columns') n on (n->>'attnum')::int = (o->>'attnum')::int
                        where n->>'name' <> o->>'name'
                          and exists (select 1 from jsonb_array_elements(prev->'columns') p where p->>'name' = n->>'name' and (p->>'attnum')::int <> (o->>'attnum')::int));
     for old_col in select * from jsonb_array_elements(prev->'columns') loop
       new_col := null;
       select c.value into new_col from jsonb_array_elements(next->'columns') as c(value) where (c.value->>'attnum')::int = (old_col->>'attnum')::int;
       if new_col is not null and new_col->>'name' <> old_col->>'name' then
         stmt := format('alter table %s rename column %I to %I', target, old_col->>'name', case when swapped then 'scion_renaming_' || (old_col->>'attnum') else new_col->>'name' end);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;
     if swapped then
       for old_col in select * from jsonb_array_elements(prev->'columns') loop
         new_col := null;
         select c.value into new_col from jsonb_array_elements(next->'columns') as c(value) where (c.value->>'attnum')::int = (old_col->>'attnum')::int;
         if new_col is not null and new_col->>'name' <> old_col->>'name' then
           stmt := format('alter table %s rename column %I to %I', target, 'scion_renaming_' || (old_col->>'attnum'), new_col->>'name');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
     end if;
     for new_col in select * from jsonb_array_elements(next->'columns') order by (value->>'attnum')::int loop
       if not exists (select 1 from jsonb_array_elements(prev->'columns') c where (c->>'attnum')::int = (new_col->>'attnum')::int) then
         done := done || scion.ensure_sequences(new_col);
         if new_col->>'missing' is not null and new_col->>'identity' = '' and new_col->>'generated' = '' then
           -- The rows already there get the value the source's ADD COLUMN gave its rows (computed
           -- there once: now(), a default since dropped), then the column takes the source's default.
           stmt := format('alter table %s add column if not exists %s', target,
                          scion.column_sql(jsonb_set(new_col, '{default}', to_jsonb(format('%L::%s', new_col->>'missing', new_col->>'type')))));
           execute stmt;
           done := done || to_jsonb(stmt);
           stmt := case when new_col->>'default' is null then format('alter table %s alter column %I drop default', target, new_col->>'name')
                        else format('alter table %s alter column %I set default %s', target, new_col->>'name', new_col->>'default') end;
         else
           stmt := format('alter table %s add column if not exists %s', target, scion.column_sql(new_col));
         end if;
         execute stmt;
         done := done || to_jsonb(stmt);
         continue;
       end if;
       select format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null, pg_get_expr(d.adbin, d.adrelid) as default_expr,
              a.attidentity::text as identity, a.attgenerated::text as generated
         into live
         from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
         where a.attrelid = rel and a.attname = new_col->>'name' and not a.attisdropped;
       if not found then
         continue;
       end if;
       if live.type <> new_col->>'type' then
         -- The default goes first: it may not cast to the new type (the new one is set below).
         if live.default_expr is not null and live.identity = '' and live.generated = '' then
           stmt := format('alter table %s alter column %I drop default', target, new_col->>'name');
           execute stmt;
           done := done || to_jsonb(stmt);
           live.default_expr := null;
         end if;
         stmt := format('alter table %s alter column %I type %s using %I::%s', target, new_col->>'name', new_col->>'type', new_col->>'name', new_col->>'type');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       -- Identity added, dropped or changed in place (a plain column loses its default first).
       if live.identity <> new_col->>'identity' then
         if live.identity = '' then
           if live.default_expr is not null then
             stmt := format('alter table %s alter column %I drop default', target, new_col->>'name');
             execute stmt;
             done := done || to_jsonb(stmt);
           end if;
           stmt := format('alter table %s alter column %I add generated %s as identity', target, new_col->>'name', case new_col->>'identity' when 'a' then 'always' else 'by default' end);
         elsif new_col->>'identity' = '' then
           stmt := format('alter table %s alter column %I drop identity if exists', target, new_col->>'name');
         else
           stmt := format('alter table %s alter column %I set generated %s', target, new_col->>'name', case new_col->>'identity' when 'a' then 'always' else 'by default' end);
         end if;
         execute stmt;
         done := done || to_jsonb(stmt);
         live.default_expr := null;
       end if;
       -- A generated column's expression dropped or changed.
       if live.generated <> '' and new_col->>'generated' = '' then
         stmt := format('alter table %s alter column %I drop expression', target, new_col->>'name');
         execute stmt;
         done := done || to_jsonb(stmt);
         live.default_expr := null;
       elsif live.generated <> '' and live.default_expr is distinct from new_col->>'default' then
         stmt := format('alter table %s alter column %I set expression as (%s)', target, new_col->>'name', new_col->>'default');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       if new_col->>'identity' = '' and new_col->>'generated' = '' and live.default_expr is distinct from new_col->>'default' then
         done := done || scion.ensure_sequences(new_col);
         stmt := case when new_col->>'default' is null then format('alter table %s alter column %I drop default', target, new_col->>'name')
                      else format('alter table %s alter column %I set default %s', target, new_col->>'name', new_col->>'default') end;
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       if live.not_null <> (new_col->>'not_null')::boolean then
         stmt := format('alter table %s alter column %I %s not null', target, new_col->>'name', case when (new_col->>'not_null')::boolean then 'set' else 'drop' end);
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
     end loop;

     -- Constraints that are new or changed (foreign keys only among mirrored tables).
     for con in select * from jsonb_array_elements(next->'constraints') loop
       select pg_get_constraintdef(k.oid) as definition into live from pg_constraint k where k.conrelid = rel and k.conname = con->>'name';
       continue when found and live.definition = con->>'definition';
       continue when con->>'kind' = 'f' and (con->>'ref_relid')::bigint <> (next->>'relid')::bigint
                 and not exists (select 1 from scion.mirror_tables m where m.source_relid = (con->>'ref_relid')::bigint);
       if found then
         stmt := format('alter table %s drop constraint %I cascade', target, con->>'name');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       stmt := format('alter table %s add constraint %I %s', target, con->>'name', con->>'definition');
       execute stmt;
       done := done || to_jsonb(stmt);
     end loop;
     -- Indexes that are new or changed.
     for idx in select * from jsonb_array_elements(next->'indexes') loop
       select pg_get_indexdef(i.indexrelid) as definition into live
         from pg_index i join pg_class ic on ic.oid = i.indexrelid where i.indrelid = rel and ic.relname = idx->>'name';
       -- A partitioned source table's indexes print ON ONLY; the mirror's plain table's do not.
       continue when found and live.definition = replace(idx->>'definition', ' ON ONLY ', ' ON ');
       if found then
         stmt := format('drop index %I.%I', next->>'schema', idx->>'name');
         execute stmt;
         done := done || to_jsonb(stmt);
       end if;
       want := idx->>'definition';
       execute want;
       done := done || to_jsonb(want);
     end loop;
     -- Replica identity (an index's is left as it is: the snapshot does not name the index).
     if next->>'replica_identity' in ('d', 'f', 'n') and next->>'replica_identity' <> (select c.relreplident::text from pg_class c where c.oid = rel) then
       stmt := format('alter table %s replica identity %s', target, case next->>'replica_identity' when 'd' then 'default' when 'f' then 'full' else 'nothing' end);
       execute stmt;
       done := done || to_jsonb(stmt);
     end if;
     -- The change rewrote the table here (a type changed by a cast, a volatile default, an
     -- identity), or the capture saw it rewrite the source's (a USING that keeps the type): the
     -- source filled its rows by its own expression (a USING, its own values), which the snapshot
     -- does not carry. Or columns swapped names (above). The connector copies the table again
     -- from the source.
     if pg_relation_filenode(rel) is distinct from filenode or coalesce((next->>'rewritten')::boolean, false) or swapped then
       -- A copy under way began before this rewrite: it starts again.
       insert into scion.recopy_requests (source_relid, requested_at) values ((next->>'relid')::bigint, clock_timestamp())
         on conflict (source_relid) do update set requested_at = clock_timestamp(), copy_started_at = null, error = null;
       done := done || to_jsonb(format('copy %s again from the source', target));
     end if;
     return done;
   end
   $fn$`,
  `create or replace function scion.apply_schema_change() returns trigger
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     change jsonb := NEW.change;
     done jsonb := '[]';
     added jsonb := '[]';
     touched boolean := false;
     outcome text;
     failure text;
     item jsonb;
     required jsonb;
     mapped record;
     stmt text;
     watermark bigint;
   begin
     select setup_log_id into watermark from scion.apply_state;
     -- Entries older than this mirror (the initial copy of the log brings them) are history.
     if NEW.id <= coalesce(watermark, 0) then
       return null;
     end if;
     -- A log copied again (a new subscription after a lost slot) brings entries already applied.
     if exists (select 1 from scion.schema_change_results r where r.log_id = NEW.id) then
       return null;
     end if;
     begin
       for item in select * from jsonb_array_elements(coalesce(change->'extensions', '[]')) loop
         touched := true;
         execute format('create schema if not exists %I', item->>'schema');
         stmt := format('create extension if not exists %I with schema %I', item->>'name', item->>'schema');
         execute stmt;
         done := done || to_jsonb(stmt);
       end loop;
       for item in select * from jsonb_array_elements(coalesce(change->'types', '[]')) loop
         if exists (select 1 from scion.selection s where s.schema_name in ('*', item->>'schema'))
            or exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = item->>'schema' and t.typname = item->>'name')
            or exists (select 1 from scion.mirror_types m where m.source_oid = (item->>'oid')::bigint) then
           touched := true;
           for required in select jsonb_array_elements(coalesce(item->'requires', '[]')) loop
             done := done || scion.ensure_type(required);
           end loop;
           done := done || scion.ensure_type(item - 'requires');
         end if;
       end loop;
       for item in select * from jsonb_array_elements(coalesce(change->'functions', '[]')) loop
         if exists (select 1 from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                    where n.nspname = item->>'schema' and p.proname = item->>'name' and pg_get_function_identity_arguments(p.oid) = item->>'arguments') then
           touched := true;
           done := done || scion.ensure_function(item);
         end if;
       end loop;
       for item in select * from jsonb_array_elements(coalesce(change->'dropped', '[]')) loop
         if item->>'kind' = 'table' then
           select * into mapped from scion.mirror_tables m where m.source_relid = (item->>'relid')::bigint;
           if found then
             touched := true;
             stmt := format('drop table if exists %I.%I cascade', mapped.schema_name, mapped.table_name);
             execute stmt;
             done := done || to_jsonb(stmt);
             delete from scion.mirror_tables m where m.source_relid = mapped.source_relid;
             delete from scion.recopy_requests r where r.source_relid = mapped.source_relid;
           end if;
         elsif item->>'kind' = 'index' and item->>'schema' <> 'scion'
               and exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = item->>'schema' and c.relname = item->>'name' and c.relkind in ('i', 'I')) then
           touched := true;
           stmt := format('drop index if exists %I.%I', item->>'schema', item->>'name');
           execute stmt;
           done := done || to_jsonb(stmt);
         end if;
       end loop;
       for item in select * from jsonb_array_elements(coalesce(change->'tables', '[]')) loop
         select * into mapped from scion.mirror_tables m where m.source_relid = (item->>'relid')::bigint;
         if found then
           continue when NEW.id <= mapped.log_id;
           touched := true;
           done := done || scion.ensure_table_dependencies(change, item->>'relid');
           done := done || scion.alter_table(mapped.snapshot, item);
           update scion.mirror_tables m set schema_name = item->>'schema', table_name = item->>'name', snapshot = item, log_id = NEW.id
             where m.source_relid = mapped.source_relid;
         elsif exists (select 1 from scion.selection s where s.schema_name in ('*', item->>'schema'))
               and (item->>'replica_identity' = 'f' or item->>'replica_identity' = 'i' or (item->>'replica_identity' = 'd' and (item->>'has_pk')::boolean)) then
           -- A new table in a schema mirrored whole: the source added it to the publication; the
           -- connector refreshes the subscription, which copies it.
           touched := true;
           insert into scion.mirror_tables (source_relid, schema_name, table_name, snapshot, log_id)
             values ((item->>'relid')::bigint, item->>'schema', item->>'name', item, NEW.id);
           done := done || scion.ensure_table_dependencies(change, item->>'relid');
           done := done || scion.create_table(item);
           added := added || to_jsonb((item->>'schema') || '.' || (item->>'name'));
         end if;
       end loop;
       outcome := case when touched then 'applied' else 'skipped' end;
     exception when others then
       outcome := 'failed';
       failure := sqlerrm;
       done := '[]';
       added := '[]';
     end;
     insert into scion.schema_change_results (log_id, source_at, command_tag, object_identity, statement, status, actions, error, tables_added)
       values (NEW.id, NEW.at, NEW.command_tag, NEW.object_identity, NEW.statement, outcome, done, failure, added)
       on conflict (log_id) do nothing;
     return null;
   end
   $fn$`,
  "drop trigger if exists scion_apply_schema_change on scion.schema_log",
  "create trigger scion_apply_schema_change after insert on scion.schema_log for each row execute function scion.apply_schema_change()",
  "alter table scion.schema_log enable always trigger scion_apply_schema_change",
  `comment on schema scion is '${MIRROR_OBJECTS_VERSION}'`
]
