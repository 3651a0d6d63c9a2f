import type { Config } from "../catalog/catalog.ts";
import { parsePostgresUrl } from "../store/postgres/parse-postgres-url.ts";

/**
 * The line a CLI command prints on stderr when `TOLLGATE_DATABASE_URL` replaces the `database:`
 * of its config file (SPEC §2: the environment wins), else `undefined`: a variable left exported
 * in a shell would otherwise have `accounts credit ... --config prod.yaml` act on another store
 * without a word. `serve` logs the same fact as a warning (serve-command.ts). The database is
 * shown without its password; stdout stays the command's own, for scripts that read it.
 */
export function describeDatabaseOverride(config: Config): string | undefined {
  // "TOLLGATE_DATABASE_URL replaces database" (read-config.ts), set only where the two differ.
  const replaced = config.replacedByEnvironment?.some((each) => each.startsWith("TOLLGATE_DATABASE_URL "));
  if (replaced !== true || config.source === undefined) return undefined;
  return `TOLLGATE_DATABASE_URL replaces database in ${config.source} (the environment wins): acting on ${showDatabase(config.database)}, not on the config's database. Unset TOLLGATE_DATABASE_URL to use the config's.`;
}

/** The database URL as it may be shown: a PostgreSQL URL without its password and parameters. */
function showDatabase(database: string): string {
  if (database.startsWith("sqlite:")) return database;
  try {
    return parsePostgresUrl(database).redacted;
  } catch {
    return "the database it names";
  }
}
