import { describe, expect, it } from "@effect/vitest"
import { type Catalog, type CatalogTable, schemaDiff } from "../src/domain/schemaDiff.js"

const table = (name: string, overrides: Partial<CatalogTable> = {}): CatalogTable => ({
  schema: "public",
  name,
  columns: [
    { name: "id", type: "bigint", not_null: true, default: null },
    { name: "note", type: "text", not_null: false, default: null }
  ],
  constraints: [{ name: `${name}_pkey`, definition: "PRIMARY KEY (id)" }],
  indexes: [],
  ...overrides
})

const catalog = (tables: ReadonlyArray<CatalogTable>, enums: Catalog["enums"] = []): Catalog => ({ tables, enums })

describe("schemaDiff", () => {
  it("finds nothing between equal catalogs", () => {
    expect(schemaDiff(catalog([table("a")]), catalog([table("a")]))).toEqual([])
  })

  it("says each column change with its statement", () => {
    const from = catalog([table("a")])
    const to = catalog([
      table("a", {
        columns: [
          { name: "id", type: "integer", not_null: true, default: null },
          { name: "note", type: "text", not_null: true, default: "'x'::text" },
          { name: "added", type: "boolean", not_null: true, default: "false" }
        ]
      })
    ])
    expect(schemaDiff(from, to).map((c) => [c.kind, c.name, c.sql])).toEqual([
      ["add_column", "added", 'alter table "public"."a" add column "added" boolean default false not null;'],
      ["alter_column_type", "id", 'alter table "public"."a" alter column "id" type integer;'],
      ["set_default", "note", `alter table "public"."a" alter column "note" set default 'x'::text;`],
      ["set_not_null", "note", 'alter table "public"."a" alter column "note" set not null;']
    ])
    expect(schemaDiff(to, from).map((c) => c.kind)).toEqual(["alter_column_type", "drop_default", "drop_not_null", "drop_column"])
  })

  it("creates a new table with its constraints and indexes after the types, and drops what went", () => {
    const created = table("b", { indexes: [{ name: "b_note_idx", definition: "CREATE INDEX b_note_idx ON public.b USING btree (note)" }] })
    const changes = schemaDiff(catalog([table("a"), table("gone")], [{ schema: "public", name: "mood", labels: ["sad"] }]), catalog([table("a"), created], [{ schema: "public", name: "state", labels: ["open"] }]))
    expect(changes.map((c) => [c.kind, c.table, c.name])).toEqual([
      ["create_enum", null, "state"],
      ["create_table", "b", "b"],
      ["add_constraint", "b", "b_pkey"],
      ["create_index", "b", "b_note_idx"],
      ["drop_table", "gone", "gone"],
      ["drop_enum", null, "mood"]
    ])
    expect(changes[1]!.sql).toBe('create table "public"."b" ("id" bigint not null, "note" text);')
    expect(changes[2]!.sql).toBe('alter table "public"."b" add constraint "b_pkey" PRIMARY KEY (id);')
  })

  it("replaces a changed constraint or index, adds enum values in place, and replaces an enum that lost one", () => {
    const from = catalog([table("a", { indexes: [{ name: "a_idx", definition: "CREATE INDEX a_idx ON public.a USING btree (note)" }] })], [
      { schema: "public", name: "state", labels: ["open", "paid"] },
      { schema: "public", name: "mood", labels: ["sad", "glad"] }
    ])
    const to = catalog(
      [table("a", { constraints: [{ name: "a_pkey", definition: "PRIMARY KEY (id, note)" }], indexes: [{ name: "a_idx", definition: "CREATE UNIQUE INDEX a_idx ON public.a USING btree (note)" }] })],
      [
        { schema: "public", name: "state", labels: ["new", "open", "shipped", "paid"] },
        { schema: "public", name: "mood", labels: ["glad"] }
      ]
    )
    expect(schemaDiff(from, to).map((c) => [c.kind, c.name, c.sql])).toEqual([
      ["add_enum_value", "state", `alter type "public"."state" add value 'new' before 'open';`],
      ["add_enum_value", "state", `alter type "public"."state" add value 'shipped' after 'open';`],
      ["replace_enum", "mood", `drop type "public"."mood"; create type "public"."mood" as enum ('glad');`],
      ["drop_index", "a_idx", 'drop index "public"."a_idx";'],
      ["drop_constraint", "a_pkey", 'alter table "public"."a" drop constraint "a_pkey";'],
      ["add_constraint", "a_pkey", 'alter table "public"."a" add constraint "a_pkey" PRIMARY KEY (id, note);'],
      ["create_index", "a_idx", "CREATE UNIQUE INDEX a_idx ON public.a USING btree (note);"]
    ])
  })
})
