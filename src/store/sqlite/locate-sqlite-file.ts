import { parseSqliteLocation } from "../open-store.ts";
import { resolveSqliteFile } from "./open-sqlite-store.ts";

/** What a database URL names, for the commands that handle SQLite files themselves (backup, restore). */
export type DatabaseLocation =
  | { kind: "sqlite-file"; file: string }
  | { kind: "sqlite-memory" }
  | { kind: "postgres" };

/**
 * Where the database of a (resolved: see catalog/resolve-database-url.ts) `databaseUrl` lives.
 * A SQLite file is named as the server names it when it claims the file (its folders created,
 * links followed: see {@link resolveSqliteFile}), so that a claim taken here is the one a server
 * would take. The URL itself is never repeated: it may hold a password.
 */
export function locateDatabase(databaseUrl: string): DatabaseLocation {
  if (databaseUrl.startsWith("postgres://") || databaseUrl.startsWith("postgresql://")) {
    return { kind: "postgres" };
  }
  if (!databaseUrl.startsWith("sqlite:")) {
    throw new Error("The database setting names neither a SQLite file nor a PostgreSQL database.");
  }
  const location = parseSqliteLocation(databaseUrl);
  if (location === ":memory:") return { kind: "sqlite-memory" };
  return { kind: "sqlite-file", file: resolveSqliteFile(location) };
}
