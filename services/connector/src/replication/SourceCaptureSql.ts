/**
 * DDL capture, the source side (services/connector/README.md, "Schema changes"): what Scion
 * installs on a source database so that schema changes travel through the publication in commit
 * order with the rows.
 *
 * Event triggers record each DDL command that touches a user schema into `scion.schema_log` —
 * not the statement to replay but the state it left: a snapshot of every table it touched
 * (SnapshotSql) with the types its columns use and the functions it calls, and of every
 * user-defined type or function made or changed. The log table is in the connector's
 * publication; the mirror applies it (MirrorFollowingSql). Snapshots rather than statements,
 * because a client may send a migration as one multi-statement string (replaying
 * `current_query()` would replay its INSERTs too), and because the mirror is a subset of the
 * source (a statement may name objects the mirror does not have).
 *
 * A failure to capture never fails the user's DDL: it becomes a warning.
 */
import { SNAPSHOT_FUNCTIONS } from "./SnapshotSql.js"


/** The schema Scion owns on the source and on the mirror. */
export const CAPTURE_SCHEMA = "scion"

/** The source's tables that join every capturing connector's publication. */
export const CAPTURE_PUBLISHED_TABLES = ["scion.schema_log", "scion.heartbeat"] as const

/** The heartbeat alone: what a role that may create a schema but not event triggers gets. */
export const HEARTBEAT_TABLE = "scion.heartbeat"

/** The heartbeat's table, the same on the source and on the mirror. */
export const HEARTBEAT_DDL = `create table if not exists scion.heartbeat (
     connector_id text primary key,
     at timestamptz not null,
     lsn pg_lsn not null
   )`

/**
 * The heartbeat on its own (schema and table), for a source role with CREATE on the database:
 * the connector writes it every few seconds, and the mirror's copy says how fresh its data is.
 */
export const heartbeatInstall: ReadonlyArray<string> = ["create schema if not exists scion", HEARTBEAT_DDL]

/** Whether the heartbeat table is on a source database. */
export const HEARTBEAT_PRESENT_SQL = "select to_regclass('scion.heartbeat') is not null as present, has_database_privilege(current_database(), 'CREATE') as can_create"


/**
 * The source side, idempotent: the schema, the log, the heartbeat the connector writes so the
 * mirror knows how fresh it is, the schemas each publication mirrors whole (new tables there join
 * it), the snapshot functions and the two event triggers. Run by engine setup when the role may
 * create event triggers; the grant script carries the same for a DBA.
 */
export const sourceCaptureInstall: ReadonlyArray<string> = [
  "create schema if not exists scion",
  `create table if not exists scion.schema_log (
     id bigserial primary key,
     at timestamptz not null default now(),
     command_tag text not null,
     object_identity text,
     statement text,
     change jsonb not null
   )`,
  HEARTBEAT_DDL,
  `create table if not exists scion.publication_scope (
     publication text not null,
     schema_name text not null,
     primary key (publication, schema_name)
   )`,
  SNAPSHOT_FUNCTIONS,
  `create or replace function scion.capture_ddl() returns event_trigger
   language plpgsql security definer set search_path = pg_catalog as $fn$
   declare
     command record;
     rel oid;
     tables jsonb := '[]';
     types jsonb := '[]';
     table_dependencies jsonb := '[]';
     functions jsonb := '[]';
     typ oid;
     snap jsonb;
     extensions jsonb := '[]';
     seen oid[] := '{}';
     identity text;
     scope record;
   begin
     for command in select * from pg_event_trigger_ddl_commands() loop
       -- An extension made (it has no schema of its own): the mirror makes it too, where the
       -- source has it, before a table uses its types or functions.
       if command.classid = 'pg_extension'::regclass and not command.in_extension then
         extensions := extensions || coalesce((select jsonb_build_array(jsonb_build_object('name', e.extname, 'schema', n.nspname))
                                               from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.oid = command.objid), '[]');
         identity := coalesce(identity, command.object_identity);
         continue;
       end if;
       continue when command.in_extension or command.schema_name is null
         or command.schema_name in ('scion', 'pg_catalog', 'information_schema')
         or command.schema_name like 'pg\\_temp%' or command.schema_name like 'pg\\_toast%';
       identity := coalesce(identity, command.object_identity);
       rel := null;
       if command.classid = 'pg_class'::regclass then
         select case when c.relkind in ('r', 'p') then c.oid
                     when c.relkind in ('i', 'I') then (select x.indrelid from pg_index x where x.indexrelid = c.oid) end
           into rel from pg_class c where c.oid = command.objid;
         -- A composite type's attributes live in pg_class (ALTER TYPE … ADD ATTRIBUTE).
         typ := (select c.reltype from pg_class c where c.oid = command.objid and c.relkind = 'c');
       elsif command.classid = 'pg_constraint'::regclass then
         -- A table's constraint, or a domain's check (ALTER DOMAIN … ADD CONSTRAINT).
         select nullif(k.conrelid, 0), nullif(k.contypid, 0) into rel, typ from pg_constraint k where k.oid = command.objid;
       elsif command.classid = 'pg_type'::regclass then
         typ := command.objid;
       elsif command.classid = 'pg_proc'::regclass then
         -- A function replaced: the mirror follows one it has (a table's use brings a new one).
         snap := scion.function_snapshot(command.objid);
         if snap is not null then
           functions := functions || jsonb_build_array(snap);
         end if;
       end if;
       if typ is not null then
         snap := scion.type_snapshot(typ);
         if snap is not null then
           types := types || jsonb_build_array(snap);
         end if;
         typ := null;
       end if;
       continue when rel is null or rel = any(seen);
       seen := seen || rel;
       -- Partitions replicate through their root.
       continue when not exists (select 1 from pg_class c where c.oid = rel and c.relkind in ('r', 'p') and not c.relispartition);
       -- Rewritten by this command (scion.capture_rewrite): the mirror copies the table again, as
       -- the source filled its rows by an expression no snapshot carries (a USING that keeps the type).
       tables := tables || jsonb_build_array(scion.table_snapshot(rel)
                 || case when rel::text = any(string_to_array(current_setting('scion.rewritten', true), ',')) then '{"rewritten": true}'::jsonb else '{}'::jsonb end);
       -- The types its columns use and the functions it calls travel with it: the mirror may
       -- lack one made before setup that no mirrored table used then, or one in a schema it does
       -- not mirror whole.
       table_dependencies := table_dependencies || jsonb_build_array(jsonb_build_object('relid', rel::bigint, 'types', scion.column_types(rel), 'functions', scion.table_functions(rel)));
       -- A table in a schema a publication mirrors whole joins it once it can replicate updates and
       -- deletes (adding one without a replica identity would make the source refuse them).
       for scope in
         select distinct s.publication from scion.publication_scope s join pg_class c on c.oid = rel join pg_namespace n on n.oid = c.relnamespace
         where s.schema_name in ('*', n.nspname)
           and exists (select 1 from pg_publication p where p.pubname = s.publication)
           and not exists (select 1 from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid where p.pubname = s.publication and pr.prrelid = rel)
           and (c.relreplident = 'f' or (c.relreplident = 'i' and exists (select 1 from pg_index x where x.indrelid = rel and x.indisreplident))
                or (c.relreplident = 'd' and exists (select 1 from pg_constraint k where k.conrelid = rel and k.contype = 'p')))
       loop
         begin
           execute format('alter publication %I add table only %s', scope.publication, rel::regclass);
         exception when others then
           raise warning 'scion: % could not join publication %: %', rel::regclass, scope.publication, sqlerrm;
         end;
       end loop;
     end loop;
     perform set_config('scion.rewritten', '', true);
     if jsonb_array_length(tables) = 0 and jsonb_array_length(types) = 0 and jsonb_array_length(functions) = 0 and jsonb_array_length(extensions) = 0 then
       return;
     end if;
     insert into scion.schema_log (command_tag, object_identity, statement, change)
     values (tg_tag, identity, left(current_query(), 4000), jsonb_build_object('tables', tables, 'table_dependencies', table_dependencies, 'types', types, 'functions', functions, 'extensions', extensions, 'dropped', '[]'::jsonb));
   exception when others then
     raise warning 'scion: schema change not captured (%): %', tg_tag, sqlerrm;
   end
   $fn$`,
  `create or replace function scion.capture_drop() returns event_trigger
   language plpgsql security definer set search_path = pg_catalog as $fn$
   declare
     dropped jsonb := '[]';
     tables jsonb := '[]';
     seen oid[] := '{}';
     object record;
   begin
     for object in select * from pg_event_trigger_dropped_objects() loop
       -- Columns a drop took with it (DROP TYPE … CASCADE): no command names their table, so its
       -- snapshot goes here. An ALTER TABLE's own drop is captured when the command ends.
       if object.object_type = 'table column' and tg_tag <> 'ALTER TABLE' and not object.is_temporary
          and object.schema_name not in ('scion', 'pg_catalog', 'information_schema') and not object.objid = any(seen)
          and exists (select 1 from pg_class c where c.oid = object.objid and c.relkind in ('r', 'p') and not c.relispartition) then
         seen := seen || object.objid;
         tables := tables || jsonb_build_array(scion.table_snapshot(object.objid));
         continue;
       end if;
       continue when not object.original or object.is_temporary or object.schema_name is null
         or object.schema_name in ('scion', 'pg_catalog', 'information_schema') or object.schema_name like 'pg\\_toast%'
         or object.object_type not in ('table', 'index');
       dropped := dropped || jsonb_build_array(jsonb_build_object('kind', object.object_type, 'relid', object.objid::bigint,
                                                                   'schema', object.schema_name, 'name', object.object_name));
     end loop;
     if jsonb_array_length(dropped) = 0 and jsonb_array_length(tables) = 0 then
       return;
     end if;
     insert into scion.schema_log (command_tag, object_identity, statement, change)
     values (tg_tag, coalesce((dropped->0->>'schema') || '.' || (dropped->0->>'name'), (tables->0->>'schema') || '.' || (tables->0->>'name')), left(current_query(), 4000),
             jsonb_build_object('tables', tables, 'types', '[]'::jsonb, 'dropped', dropped));
   exception when others then
     raise warning 'scion: schema change not captured (%): %', tg_tag, sqlerrm;
   end
   $fn$`,
  // The tables a command rewrites (before its ddl_command_end), in a setting of the transaction:
  // a rewrite filled the rows by the source's own expression. Not a change of persistence or
  // access method, which keep the values.
  `create or replace function scion.capture_rewrite() returns event_trigger
   language plpgsql set search_path = pg_catalog as $fn$
   declare
     rel oid := pg_event_trigger_table_rewrite_oid();
   begin
     if pg_event_trigger_table_rewrite_reason() & 6 <> 0 then
       -- A partition's rows are its root's to the mirror (each partition is rewritten on its own).
       while (select c.relispartition from pg_class c where c.oid = rel) loop
         rel := (select i.inhparent from pg_inherits i where i.inhrelid = rel);
       end loop;
       perform set_config('scion.rewritten', concat_ws(',', nullif(current_setting('scion.rewritten', true), ''), rel::text), true);
     end if;
   exception when others then
     raise warning 'scion: table rewrite not captured: %', sqlerrm;
   end
   $fn$`,
  // EXECUTE PROCEDURE: the spelling every supported source version (10+) accepts.
  `do $do$ begin
     if not exists (select 1 from pg_event_trigger where evtname = 'scion_capture_ddl') then
       create event trigger scion_capture_ddl on ddl_command_end execute procedure scion.capture_ddl();
     end if;
     if not exists (select 1 from pg_event_trigger where evtname = 'scion_capture_drop') then
       create event trigger scion_capture_drop on sql_drop execute procedure scion.capture_drop();
     end if;
     if not exists (select 1 from pg_event_trigger where evtname = 'scion_capture_rewrite') then
       create event trigger scion_capture_rewrite on table_rewrite execute procedure scion.capture_rewrite();
     end if;
   end $do$`
]

/** Whether the capture objects are in place on a source database (installed by Scion or a DBA). */
export const SOURCE_CAPTURE_PRESENT_SQL = `
  select to_regclass('scion.schema_log') is not null and to_regclass('scion.heartbeat') is not null
         and to_regprocedure('scion.table_snapshot(oid)') is not null
         and (select count(*) from pg_event_trigger where evtname in ('scion_capture_ddl', 'scion_capture_drop') and evtenabled <> 'D') = 2 as present`

/** Removes the capture objects once no publication of any connector uses them any more. */
export const sourceCaptureUninstall: ReadonlyArray<string> = [
  "drop event trigger if exists scion_capture_ddl",
  "drop event trigger if exists scion_capture_drop",
  "drop event trigger if exists scion_capture_rewrite",
  "drop schema if exists scion cascade"
]


/** The schemas a selection mirrors whole: `*` (every schema) or the schema of each `db.schema.*`. */
export const wholeSchemasOf = (selectedPaths: ReadonlyArray<string>, database: string): ReadonlyArray<string> => {
  const schemas = new Set<string>()
  for (const path of selectedPaths) {
    if (path === "*" || path === `${database}.*`) schemas.add("*")
    const parts = path.split(".")
    if (parts.length === 3 && parts[0] === database && parts[2] === "*") schemas.add(parts[1]!)
  }
  return schemas.has("*") ? ["*"] : [...schemas]
}
