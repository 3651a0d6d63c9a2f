import { closeSync, existsSync, linkSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { backup, DatabaseSync } from "node:sqlite";
import { DEFAULT_BUSY_TIMEOUT_MS } from "./node-sqlite-database.ts";
import { type LedgerSummary, readLedgerSummary } from "./read-ledger-summary.ts";

/**
 * Pages per step of node:sqlite's `backup()`: all of them, in one step. A step reads one
 * snapshot of the source; between steps, a write by another connection (a serving server's,
 * every few milliseconds) makes SQLite start the copy over, so a copy in steps of the default
 * 100 pages never ended beside a busy server (measured: 8,763 restarts in 15 s on a 200 MB file).
 * In one step the copy is one read transaction, which in WAL mode never blocks the server's
 * writes; it only keeps the server's checkpoints from copying WAL pages newer than the snapshot
 * until it ends, so the WAL grows meanwhile (a 200 MB file is copied in about 1.5 s). The step
 * runs on libuv's thread pool. Node's `rate` must be a positive int32; SQLite's own "all" (-1)
 * is refused.
 */
export const ALL_PAGES_IN_ONE_STEP = 2 ** 31 - 1;

/** What {@link backUpSqliteFile} wrote. */
export interface SqliteBackup {
  /** The name the copy took: `destination`, or one `orNext` gave. */
  file: string;
  bytes: number;
  summary: LedgerSummary;
}

/**
 * Writes a consistent copy of the SQLite database `source` to `destination`, which must not
 * exist (a file that appeared meanwhile is not overwritten), while a server may be serving from
 * `source`. The copy goes through SQLite (its online backup), so it holds every committed
 * transaction, those still in the source's WAL included; a file copy (`cp`) of a live database
 * misses them, or copies a torn page.
 *
 * The copy is then switched to a rollback journal: one self-contained file, which can be moved
 * or copied as it is, and which opens without `-wal`/`-shm` files appearing beside it. A server
 * started on it (after `tollgate restore`) turns WAL back on. It is checked (quick_check, a
 * Tollgate schema) and counted before it takes its name (see {@link copySqliteFile}); a copy that
 * fails is removed, and the error says why.
 *
 * With `orNext`, a `destination` taken (before the copy, or by another backup during it) is no
 * error: the copy takes the name `orNext` gives for the taken one, and so on.
 */
export async function backUpSqliteFile(
  source: string,
  destination: string,
  orNext?: (taken: string) => string,
): Promise<SqliteBackup> {
  const partial = await copyToPartialFile(source, destination, orNext === undefined);
  try {
    const copy = new DatabaseSync(partial, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    let summary: LedgerSummary;
    try {
      summary = readLedgerSummary(copy, source);
    } finally {
      copy.close();
    }
    const bytes = statSync(partial).size;
    for (let file = destination; ; file = (orNext as (taken: string) => string)(file)) {
      try {
        publishCopy(partial, file);
        return { file, bytes, summary };
      } catch (error) {
        if (orNext === undefined || (error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
    }
  } catch (error) {
    removeWithSideFiles(partial);
    throw error;
  }
}

/** The files SQLite keeps beside a database, which belong to it and go where it goes. */
export const SIDE_FILES = ["-wal", "-shm", "-journal"];

/** Removes a database file and the files SQLite keeps beside it. */
export function removeWithSideFiles(file: string): void {
  for (const suffix of ["", ...SIDE_FILES]) rmSync(`${file}${suffix}`, { force: true });
}

/**
 * Copies the SQLite database `source` (what its WAL holds included) to `destination`, a new file
 * (one that appeared meanwhile is not overwritten), through SQLite's online backup in one step,
 * and switches the copy to a rollback journal: one self-contained file.
 *
 * The copy is written as `<destination>.partial-<pid>` and takes its name only once whole: a
 * backup interrupted (Ctrl-C, a kill, a full disk) left a file under the backup's name, cut
 * short, that jobs which rotate or ship the newest backup took for one. A copy that fails is
 * removed; one interrupted leaves only its `.partial-` file.
 */
export async function copySqliteFile(source: string, destination: string): Promise<void> {
  const partial = await copyToPartialFile(source, destination);
  try {
    publishCopy(partial, destination);
  } catch (error) {
    removeWithSideFiles(partial);
    throw error;
  }
}

/** {@link copySqliteFile} up to its last step: answers the copy's file, not yet named `destination`. */
async function copyToPartialFile(source: string, destination: string, refuseTaken = true): Promise<string> {
  if (refuseTaken && existsSync(destination)) throw existsError(destination);
  const partial = `${destination}.partial-${process.pid}`;
  // Before the source is opened: read-only, so the copy can never write to the source. Readable by
  // its owner only: a backup (key hashes, balances) is often shipped elsewhere.
  closeSync(openSync(partial, "wx", 0o600));
  try {
    const from = new DatabaseSync(source, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      await backup(from, partial, { rate: ALL_PAGES_IN_ONE_STEP });
    } finally {
      from.close();
    }
    const copy = new DatabaseSync(partial, { timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      copy.exec("PRAGMA journal_mode = DELETE");
    } finally {
      copy.close();
    }
    return partial;
  } catch (error) {
    removeWithSideFiles(partial);
    throw error;
  }
}

/**
 * Gives the whole copy `partial` its name `destination`, never replacing a file: a hard link
 * fails where the name exists. On a file system without hard links, a rename after a last look.
 * Where it fails, `partial` is left for the caller to name otherwise or remove.
 */
function publishCopy(partial: string, destination: string): void {
  try {
    linkSync(partial, destination);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") {
      throw code === "EEXIST" ? existsError(destination) : error;
    }
    if (existsSync(destination)) throw existsError(destination);
    renameSync(partial, destination);
    return;
  }
  rmSync(partial, { force: true });
}

function existsError(file: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`EEXIST: file already exists, open '${file}'`), { code: "EEXIST" });
}
