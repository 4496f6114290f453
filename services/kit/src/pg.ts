/**
 * Postgres text for statements that cannot take parameters (DDL, names, CREATE ROLE): an
 * identifier always quoted (names are used exactly as the catalog has them) and a string literal.
 */
export const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/** A standard-conforming string literal: single quotes doubled, backslashes as they are. */
export const quoteLiteral = (value: string) => `'${value.replaceAll("'", "''")}'`
