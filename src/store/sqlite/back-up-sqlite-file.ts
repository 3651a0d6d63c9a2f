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
  // Before the source is opened: read-only, so the backup can never write to the live file.
  closeSync(openSync(destination, "wx"));
  try {
    const from = new DatabaseSync(source, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      await backup(from, destination, { rate: ALL_PAGES_IN_ONE_STEP });
    } finally {
      from.close();
    }
    const copy = new DatabaseSync(destination, { timeout: DEFAULT_BUSY_TIMEOUT_MS });
    let summary: LedgerSummary;
    try {
      copy.exec("PRAGMA journal_mode = DELETE");
      summary = readLedgerSummary(copy, source);
    } finally {
      copy.close();
    }
    return { bytes: statSync(destination).size, summary };
  } catch (error) {
    for (const suffix of ["", "-journal", "-wal", "-shm"]) rmSync(`${destination}${suffix}`, { force: true });
    throw error;
  }
}
