/**
 * The catalog snapshots schema following compares (services/connector/README.md, "Schema
 * changes"): a table's state (columns by attnum, constraints, indexes), the user-defined types
 * its columns use and the source's functions it calls. The capture trigger records them on the
 * source, reconciliation reads them there directly, and the mirror reads its own side with the
 * same SQL. Every query runs with `search_path = pg_catalog`, so the names Postgres prints are
 * schema-qualified on both sides and compare as text.
 */

/**
 * A table's snapshot (jsonb) by its oid ($1), as the capture trigger records it and the
 * reconciler reads it directly (no object on the source needed). Run with search_path = pg_catalog
 * and datestyle ISO, extra_float_digits 3 (a column's `missing` value is text the mirror parses back exactly).
 */
export const TABLE_SNAPSHOT_SQL = `
  select jsonb_build_object(
    'relid', c.oid::bigint,
    'schema', n.nspname,
    'name', c.relname,
    'replica_identity', c.relreplident::text,
    'has_pk', exists (select 1 from pg_constraint k where k.conrelid = c.oid and k.contype = 'p'),
    'columns', coalesce((
      select jsonb_agg(jsonb_build_object(
               'attnum', a.attnum,
               'name', a.attname,
               'type', format_type(a.atttypid, a.atttypmod),
               'not_null', a.attnotnull,
               'default', pg_get_expr(d.adbin, d.adrelid),
               'identity', a.attidentity::text,
               'generated', a.attgenerated::text,
               'collation', case when a.attcollation <> t.typcollation and a.attcollation <> 0 then
                              (select quote_ident(cn.nspname) || '.' || quote_ident(co.collname)
                               from pg_collation co join pg_namespace cn on cn.oid = co.collnamespace where co.oid = a.attcollation) end
             )
             -- The value ADD COLUMN gave the rows already there (a fast default, computed once and
             -- kept after the default changes or goes), as text: only where there is one.
             -- A partitioned root keeps none itself: its partitions do, each the same value.
             || coalesce(case when a.atthasmissing then jsonb_build_object('missing', (a.attmissingval::text::text[])[1])
                              when c.relkind = 'p' then (select jsonb_build_object('missing', (la.attmissingval::text::text[])[1])
                                                         from pg_inherits i join pg_attribute la on la.attrelid = i.inhrelid and la.attname = a.attname
                                                         where i.inhparent = c.oid and la.atthasmissing limit 1) end, '{}'::jsonb)
             order by a.attnum)
      from pg_attribute a
      join pg_type t on t.oid = a.atttypid
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]'::jsonb),
    'constraints', coalesce((
      select jsonb_agg(jsonb_build_object('name', k.conname, 'kind', k.contype::text, 'definition', pg_get_constraintdef(k.oid),
                                          'ref_relid', nullif(k.confrelid, 0)::bigint) order by k.conname)
      from pg_constraint k where k.conrelid = c.oid and k.contype in ('p', 'u', 'c', 'x', 'f')), '[]'::jsonb),
    'indexes', coalesce((
      select jsonb_agg(jsonb_build_object('name', ic.relname, 'definition', pg_get_indexdef(i.indexrelid)) order by ic.relname)
      from pg_index i join pg_class ic on ic.oid = i.indexrelid
      where i.indrelid = c.oid and not exists (select 1 from pg_constraint k where k.conindid = i.indexrelid and k.conrelid = i.indrelid)), '[]'::jsonb)
  ) as snapshot
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.oid = $1::oid and c.relkind in ('r', 'p')`

/** The tables the mirror follows, by the mirror's own oids (read on the mirror). */
const MIRRORED_RELIDS = "array(select to_regclass(format('%I.%I', m.schema_name, m.table_name))::oid from scion.mirror_tables m)"

/**
 * The user-defined types that `roots` (an expression of type oid[]) need, as snapshots in the
 * order they must be made: enums, domains, standalone composites and ranges, followed through
 * domain bases, arrays' elements, composites' attributes and ranges' subtypes, each after every
 * type it uses. Types of extensions are the extension's to make. Run with search_path =
 * pg_catalog, so the names printed are schema-qualified on either side and compare as text.
 */
const typeSnapshotsSql = (roots: string) => `
  with recursive walk(oid, depth, path) as (
    select r.oid, 0, array[r.oid] from unnest(${roots}) as r(oid)
    union all
    select d.dep, w.depth + 1, w.path || d.dep
    from walk w
    cross join lateral (
      select t.typbasetype as dep from pg_type t where t.oid = w.oid and t.typtype = 'd'
      union all
      select t.typelem from pg_type t join pg_type e on e.oid = t.typelem and e.typarray = t.oid where t.oid = w.oid
      union all
      select a.atttypid from pg_type t join pg_class c on c.oid = t.typrelid and c.relkind = 'c'
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped where t.oid = w.oid
      union all
      select r.rngsubtype from pg_range r where r.rngtypid = w.oid
    ) d
    where d.dep <> 0 and not d.dep = any(w.path)
  ), ranked as (select oid, max(depth) as depth from walk group by oid)
  select coalesce(jsonb_agg(
    jsonb_build_object('oid', t.oid::bigint, 'schema', n.nspname, 'name', t.typname, 'kind', t.typtype::text) || case t.typtype
      when 'e' then jsonb_build_object('labels', (select jsonb_agg(e.enumlabel order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid))
      when 'd' then jsonb_build_object(
        'base_type', format_type(t.typbasetype, t.typtypmod),
        'not_null', t.typnotnull,
        'default', pg_get_expr(t.typdefaultbin, 0),
        'collation', (select quote_ident(cn.nspname) || '.' || quote_ident(co.collname) from pg_collation co join pg_namespace cn on cn.oid = co.collnamespace
                      where co.oid = t.typcollation and t.typcollation <> (select b.typcollation from pg_type b where b.oid = t.typbasetype)),
        'checks', coalesce((select jsonb_agg(jsonb_build_object('name', k.conname, 'definition', pg_get_constraintdef(k.oid)) order by k.conname)
                            from pg_constraint k where k.contypid = t.oid and k.contype = 'c'), '[]'::jsonb))
      when 'c' then jsonb_build_object('attributes', coalesce((
        select jsonb_agg(jsonb_build_object(
                 'name', a.attname,
                 'type', format_type(a.atttypid, a.atttypmod),
                 'collation', (select quote_ident(cn.nspname) || '.' || quote_ident(co.collname) from pg_collation co join pg_namespace cn on cn.oid = co.collnamespace
                               where co.oid = a.attcollation and a.attcollation <> (select b.typcollation from pg_type b where b.oid = a.atttypid))
               ) order by a.attnum)
        from pg_attribute a where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped), '[]'::jsonb))
      when 'r' then (
        select jsonb_build_object(
                 'subtype', format_type(r.rngsubtype, null),
                 'collation', (select quote_ident(cn.nspname) || '.' || quote_ident(co.collname) from pg_collation co join pg_namespace cn on cn.oid = co.collnamespace
                               where co.oid = r.rngcollation and r.rngcollation <> (select b.typcollation from pg_type b where b.oid = r.rngsubtype)),
                 -- Only a built-in difference function can be named on the mirror (it only speeds up GiST).
                 'subtype_diff', (select 'pg_catalog.' || quote_ident(f.proname) from pg_proc f where f.oid = r.rngsubdiff and f.pronamespace = 'pg_catalog'::regnamespace))
        from pg_range r where r.rngtypid = t.oid)
    end
    order by ranked.depth desc, n.nspname, t.typname), '[]'::jsonb) as types
  from ranked join pg_type t on t.oid = ranked.oid join pg_namespace n on n.oid = t.typnamespace
  where t.typtype in ('e', 'd', 'c', 'r') and n.nspname not in ('pg_catalog', 'information_schema')
    and (t.typtype <> 'c' or exists (select from pg_class c where c.oid = t.typrelid and c.relkind = 'c'))
    and not exists (select from pg_depend x where x.classid = 'pg_type'::regclass and x.objid = t.oid and x.deptype = 'e')`

/** The columns' types of the tables $1 (oid[]) as `typeSnapshotsSql` answers them. */
const columnTypesOf = (relids: string) =>
  `array(select a.atttypid from pg_attribute a where a.attrelid = any(${relids}) and a.attnum > 0 and not a.attisdropped)`


/**
 * The functions of the source's own that the tables $1 call from a default, a generated column,
 * a check or an index (`relids`, an expression of type oid[]), with the functions those call
 * where Postgres records it (SQL-standard bodies), each after the ones it calls: their snapshot
 * is the definition Postgres prints. Functions of extensions are the extension's to make. What a
 * function's body names otherwise (tables, sequences, other functions) is not followed.
 */
const functionSnapshotsSql = (relids: string) => `
  with recursive called(oid) as (
    select d.refobjid from pg_depend d
    where d.refclassid = 'pg_proc'::regclass and (
      (d.classid = 'pg_attrdef'::regclass and d.objid in (select ad.oid from pg_attrdef ad where ad.adrelid = any(${relids})))
      or (d.classid = 'pg_constraint'::regclass and d.objid in (select k.oid from pg_constraint k where k.conrelid = any(${relids})))
      or (d.classid = 'pg_class'::regclass and d.objid in (select i.indexrelid from pg_index i where i.indrelid = any(${relids}))))
  ), walk(oid, depth, path) as (
    select c.oid, 0, array[c.oid] from (select distinct oid from called) c
    union all
    select d.refobjid, w.depth + 1, w.path || d.refobjid
    from walk w join pg_depend d on d.classid = 'pg_proc'::regclass and d.objid = w.oid and d.refclassid = 'pg_proc'::regclass
    where not d.refobjid = any(w.path)
  ), ranked as (select oid, max(depth) as depth from walk group by oid)
  select coalesce(jsonb_agg(jsonb_build_object(
           'oid', p.oid::bigint, 'schema', n.nspname, 'name', p.proname,
           'arguments', pg_get_function_identity_arguments(p.oid), 'definition', pg_get_functiondef(p.oid))
         order by ranked.depth desc, n.nspname, p.proname), '[]'::jsonb) as functions
  from ranked join pg_proc p on p.oid = ranked.oid join pg_namespace n on n.oid = p.pronamespace
  where n.nspname not in ('pg_catalog', 'information_schema') and p.prokind = 'f'
    and not exists (select from pg_depend x where x.classid = 'pg_proc'::regclass and x.objid = p.oid and x.deptype = 'e')`

/**
 * What the tables `relids` (oid[]) need beside themselves, in one statement (one row): `types`,
 * the user-defined types they use (`typeSnapshotsSql`), and `functions`, the source's own
 * functions they call (`functionSnapshotsSql`), each in the order it must be made. Run with
 * search_path = pg_catalog, so names compare as text on either side.
 */
const dependenciesSql = (relids: string) =>
  `select (${typeSnapshotsSql(columnTypesOf(relids))}) as types, (${functionSnapshotsSql(relids)}) as functions`

/** `dependenciesSql` of the source's tables $1: what setup makes and reconciliation compares. */
export const TABLE_DEPENDENCIES_SQL = dependenciesSql("$1::oid[]")

/** `dependenciesSql` of the tables the mirror follows, read on the mirror. */
export const MIRROR_TABLE_DEPENDENCIES_SQL = dependenciesSql(MIRRORED_RELIDS)

/** The source's functions around the snapshot SQL, for the capture trigger (SourceCaptureSql). */
export const SNAPSHOT_FUNCTIONS = `
create or replace function scion.table_snapshot(rel oid) returns jsonb
language sql stable set search_path = pg_catalog set datestyle = 'ISO, YMD' set intervalstyle = 'postgres' set extra_float_digits = 3 as $fn$
${TABLE_SNAPSHOT_SQL.replace("$1::oid", "rel")}
$fn$;

create or replace function scion.type_snapshots(roots oid[]) returns jsonb
language sql stable set search_path = pg_catalog as $fn$
${typeSnapshotsSql("roots")}
$fn$;

create or replace function scion.column_types(rel oid) returns jsonb
language sql stable set search_path = pg_catalog as $fn$
${typeSnapshotsSql(columnTypesOf("array[rel]"))}
$fn$;

create or replace function scion.table_functions(rel oid) returns jsonb
language sql stable set search_path = pg_catalog as $fn$
${functionSnapshotsSql("array[rel]")}
$fn$;

-- A function made or replaced (null unless the source's own), as table_functions has it.
create or replace function scion.function_snapshot(fn oid) returns jsonb
language sql stable set search_path = pg_catalog as $fn$
  select jsonb_build_object('oid', p.oid::bigint, 'schema', n.nspname, 'name', p.proname,
                            'arguments', pg_get_function_identity_arguments(p.oid), 'definition', pg_get_functiondef(p.oid))
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where p.oid = fn and p.prokind = 'f'
    and not exists (select from pg_depend x where x.classid = 'pg_proc'::regclass and x.objid = p.oid and x.deptype = 'e')
$fn$;

-- A type made or changed (null unless user-defined), with the types it needs ('requires', in
-- order): the mirror makes those too, though they may live in a schema it does not mirror.
create or replace function scion.type_snapshot(typ oid) returns jsonb
language sql stable set search_path = pg_catalog as $fn$
  select (s.types -> -1) || jsonb_build_object('requires', s.types - (-1))
  from (select scion.type_snapshots(array[typ]) as types) s
  join pg_type t on t.oid = typ join pg_namespace n on n.oid = t.typnamespace
  where s.types -> -1 ->> 'schema' = n.nspname and s.types -> -1 ->> 'name' = t.typname
$fn$;`

