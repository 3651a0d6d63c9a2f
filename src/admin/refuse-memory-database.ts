import { parseSqliteLocation } from "../store/open-store.ts";
import { CliError } from "./cli-error.ts";

/**
 * Whether the (resolved) database URL names an in-memory SQLite database (`sqlite::memory:`,
 * `sqlite://:memory:`): one that lives and ends with the process that opened it, so that no other
 * process (a CLI command, a restarted server) ever sees what it holds.
 */
export function isMemoryDatabase(databaseUrl: string): boolean {
  if (!databaseUrl.startsWith("sqlite:")) return false;
  try {
    return parseSqliteLocation(databaseUrl) === ":memory:";
  } catch {
    return false;
  }
}

/**
 * Throws a {@link CliError} when a store command (`accounts`, `keys`, `usage`, `audit`) would run
 * on an in-memory database: it would act on an empty ledger of its own, say "Created account m1"
 * with exit 0, and lose it as it exits; no server's ledger is ever reached that way. Asked before
 * the store is opened.
 */
export function refuseMemoryDatabase(databaseUrl: string, command: string): void {
  if (!isMemoryDatabase(databaseUrl)) return;
  throw new CliError(
    `The database is in memory (sqlite::memory:): it lives and ends with one process, so \`${command}\` would work on an empty ledger of its own that is gone when it exits, not on a server's. Point the database setting (or TOLLGATE_DATABASE_URL) at the server's database, such as sqlite:./data/tollgate.db.`,
  );
}
