import { existsSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { loadConfig } from "../catalog/load-config.ts";
import { chargeJournalPath } from "../store/open-store.ts";
import { locateDatabase } from "../store/sqlite/locate-sqlite-file.ts";
import { describeLedgerSummary } from "../store/sqlite/read-ledger-summary.ts";
import { CliError, type OutputSink } from "./cli-error.ts";
import { describeDatabaseOverride } from "./describe-database-override.ts";
import { isHelpRequested, parseCommandArguments } from "./parse-command-arguments.ts";

const USAGE = "tollgate restore FILE";

const HELP = `Usage: ${USAGE}

Replaces the SQLite database's contents with the backup FILE (made by \`tollgate backup\`), while
no server runs on it, in one transaction: a failure midway changes nothing. The contents it
replaces are kept beside it as <database>.before-restore-<time>: restore that file the same way to
undo. A tollgate command that writes meanwhile waits for the restore, then writes to the restored
database. The next server releases the reservations the backup holds (requests that were in
flight when it was taken). Never copy a file over the database instead: SQLite would apply the
old database's -wal file to it.
For a PostgreSQL database use pg_restore into a new, empty database.`;

/** Answers `tollgate restore --help`; it needs no config, so the CLI calls it first. */
export function writeRestoreHelp(argv: readonly string[], out: OutputSink): boolean {
  if (argv[0] !== "help" && !isHelpRequested(argv, USAGE)) return false;
  out.write(HELP);
  return true;
}

/**
 * `tollgate restore FILE`: replaces the configured SQLite database with the backup FILE through
 * SQLite (restore-sqlite-file.ts), keeping the old one aside, and says what it did. Refuses while
 * a server serves the database, a FILE that is not a sound Tollgate database, or one that a newer
 * Tollgate made; and PostgreSQL and in-memory databases.
 *
 * `<database>.pending-charges.jsonl` is left where it is: it holds charges the previous server
 * owed, which the next start records; recording is idempotent (a usage row is written once per
 * reservation), so a charge the backup already holds is not recorded twice.
 */
export async function runRestoreCommand(
  argv: readonly string[],
  configFile: string | undefined,
  out: OutputSink,
): Promise<void> {
  if (writeRestoreHelp(argv, out)) return;
  const { positionals } = parseCommandArguments(argv, { options: {}, positionals: 1, usage: USAGE });
  const backupFile = path.resolve(positionals[0]!);
  // The database first: a PostgreSQL one is refused whatever the file (restore is SQLite's).
  const config = await loadConfig({ file: configFile, purpose: "command" });
  const override = describeDatabaseOverride(config);
  if (override !== undefined) process.stderr.write(`tollgate: ${override}\n`);
  const location = locateDatabase(config.database);
  if (location.kind === "postgres") {
    throw new CliError(
      "The database is PostgreSQL: restore a pg_dump with pg_restore into a new, empty database (e.g. createdb tollgate_restored; pg_restore --dbname=NEW_DATABASE_URL tollgate.dump), then point the database setting at it.",
    );
  }
  if (location.kind === "sqlite-memory") {
    throw new CliError(
      "The database is in memory (sqlite::memory:): there is no file to restore into. Point the database setting at a file.",
    );
  }
  if (!existsSync(backupFile)) throw new CliError(`${backupFile} does not exist.`);
  // Before anything opens it: a named pipe would hold the open until a writer came (for ever),
  // and a folder or a device only failed later with SQLite's words for it.
  const stats = statSync(backupFile);
  if (stats.isDirectory())
    throw new CliError(
      `${backupFile} is a folder: give the backup file itself (tollgate backup FOLDER/ names its files for the database and the time, such as tollgate-20250601T120000Z.db).`,
    );
  if (!stats.isFile())
    throw new CliError(
      `${backupFile} is not a regular file (a named pipe, a device or a socket): give the backup file that tollgate backup wrote.`,
    );
  const { file } = location;
  if (realpathSync(backupFile) === file) throw new CliError(`${backupFile} is the database itself.`);
  const [{ restoreSqliteFile }, { SqliteFileClaimedError }] = await Promise.all([
    import("../store/sqlite/restore-sqlite-file.ts"),
    import("../store/sqlite/claim-sqlite-file.ts"),
  ]);
  let restored: Awaited<ReturnType<typeof restoreSqliteFile>>;
  try {
    restored = await restoreSqliteFile(backupFile, file);
  } catch (error) {
    // The claim's message (claim-sqlite-file.ts) is about a second server; here the fix differs.
    if (error instanceof SqliteFileClaimedError && error.holderRestores) {
      throw new CliError(
        `Another tollgate restore (process ${error.holderPid}) is restoring ${file}: wait for it to finish. Nothing was changed.`,
        { cause: error },
      );
    }
    if (error instanceof SqliteFileClaimedError) {
      const holder = error.holderPid === undefined ? "it" : `process ${error.holderPid}`;
      throw new CliError(
        `A Tollgate server is serving ${file} (${holder} holds ${file}.server.lock): stop it, then restore. Nothing was changed.`,
        { cause: error },
      );
    }
    throw error;
  }
  const { summary, keptAs, keptAsIs } = restored;
  out.write(`restored ${file} from ${backupFile}: ${describeLedgerSummary(summary)}`);
  if (keptAs !== undefined) {
    out.write(
      keptAsIs
        ? `The database it replaced could not be read; its files were moved to ${keptAs} as they were.`
        : `The database it replaced is kept as ${keptAs}: restore that file to undo.`,
    );
  }
  if (summary.openReservations > 0) {
    out.write(
      "The open reservations are those of requests in flight when the backup was taken: the next server releases them when it starts.",
    );
  }
  if (summary.schema === "behind") {
    out.write("The backup was made by an older Tollgate: the next `tollgate serve` migrates it.");
  }
  // Named as the server names it: beside the configured name, which may be a link to `file`.
  const journal = chargeJournalPath(config.database);
  if (journal !== undefined && existsSync(journal)) {
    out.write(
      `${journal} holds charges the previous server owed and was left in place: the next start records those the database does not hold yet.`,
    );
  }
}
