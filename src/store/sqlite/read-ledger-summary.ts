import type { DatabaseSync } from "node:sqlite";
import { compareSchema, type SchemaState } from "../migrate-to-latest.ts";

/** What a Tollgate SQLite database holds, in the few figures backup and restore report. */
export interface LedgerSummary {
  accounts: number;
  usageRows: number;
  /** Reservations of requests that were in flight when the copy was taken. */
  openReservations: number;
  /** Its schema against this version (`behind`: the next `serve` migrates it). */
  schema: SchemaState;
}

/** How many of quick_check's problems a message quotes; it counts the rest. */
const PROBLEMS_QUOTED = 3;

/**
 * A database that SQLite's quick_check finds damaged. Its message quotes the first problems and
 * counts the rest: SQLite reports them as one row of many lines (55 for one damaged page), which
 * was quoted whole.
 */
export class LedgerDamageError extends Error {
  constructor(file: string, rows: readonly string[]) {
    // Less its heading (`*** in database main ***`), which names no problem.
    const problems = rows
      .flatMap((row) => row.split("\n"))
      .filter((line) => line.trim() !== "" && !line.startsWith("*** in database "));
    const quoted = problems.slice(0, PROBLEMS_QUOTED).join("; ");
    const more = problems.length - PROBLEMS_QUOTED;
    super(
      `${file} is damaged (SQLite's quick_check says: ${quoted}${more > 0 ? `; and ${more} more` : ""}).`,
    );
    this.name = "LedgerDamageError";
  }
}

/**
 * Checks that `db` is a sound Tollgate database (`PRAGMA quick_check`: every page and record
 * well formed, without the index-against-table comparison of a full integrity_check, which
 * takes several times longer) and counts what it holds. Throws, naming `file`, when it is
 * damaged or not Tollgate's.
 */
export function readLedgerSummary(db: DatabaseSync, file: string): LedgerSummary {
  let problems: string[];
  try {
    problems = db
      .prepare("PRAGMA quick_check")
      .all()
      .map((row) => String(row.quick_check));
  } catch (error) {
    // The first read of the file: where it is no database at all ("file is not a database").
    throw new Error(
      `${file} is not a SQLite database Tollgate can read (SQLite says: ${(error as Error).message}).`,
      {
        cause: error,
      },
    );
  }
  if (problems.length !== 1 || problems[0] !== "ok") throw new LedgerDamageError(file, problems);
  const migrationTable = db
    .prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'kysely_migration'")
    .get();
  if (migrationTable === undefined) {
    throw new Error(
      `${file} is a SQLite database, but not a Tollgate one (it has no kysely_migration table).`,
    );
  }
  const applied = db
    .prepare("SELECT name FROM kysely_migration ORDER BY name")
    .all()
    .map((row) => String(row.name));
  const schema = compareSchema(applied);
  if (schema === "new") {
    throw new Error(`${file} is a Tollgate database that was never set up: it holds nothing.`);
  }
  const count = (table: string) => Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0);
  return {
    accounts: count("accounts"),
    usageRows: count("usage"),
    openReservations: count("reservations"),
    schema,
  };
}

/** "3 accounts, 1 usage row, 0 open reservations" */
export function describeLedgerSummary(summary: LedgerSummary): string {
  const plural = (value: number, noun: string) => `${value} ${value === 1 ? noun : `${noun}s`}`;
  return [
    plural(summary.accounts, "account"),
    plural(summary.usageRows, "usage row"),
    plural(summary.openReservations, "open reservation"),
  ].join(", ");
}
