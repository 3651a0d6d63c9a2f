import { closeSync, openSync, rmSync, statSync } from "node:fs";
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
  bytes: number;
  summary: LedgerSummary;
}

/**
 * Writes a consistent copy of the SQLite database `source` to `destination`, which must not
 * exist (it is created exclusively: a file that appeared meanwhile is not overwritten), while a
 * server may be serving from `source`. The copy goes through SQLite (its online backup), so it
 * holds every committed transaction, those still in the source's WAL included; a file copy
 * (`cp`) of a live database misses them, or copies a torn page.
 *
 * The copy is then switched to a rollback journal: one self-contained file, which can be moved
 * or copied as it is, and which opens without `-wal`/`-shm` files appearing beside it. A server
 * started on it (after `tollgate restore`) turns WAL back on. It is checked (quick_check, a
 * Tollgate schema) and counted; a copy that fails is removed, and the error says why.
 */
export async function backUpSqliteFile(source: string, destination: string): Promise<SqliteBackup> {
  await copySqliteFile(source, destination);
  try {
    const copy = new DatabaseSync(destination, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      return { bytes: statSync(destination).size, summary: readLedgerSummary(copy, source) };
    } finally {
      copy.close();
    }
  } catch (error) {
    removeWithSideFiles(destination);
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
 * (created exclusively: one that appeared meanwhile is not overwritten), through SQLite's online
 * backup in one step, and switches the copy to a rollback journal: one self-contained file. A
 * copy that fails is removed.
 */
export async function copySqliteFile(source: string, destination: string): Promise<void> {
  // Before the source is opened: read-only, so the copy can never write to the source.
  closeSync(openSync(destination, "wx"));
  try {
    const from = new DatabaseSync(source, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      await backup(from, destination, { rate: ALL_PAGES_IN_ONE_STEP });
    } finally {
      from.close();
    }
    const copy = new DatabaseSync(destination, { timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      copy.exec("PRAGMA journal_mode = DELETE");
    } finally {
      copy.close();
    }
  } catch (error) {
    removeWithSideFiles(destination);
    throw error;
  }
}
