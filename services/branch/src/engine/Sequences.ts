import { Effect } from "effect"
import type { BranchingEngine } from "./Engines.js"
import { connectEngine } from "./EngineSql.js"

/**
 * Logical replication carries rows, not sequence values: a mirror's sequences stay where its
 * setup left them while its tables fill up, and a branch would hand out keys its rows already
 * use. At the cut, every sequence a column draws from (identity, serial, or a default calling
 * nextval) is moved at or past the furthest value its columns hold — raised for ascending
 * sequences, lowered for descending ones, never moved back.
 */

const SEQUENCE_COLUMNS_SQL = `
  select format('%I.%I', sn.nspname, s.relname) as sequence, format('%I.%I', tn.nspname, t.relname) as "table",
         quote_ident(a.attname) as "column", q.seqincrement::text as increment
  from pg_depend d
  join pg_class s on s.oid = d.objid and s.relkind = 'S'
  join pg_namespace sn on sn.oid = s.relnamespace
  join pg_sequence q on q.seqrelid = s.oid
  join pg_class t on t.oid = d.refobjid and t.relkind in ('r', 'p')
  join pg_namespace tn on tn.oid = t.relnamespace
  join pg_attribute a on a.attrelid = t.oid and a.attnum = d.refobjsubid
  where d.classid = 'pg_class'::regclass and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
  union
  select format('%I.%I', sn.nspname, s.relname), format('%I.%I', tn.nspname, t.relname), quote_ident(a.attname), q.seqincrement::text
  from pg_attrdef ad
  join pg_depend d on d.classid = 'pg_attrdef'::regclass and d.objid = ad.oid and d.refclassid = 'pg_class'::regclass
  join pg_class s on s.oid = d.refobjid and s.relkind = 'S'
  join pg_namespace sn on sn.oid = s.relnamespace
  join pg_sequence q on q.seqrelid = s.oid
  join pg_class t on t.oid = ad.adrelid
  join pg_namespace tn on tn.oid = t.relnamespace
  join pg_attribute a on a.attrelid = ad.adrelid and a.attnum = ad.adnum
  where tn.nspname not in ('pg_catalog', 'information_schema', 'scion')`

/** Aligns the branch's sequences with the data it holds; answers how many were moved. */
export const alignSequences = (engine: BranchingEngine, database: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const branch = yield* connectEngine(engine, database)
      const rows = yield* branch.query<{ sequence: string; table: string; column: string; increment: string }>("sequences", SEQUENCE_COLUMNS_SQL)
      const bySequence = new Map<string, { readonly ascending: boolean; readonly columns: Array<{ readonly table: string; readonly column: string }> }>()
      for (const row of rows) {
        const entry = bySequence.get(row.sequence) ?? { ascending: !row.increment.startsWith("-"), columns: [] }
        entry.columns.push({ table: row.table, column: row.column })
        bySequence.set(row.sequence, entry)
      }
      let moved = 0
      for (const [sequence, { ascending, columns }] of bySequence) {
        // The furthest value any column drawing from the sequence holds, and the next value the
        // sequence would give: setval only when the data has reached it.
        const furthest = `${ascending ? "greatest" : "least"}(${columns.map((c) => `(select ${ascending ? "max" : "min"}(${c.column})::bigint from ${c.table})`).join(", ")})`
        const next = `(select case when is_called then last_value + ${ascending ? "" : "-"}abs((select seqincrement from pg_sequence where seqrelid = '${sequence.replaceAll("'", "''")}'::regclass)) else last_value end from ${sequence})`
        const [row] = yield* branch.query<{ moved: boolean }>(
          "sequences",
          `select coalesce((select setval('${sequence.replaceAll("'", "''")}'::regclass, v) is not null
                            from (select ${furthest} as v) f where v is not null and v ${ascending ? ">=" : "<="} ${next}), false) as moved`
        )
        if (row?.moved === true) moved++
      }
      return moved
    })
  ).pipe(Effect.withSpan("Sequences.alignSequences", { attributes: { database } }))
