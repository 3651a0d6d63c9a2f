import { closeSync, existsSync, openSync, renameSync, rmSync } from "node:fs";
import { backup, DatabaseSync } from "node:sqlite";
import { ALL_PAGES_IN_ONE_STEP } from "./back-up-sqlite-file.ts";
import { claimSqliteFile } from "./claim-sqlite-file.ts";
import { fileStamp } from "./file-stamp.ts";
import { DEFAULT_BUSY_TIMEOUT_MS } from "./node-sqlite-database.ts";
import { type LedgerSummary, readLedgerSummary } from "./read-ledger-summary.ts";

/** What {@link restoreSqliteFile} did. */
export interface SqliteRestore {
  /** What the database holds now: the backup's contents. */
  summary: LedgerSummary;
  /** Where the database it replaced was kept; `undefined` when there was none. */
  keptAs: string | undefined;
  /** True when the old database could not be read, so its files were moved aside as they were. */
  keptAsIs: boolean;
}

/** The files SQLite keeps beside a database, which belong to it and go where it goes. */
const SIDE_FILES = ["-wal", "-shm", "-journal"];

/**
 * Replaces the SQLite database `target` with the contents of the backup `backupFile`, keeping
 * the old one as `<target>.before-restore-<stamp>`.
 *
 * The backup is checked before anything is touched (a sound Tollgate database of this version or
 * an older one: see read-ledger-summary.ts). The server's claim on `target` (claim-sqlite-file.ts) is held
 * throughout: a serving server makes this throw its error, and no server starts meanwhile.
 *
 * Both copies go through SQLite's online backup, never a file copy. A server killed (kill -9,
 * out of memory) leaves `<target>-wal` holding its last commits: a file copied over `target`
 * would have SQLite apply that WAL, which belongs to the old contents, onto the new ones at the
 * next open (a wrong ledger, or a damaged file). Written through SQLite instead, the old
 * database is read with its WAL (so the copy kept aside holds those last commits too) and the
 * backup's pages replace its contents in one transaction: a crash midway leaves the old
 * database whole, and the old WAL is spent, not replayed. A `target` SQLite cannot read (a file
 * damaged by such a copy) is kept aside by renaming it with its side files.
 */
export async function restoreSqliteFile(backupFile: string, target: string): Promise<SqliteRestore> {
  const source = new DatabaseSync(backupFile, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
  try {
    if (readLedgerSummary(source, backupFile).schema === "newer") {
      throw new Error(
        `${backupFile} was made by a newer version of Tollgate, which this one cannot serve: restore it with that version.`,
      );
    }
    const releaseClaim = claimSqliteFile(target);
    try {
      const keptAside = existsSync(target) ? await keepAside(target) : undefined;
      await backup(source, target, { rate: ALL_PAGES_IN_ONE_STEP });
      // Read-write, though it only reads: as the last connection to close, it removes the WAL.
      const restored = new DatabaseSync(target, { timeout: DEFAULT_BUSY_TIMEOUT_MS });
      try {
        return {
          summary: readLedgerSummary(restored, target),
          keptAs: keptAside?.path,
          keptAsIs: keptAside?.asIs ?? false,
        };
      } finally {
        restored.close();
      }
    } finally {
      releaseClaim();
    }
  } finally {
    source.close();
  }
}

/**
 * Keeps the database at `target` as `<target>.before-restore-<stamp>`: a copy through SQLite,
 * with what its WAL holds; or, where SQLite cannot read it, the files themselves, renamed.
 */
async function keepAside(target: string): Promise<{ path: string; asIs: boolean }> {
  const aside = `${target}.before-restore-${fileStamp(new Date())}`;
  closeSync(openSync(aside, "wx"));
  try {
    const old = new DatabaseSync(target, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      await backup(old, aside, { rate: ALL_PAGES_IN_ONE_STEP });
    } finally {
      old.close();
    }
    return { path: aside, asIs: false };
  } catch (error) {
    for (const suffix of ["", ...SIDE_FILES]) rmSync(`${aside}${suffix}`, { force: true });
    if (!isUnreadableDatabase(error)) throw error;
  }
  // Each side file follows its database: SQLite finds `<aside>-wal` beside `<aside>`.
  renameSync(target, aside);
  for (const suffix of SIDE_FILES) {
    if (existsSync(`${target}${suffix}`)) renameSync(`${target}${suffix}`, `${aside}${suffix}`);
  }
  return { path: aside, asIs: true };
}

/** SQLITE_CORRUPT or SQLITE_NOTADB: the file is not a database SQLite can read. */
function isUnreadableDatabase(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown }).errcode;
  return typeof errcode === "number" && ((errcode & 0xff) === 11 || (errcode & 0xff) === 26);
}
