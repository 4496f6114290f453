import { Effect } from "effect"
import type { Catalog } from "../domain/schemaDiff.js"
import type { BranchingEngine } from "./Engines.js"
import { connectEngine, type EngineFailure } from "./EngineSql.js"

/**
 * One database's user tables (columns, constraints, indexes no constraint owns) and enums, in one
 * round trip, sorted. Postgres's own, information_schema and Scion's `scion` schema are left out.
 * Not-null is read from the column (PG 18 also records it as a constraint, which is left out).
 */
const CATALOG_SQL = `
with schemas as (
  select oid, nspname from pg_namespace
  where nspname not in ('information_schema', 'scion') and nspname not like 'pg\\_%'
), tables as (
  select s.nspname as schema, c.relname as name, c.oid
  from pg_class c join schemas s on s.oid = c.relnamespace
  where c.relkind in ('r', 'p') and not c.relispartition
)
select json_build_object(
  'tables', coalesce((
    select json_agg(json_build_object(
      'schema', t.schema,
      'name', t.name,
      'columns', coalesce((
        select json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), 'not_null', a.attnotnull, 'default', pg_get_expr(d.adbin, d.adrelid)) order by a.attnum)
        from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = t.oid and a.attnum > 0 and not a.attisdropped), '[]'::json),
      'constraints', coalesce((
        select json_agg(json_build_object('name', co.conname, 'definition', pg_get_constraintdef(co.oid)) order by co.conname)
        from pg_constraint co where co.conrelid = t.oid and co.contype in ('p', 'u', 'c', 'f', 'x')), '[]'::json),
      'indexes', coalesce((
        select json_agg(json_build_object('name', i.relname, 'definition', pg_get_indexdef(x.indexrelid)) order by i.relname)
        from pg_index x join pg_class i on i.oid = x.indexrelid
        where x.indrelid = t.oid and not exists (select 1 from pg_constraint co where co.conindid = x.indexrelid)), '[]'::json)
    ) order by t.schema, t.name)
    from tables t), '[]'::json),
  'enums', coalesce((
    select json_agg(json_build_object('schema', s.nspname, 'name', ty.typname, 'labels', (select json_agg(e.enumlabel order by e.enumsortorder) from pg_enum e where e.enumtypid = ty.oid)) order by s.nspname, ty.typname)
    from pg_type ty join schemas s on s.oid = ty.typnamespace where ty.typtype = 'e'), '[]'::json)
) as catalog`

export const readCatalog = (engine: BranchingEngine, database: string): Effect.Effect<Catalog, EngineFailure> =>
  Effect.scoped(
    Effect.flatMap(connectEngine(engine, database), (session) => session.query<{ catalog: Catalog }>("schema_catalog", CATALOG_SQL))
  ).pipe(
    Effect.map((rows) => rows[0]!.catalog),
    Effect.withSpan("SchemaCatalog.read", { attributes: { database } })
  )
