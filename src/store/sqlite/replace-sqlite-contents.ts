import type { DatabaseSync } from "node:sqlite";

/**
 * Replaces the schema and rows of `db`'s main database with those of the database attached to it
 * as `from`, inside the transaction the caller holds open on `db` (so that a failure rolls back to
 * the contents as they were, and no other connection commits in between: see
 * restore-sqlite-file.ts). Foreign keys must be off on `db` (a pragma SQLite ignores inside a
 * transaction): tables are dropped and filled in any order.
 *
 * SQL, not pages: the file stays the one other processes have open, in its journal mode, and
 * only what SQLite writes through this transaction changes. Every table and view of main goes
 * (their indexes and triggers with them); `from`'s tables are created in the order they were
 * made and filled, then its indexes, triggers and views (after the rows: indexes are built once,
 * and no trigger fires on the copy). SQLite's own tables follow: `sqlite_sequence` (where each
 * AUTOINCREMENT table goes on counting) and `sqlite_stat1` (the statistics `PRAGMA optimize`
 * keeps), and the `user_version` and `application_id` numbers of the header.
 */
export function replaceSqliteContents(db: DatabaseSync, from: string): void {
  const source = quote(from);
  const dropped = db
    .prepare(
      `SELECT type, name FROM main.sqlite_schema WHERE type IN ('table', 'view') AND ${NOT_INTERNAL} ORDER BY type = 'table'`,
    )
    .all();
  for (const { type, name } of dropped) {
    db.exec(`DROP ${type === "view" ? "VIEW" : "TABLE"} main.${quote(String(name))}`);
  }
  // The autoindexes of UNIQUE and PRIMARY KEY constraints have no SQL: their tables make them.
  const objects = db
    .prepare(
      `SELECT type, name, sql FROM ${source}.sqlite_schema WHERE sql IS NOT NULL AND ${NOT_INTERNAL} ORDER BY rowid`,
    )
    .all()
    .map((row) => ({ type: String(row.type), name: String(row.name), sql: String(row.sql) }));
  // Unqualified, as SQLite keeps them: each is created in main, on main's tables.
  for (const table of objects.filter((object) => object.type === "table")) {
    db.exec(table.sql);
    db.exec(`INSERT INTO main.${quote(table.name)} SELECT * FROM ${source}.${quote(table.name)}`);
  }
  for (const object of objects.filter((object) => object.type !== "table")) db.exec(object.sql);
  // Dropping a table took its rows out of both; main has them once its tables need them.
  for (const internal of ["sqlite_sequence", "sqlite_stat1"]) {
    if (hasTable(db, "main", internal) && hasTable(db, from, internal)) {
      db.exec(`DELETE FROM main.${internal}`);
      db.exec(`INSERT INTO main.${internal} SELECT * FROM ${source}.${internal}`);
    }
  }
  for (const pragma of ["user_version", "application_id"]) {
    const value = Number(Object.values(db.prepare(`PRAGMA ${source}.${pragma}`).get() ?? {})[0] ?? 0);
    db.exec(`PRAGMA main.${pragma} = ${Math.trunc(value)}`);
  }
  const broken = db.prepare("PRAGMA main.foreign_key_check").all();
  if (broken.length > 0) {
    const first = broken[0]!;
    throw new Error(
      `its rows break ${broken.length} foreign key${broken.length === 1 ? "" : "s"} (the first: a row of ${String(first.table)} names a missing row of ${String(first.parent)}).`,
    );
  }
}

/** SQLite's own objects, which a database makes for itself (and refuses to have dropped or made). */
const NOT_INTERNAL = "name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";

function hasTable(db: DatabaseSync, schema: string, table: string): boolean {
  return (
    db
      .prepare(`SELECT 1 FROM ${quote(schema)}.sqlite_schema WHERE type = 'table' AND name = ?`)
      .get(table) !== undefined
  );
}

/** An SQL identifier in double quotes, whatever it holds. */
function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
