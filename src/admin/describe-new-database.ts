import { existsSync } from "node:fs";
import path from "node:path";
import type { Config } from "../catalog/catalog.ts";
import { parseSqliteLocation } from "../store/open-store.ts";
import { parsePostgresUrl } from "../store/postgres/parse-postgres-url.ts";

/**
 * The SQLite file that opening `databaseUrl` would create, as an absolute path, when no file is
 * there yet; `undefined` for a file that exists, an in-memory store and PostgreSQL. Asked before
 * a CLI command opens its store, so that it can say afterwards that it made a new database.
 */
export function findMissingDatabaseFile(databaseUrl: string): string | undefined {
  if (!databaseUrl.startsWith("sqlite:")) return undefined;
  const location = parseSqliteLocation(databaseUrl);
  if (location === ":memory:") return undefined;
  const file = path.resolve(location);
  return existsSync(file) ? undefined : file;
}

/**
 * The line a CLI command prints on stderr when it created a new, empty SQLite database at `file`
 * (SPEC §11: every command creates the store it lacks, so that accounts and keys can be made
 * before the first `serve`). Run from another folder than the server's, without `--config`, a
 * command finds no `tollgate.yaml` and acts on a fresh `./data/tollgate.db` there: "No keys yet",
 * exit 0, unless it says so. stdout stays the command's own, for scripts that read it.
 */
export function describeNewDatabase(
  file: string,
  config: Pick<Config, "source" | "replacedByEnvironment">,
  env: NodeJS.ProcessEnv = process.env,
): string {
  return `created a new database at ${file} (no database was there). If you meant the server's database, ${nameDatabaseSetting(config, env)}.`;
}

/**
 * The line a CLI command prints on stderr when it created the store's tables in a PostgreSQL
 * schema that held none, as {@link describeNewDatabase} says it of a SQLite file: pointed at a
 * restored dump without the dump's `?schema=NAME` (or with a typo in it), a command made a new,
 * empty store and answered "No accounts yet", exit 0, without a word. Names the database without
 * its password.
 */
export function describeNewPostgresStore(
  databaseUrl: string,
  config: Pick<Config, "source" | "replacedByEnvironment">,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const { redacted, schema } = parsePostgresUrl(databaseUrl);
  const where =
    schema === undefined ? "the connection's default schema (no ?schema= in the URL)" : `schema ${schema}`;
  return `created a new, empty store in ${where} of ${redacted} (no Tollgate tables were there). If you meant the server's database, ${nameDatabaseSetting(config, env)}: a store's tables are in the schema its URL names with ?schema=NAME, a restored dump's in the one it was dumped from.`;
}

/** What to check when a command made a new store: the setting that chose the database. */
function nameDatabaseSetting(
  config: Pick<Config, "source" | "replacedByEnvironment">,
  env: NodeJS.ProcessEnv,
): string {
  return env.TOLLGATE_DATABASE_URL !== undefined && env.TOLLGATE_DATABASE_URL !== ""
    ? "check TOLLGATE_DATABASE_URL"
    : config.source === undefined
      ? "run the command from the server's folder or pass --config FILE (there is no tollgate.yaml here, so it used the default database)"
      : `check the database setting of ${config.source}`;
}
