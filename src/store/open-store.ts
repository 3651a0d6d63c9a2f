import { openSqliteStore } from "./sqlite/open-sqlite-store.ts";
import type { Store } from "./store.ts";

/**
 * Opens the store that `databaseUrl` names and migrates it to the latest schema, creating it
 * when it does not exist yet (so every CLI command works before the first `serve`).
 *
 * - `sqlite:PATH`: a SQLite file; a relative PATH is relative to the working directory, and
 *   `sqlite:///abs/path` is accepted for `/abs/path`. `sqlite::memory:` is an in-memory store.
 * - `postgres://...` / `postgresql://...`: not supported yet (a later issue).
 */
export async function openStore(databaseUrl: string): Promise<Store> {
  if (databaseUrl.startsWith("sqlite:")) return await openSqliteStore(parseSqliteLocation(databaseUrl));
  if (databaseUrl.startsWith("postgres://") || databaseUrl.startsWith("postgresql://")) {
    throw new Error(
      "PostgreSQL stores are not supported yet. Use a SQLite store for now, e.g. `database: sqlite:./data/tollgate.db` or TOLLGATE_DATABASE_URL=sqlite:./data/tollgate.db.",
    );
  }
  throw new Error(
    `The database URL "${describeScheme(databaseUrl)}" is not one Tollgate knows. Use sqlite:PATH (e.g. sqlite:./data/tollgate.db).`,
  );
}

function parseSqliteLocation(databaseUrl: string): string {
  let location = databaseUrl.slice("sqlite:".length);
  if (location.startsWith("//")) location = location.slice(2);
  if (location === "") {
    throw new Error(
      "The database URL `sqlite:` names no file. Write sqlite:PATH, e.g. sqlite:./data/tollgate.db.",
    );
  }
  return location;
}

/** Only the scheme: the rest of a URL may hold a password. */
function describeScheme(databaseUrl: string): string {
  const colon = databaseUrl.indexOf(":");
  return colon === -1 ? "(no scheme)" : `${databaseUrl.slice(0, colon)}:...`;
}
