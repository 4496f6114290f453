import { quoteLiteral } from "@scion/kit"
import { Effect } from "effect"
import type { PgSession } from "../engine/PgSession.js"

/**
 * Whether a pipeline's publication on the source still publishes what its mirror follows. A
 * publication dropped, or altered to leave out a mirrored table or an action, does not fail the
 * subscription on Postgres 18: the walsender skips what it no longer publishes ("skipped loading
 * publication", a warning on the source only) and the mirror goes on reading as streaming while
 * it misses changes; making the publication again does not bring back what was skipped. Older
 * sources fail the stream instead, for good. Either way only a full copy from a new slot mends it.
 */
export type PublicationCoverage =
  | { readonly state: "complete" }
  | { readonly state: "missing" }
  | {
      readonly state: "incomplete"
      /** Followed tables (as the source names them now) that it no longer publishes. */
      readonly tables: ReadonlyArray<string>
      /** Followed tables it publishes only in part (a row filter or a column list). */
      readonly partial: ReadonlyArray<string>
      /** insert, update, delete or truncate where it no longer publishes them. */
      readonly actions: ReadonlyArray<string>
    }

/**
 * `followedRelids`: the source oids the mirror follows (its `scion.mirror_tables`). One no longer on
 * the source is a dropped table, which schema following handles, not a gap in the publication.
 * `scionTables`: Scion's own published tables the mirror has (`scion.heartbeat`, which freshness
 * and read-your-writes branches wait on; `scion.schema_log`, captured DDL), where the source has them.
 * `pg_get_publication_tables` answers every way a table can be published (by name, by schema, all
 * tables; partitions through their root) on every supported version; a row filter or column list
 * (15+, read through `to_jsonb` so that older sources answer too) publishes a table only in part.
 */
export const publicationCoverage = (source: PgSession, publicationName: string, followedRelids: ReadonlyArray<string>, scionTables: ReadonlyArray<string>) =>
  source
    .query<{ actions: ReadonlyArray<string>; tables: ReadonlyArray<string>; partial: ReadonlyArray<string> }>(
      `with followed as (
         select c.oid, pg_catalog.format('%I.%I', n.nspname, c.relname) as name
         from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.oid = any($2::oid[]) or c.oid = any(array(select pg_catalog.to_regclass(t) from unnest($3::text[]) t))
       )
       select array_remove(array[case when not p.pubinsert then 'insert' end, case when not p.pubupdate then 'update' end,
                                 case when not p.pubdelete then 'delete' end, case when not p.pubtruncate then 'truncate' end], null) as actions,
              array(select f.name from followed f
                    where f.oid not in (select t.relid from pg_catalog.pg_get_publication_tables(p.pubname::text) t) order by 1) as tables,
              array(select f.name from followed f
                    where exists (select 1 from pg_catalog.pg_publication_rel r
                                  where r.prpubid = p.oid and r.prrelid = f.oid
                                    and (pg_catalog.to_jsonb(r) ->> 'prqual' is not null or pg_catalog.to_jsonb(r) ->> 'prattrs' is not null))
                    order by 1) as partial
       from pg_catalog.pg_publication p where p.pubname = $1`,
      [publicationName, [...followedRelids], [...scionTables]]
    )
    .pipe(
      Effect.map(([row]): PublicationCoverage => {
        if (row === undefined) return { state: "missing" }
        return row.actions.length === 0 && row.tables.length === 0 && row.partial.length === 0
          ? { state: "complete" }
          : { state: "incomplete", tables: row.tables, partial: row.partial, actions: row.actions }
      })
    )

/** The detail of a publication_changed quarantine. */
export const publicationChangedDetail = (publicationName: string, coverage: Exclude<PublicationCoverage, { state: "complete" }>) => {
  const lost = coverage.state === "missing" ? [] : [...coverage.tables, ...coverage.actions.map((action) => `${action}s`)]
  const partial = coverage.state === "missing" ? [] : coverage.partial
  const what =
    coverage.state === "missing"
      ? "no longer exists on the source"
      : [lost.length > 0 ? `no longer publishes ${lost.join(", ")}` : undefined, partial.length > 0 ? `publishes only some rows or columns of ${partial.join(", ")}` : undefined]
          .filter((part) => part !== undefined)
          .join(" and ")
  return `The publication ${publicationName} ${what}: the mirror missed the changes it skipped. A release copies the mirror again from a new slot (setup makes the publication again)`
}

/**
 * One statement on the source that drops `tables` (quoted names) from the publication, or adds
 * them, each only where that changes something: a DDL on a table joins a capturing source's
 * publication by itself, and a step repeated after a failure finds its own work done.
 */
export const publicationMembershipSql = (publicationName: string, tables: ReadonlyArray<string>, change: "drop" | "add") => `
  do $membership$ declare
    name text;
  begin
    foreach name in array array[${tables.map(quoteLiteral).join(", ")}]::text[] loop
      if ${change === "drop" ? "" : "not "}exists (select 1 from pg_catalog.pg_publication_rel pr join pg_catalog.pg_publication p on p.oid = pr.prpubid
                 where p.pubname = ${quoteLiteral(publicationName)} and pr.prrelid = name::regclass) then
        execute pg_catalog.format('alter publication %I ${change} table only %s', ${quoteLiteral(publicationName)}, name);
      end if;
    end loop;
  end $membership$`

