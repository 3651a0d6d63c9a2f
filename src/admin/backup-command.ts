import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { loadConfig } from "../catalog/load-config.ts";
import { makeFolderSync } from "../files/make-folder.ts";
import { chargeJournalPath } from "../store/open-store.ts";
import {
  describeDamageRemedy,
  explainSqliteError,
  isSqliteDamaged,
} from "../store/sqlite/explain-sqlite-error.ts";
import { fileStamp } from "../store/sqlite/file-stamp.ts";
import { locateDatabase } from "../store/sqlite/locate-sqlite-file.ts";
import { DEFAULT_BUSY_TIMEOUT_MS } from "../store/sqlite/node-sqlite-database.ts";
import { describeLedgerSummary, LedgerDamageError } from "../store/sqlite/read-ledger-summary.ts";
import { CliError, type OutputSink } from "./cli-error.ts";
import { describeDatabaseOverride } from "./describe-database-override.ts";
import { isHelpRequested, parseCommandArguments } from "./parse-command-arguments.ts";

const USAGE = "tollgate backup FILE|FOLDER/";

const HELP = `Usage: ${USAGE}

Writes a consistent copy of the SQLite database to FILE, a new file, while a server may be
serving from the database; given a folder (an existing one, or any path ending in /, made if
missing), to a new file in it named for the database and the time, such as
tollgate-20250601T120000Z.db (-2, -3, ... added where that name is taken). The copy is one
self-contained file (no -wal beside it); put it back with \`tollgate restore FILE\`. Requests in
flight for a second or more at the time keep their reservations in the copy (a server holds a
newer one in memory): a server started on it releases them (\`tollgate audit\` on the copy
itself reports them). For a PostgreSQL database use pg_dump
instead.`;

/** Answers `tollgate backup --help`; it needs no config, so the CLI calls it first. */
export function writeBackupHelp(argv: readonly string[], out: OutputSink): boolean {
  if (argv[0] !== "help" && !isHelpRequested(argv, USAGE)) return false;
  out.write(HELP);
  return true;
}

/**
 * `tollgate backup FILE`: copies the configured SQLite database to FILE through SQLite's online
 * backup (back-up-sqlite-file.ts), and says what it wrote. Refuses a FILE that exists (a backup
 * never replaces another), a PostgreSQL database (pg_dump's work) and an in-memory one. A
 * FOLDER (existing, or written with a trailing slash, made if missing) gets a new file named
 * for the database and the time; an empty name is refused.
 *
 * A database that does not exist yet is created and migrated first, as by every command that
 * uses the store (SPEC §11), and the output says so: an empty copy is what there is to keep,
 * and a database setting that points at the wrong place shows here rather than in a restore.
 * A database an older Tollgate made is copied as it is, unmigrated: a backup is what an operator
 * takes before an upgrade.
 */
export async function runBackupCommand(
  argv: readonly string[],
  configFile: string | undefined,
  out: OutputSink,
): Promise<void> {
  if (writeBackupHelp(argv, out)) return;
  const { positionals } = parseCommandArguments(argv, { options: {}, positionals: 1, usage: USAGE });
  const target = positionals[0]!;
  // `backup ""` resolved to the working folder, and was refused as a file that "exists already".
  if (target === "") {
    throw new CliError(
      `Name the file to write the backup to: ${USAGE}, such as backups/tollgate-${fileStamp(new Date())}.db (or backups/ for a new file named for the time in that folder).`,
    );
  }
  // A folder: `backup bk/` wrote a FILE named bk where the folder did not exist.
  const folder = isFolderTarget(target) ? path.resolve(target) : undefined;
  if (folder === undefined) refuseExisting(path.resolve(target));
  const config = await loadConfig({ file: configFile, purpose: "command" });
  const override = describeDatabaseOverride(config);
  if (override !== undefined) process.stderr.write(`tollgate: ${override}\n`);
  const location = locateDatabase(config.database);
  if (location.kind === "postgres") {
    throw new CliError(
      "The database is PostgreSQL: back it up with pg_dump (e.g. pg_dump --format=custom --file=tollgate.dump DATABASE_URL; with ?schema=NAME in the URL, leave that out of it and add --schema=NAME, as pg_dump does not read it), which takes a consistent snapshot while replicas serve. Restore it with pg_restore into a new, empty database, then point the database setting at that one.",
    );
  }
  if (location.kind === "sqlite-memory") {
    throw new CliError(
      "The database is in memory (sqlite::memory:): it lives and ends with the server's process, and there is no file to back up.",
    );
  }
  const { file } = location;
  // Two backups into a folder within one second (the README's two examples, one after the
  // other) named the same file, and the second was refused: it takes the next free name, and
  // the next again where another backup takes that one meanwhile.
  const wanted = folder === undefined ? undefined : suggestName(path.join(folder, path.basename(file)));
  const destination = wanted === undefined ? path.resolve(target) : freeName(wanted);
  let created = false;
  if (!existsSync(file)) {
    const { openStore } = await import("../store/open-store.ts");
    await (await openStore(config.database, { upgrade: false })).close();
    created = true;
  }
  // As the README's `backup backups/tollgate-$(date ...).db` asks of a fresh checkout.
  try {
    makeFolderSync(path.dirname(destination));
  } catch (error) {
    throw new CliError(
      `Cannot make the folder ${path.dirname(destination)} for the backup (${(error as Error).message}); name a file in a folder that can be written.`,
      { cause: error },
    );
  }
  const { backUpSqliteFile } = await import("../store/sqlite/back-up-sqlite-file.ts");
  let backedUp: Awaited<ReturnType<typeof backUpSqliteFile>>;
  try {
    backedUp = await backUpSqliteFile(
      file,
      destination,
      wanted === undefined ? undefined : () => freeName(wanted),
    );
  } catch (error) {
    // The copy holds what the database holds: damage found in either is the database's, said as
    // the other commands say it (with `.recover`), not in SQLite's bare words.
    if (isSqliteDamaged(error)) throw explainSqliteError(error, file, DEFAULT_BUSY_TIMEOUT_MS);
    // Found by the check of the copy: what the database holds is damaged, and a copy of it would
    // restore the damage. The way on is the same.
    if (error instanceof LedgerDamageError) {
      throw new CliError(
        `The database ${error.message} No backup was written. ${describeDamageRemedy(file)}`,
        { cause: error },
      );
    }
    throw error;
  }
  const { bytes, summary } = backedUp;
  out.write(
    `backed up ${file} to ${backedUp.file} (${formatBytes(bytes)}): ${describeLedgerSummary(summary)}`,
  );
  if (summary.openReservations > 0) {
    out.write(
      "The open reservations are those of requests in flight (for a second or more) during the copy: a server started on it releases them.",
    );
  }
  // On stderr, as every command says it made a database: a cron job's log of errors shows it.
  if (created) {
    process.stderr.write(
      `tollgate: there was no database at ${file}: this command created it empty, as every command does, and backed up an empty ledger. Check the database setting if you expected one there.\n`,
    );
  }
  const journal = chargeJournalPath(config.database);
  if (journal !== undefined && existsSync(journal)) {
    out.write(
      `${journal} holds charges the store has not taken yet (it was locked, full or read-only): they are not in this copy. The server records them once it can write (or at its next start); take another backup after that.`,
    );
  }
}

/** A target that names a folder: one that ends in a slash, or an existing folder. */
function isFolderTarget(target: string): boolean {
  if (target.endsWith("/") || target.endsWith(path.sep)) return true;
  try {
    return statSync(target).isDirectory();
  } catch {
    return false;
  }
}

/** A backup never replaces a file (nor anything else). */
function refuseExisting(destination: string): void {
  if (existsSync(destination)) {
    throw new CliError(
      `${destination} exists already; a backup never replaces a file. Name a new one, such as ${freeName(suggestName(destination))}.`,
    );
  }
}

/** `name` where no file has it, else the first free of `name-2`, `name-3`, ... (before its extension). */
function freeName(name: string): string {
  if (!existsSync(name)) return name;
  const extension = path.extname(name);
  const base = name.slice(0, name.length - extension.length);
  for (let count = 2; ; count++) {
    const candidate = `${base}-${count}${extension}`;
    if (!existsSync(candidate)) return candidate;
  }
}

/** `backups/tollgate.db` -> `backups/tollgate-20250601T120000Z.db`. */
function suggestName(taken: string): string {
  const extension = path.extname(taken);
  const base = taken.slice(0, taken.length - extension.length);
  return `${base}-${fileStamp(new Date())}${extension || ".db"}`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}
