import { existsSync, renameSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { pathToFileURL } from "node:url";
import { copySqliteFile, removeWithSideFiles, SIDE_FILES } from "./back-up-sqlite-file.ts";
import { claimSqliteFile } from "./claim-sqlite-file.ts";
import { fileStamp } from "./file-stamp.ts";
import { createPrivateDatabaseFile, DEFAULT_BUSY_TIMEOUT_MS } from "./node-sqlite-database.ts";
import { type LedgerSummary, readLedgerSummary } from "./read-ledger-summary.ts";
import { replaceSqliteContents } from "./replace-sqlite-contents.ts";

/** What {@link restoreSqliteFile} did. */
export interface SqliteRestore {
  /** What the database holds now: the backup's contents. */
  summary: LedgerSummary;
  /** Where the database it replaced was kept; `undefined` when there was none. */
  keptAs: string | undefined;
  /** True when the old database could not be read, so its files were moved aside as they were. */
  keptAsIs: boolean;
}

/** The name the backup is attached under, on the connection that replaces the database. */
const RESTORED = "restored";

/**
 * Replaces the contents of the SQLite database `target` with those of the backup `backupFile`,
 * keeping the old ones as `<target>.before-restore-<stamp>`.
 *
 * The backup is checked before anything is touched (a sound Tollgate database of this version or
 * an older one: see read-ledger-summary.ts). The server's claim on `target` (claim-sqlite-file.ts)
 * is held throughout: a serving server makes this throw its error, and no server starts meanwhile.
 *
 * A CLI command (`tollgate accounts credit ...`) may write meanwhile, and no claim stops it. So one
 * connection does it all, holding SQLite's write lock from before the old contents are copied
 * aside until the new ones are committed: a command that writes before is in the copy kept
 * aside; one that waits for the lock writes to the restored database (it acted after the
 * restore); none commits in between, where its write would be in neither. A command that waits
 * longer than its busy timeout fails, and says so. Where another process holds the write lock
 * (an open sqlite3 session) past this connection's busy timeout, nothing is done, and the error
 * says who to stop.
 *
 * The new contents are written through SQL in that connection's transaction
 * (replace-sqlite-contents.ts), never by copying a file or pages over `target`: a crash, a full
 * disk or any error midway rolls back to the old contents, and the copy kept aside is removed
 * (the error says nothing was changed). A server killed (kill -9, out of memory) leaves
 * `<target>-wal` holding its last commits: a file copied over `target` would have SQLite apply
 * that WAL, which belongs to the old contents, onto the new ones at the next open. Opened by
 * SQLite instead, the old database is read with its WAL, so the copy kept aside (through
 * SQLite's online backup) holds those last commits too. A `target` SQLite cannot read (a file
 * damaged by such a copy) is kept aside by renaming it with its side files, and a new database is
 * made at its name; so is one where none was.
 */
export async function restoreSqliteFile(backupFile: string, target: string): Promise<SqliteRestore> {
  const source = new DatabaseSync(backupFile, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
  try {
    if (readLedgerSummary(source, backupFile).schema === "newer") {
      throw new Error(
        `${backupFile} was made by a newer version of Tollgate, which this one cannot serve: restore it with that version.`,
      );
    }
  } finally {
    source.close();
  }
  const releaseClaim = claimSqliteFile(target);
  let movedTo: string | undefined;
  try {
    let db: DatabaseSync | undefined;
    try {
      db = openTarget(target);
      if (db === undefined) {
        movedTo = moveAsIs(target);
        db = openTarget(target);
      }
      if (db === undefined) throw new Error(`${target} was replaced meanwhile by a file SQLite cannot read.`);
    } catch (error) {
      throw failure(error, target, movedTo);
    }
    try {
      const keptAs = await replaceFrom(db, backupFile, target, movedTo);
      return {
        summary: readLedgerSummary(db, target),
        keptAs: movedTo ?? keptAs,
        keptAsIs: movedTo !== undefined,
      };
    } finally {
      db.close();
    }
  } finally {
    releaseClaim();
  }
}

/**
 * Opens `target` (created when missing) for the replacement, in WAL mode as servers keep it (so
 * the copy kept aside reads while the replacement holds the write lock, and other commands read
 * meanwhile); `undefined` when SQLite cannot read it.
 */
function openTarget(target: string): DatabaseSync | undefined {
  // Read-only first: a read-write connection to a file that is no database deletes the `-wal`
  // beside it when it closes, and that file is to be kept as it was.
  if (existsSync(target)) {
    const probe = new DatabaseSync(target, { readOnly: true, timeout: DEFAULT_BUSY_TIMEOUT_MS });
    try {
      probe.prepare("SELECT count(*) FROM main.sqlite_schema").get();
    } catch (error) {
      if (isUnreadableDatabase(error)) return undefined;
      throw error;
    } finally {
      probe.close();
    }
  }
  createPrivateDatabaseFile(target);
  const db = new DatabaseSync(target, { timeout: DEFAULT_BUSY_TIMEOUT_MS });
  try {
    db.exec("PRAGMA main.journal_mode = WAL");
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * In one transaction on `db` (the database at `target`), holding the write lock from before the
 * copy aside to the commit: copies the old contents aside (unless there are none) and writes the
 * backup's in their place. Answers where the old contents were kept. On any failure the
 * transaction is rolled back and the copy removed.
 */
async function replaceFrom(
  db: DatabaseSync,
  backupFile: string,
  target: string,
  movedTo: string | undefined,
): Promise<string | undefined> {
  let keptAs: string | undefined;
  try {
    // Both before the transaction: SQLite refuses ATTACH in one, and ignores this pragma there.
    db.exec("PRAGMA foreign_keys = OFF");
    // Read-only: the backup is never written to, whatever happens here.
    db.prepare(`ATTACH DATABASE ? AS ${RESTORED}`).run(`${pathToFileURL(backupFile).href}?mode=ro`);
    db.exec("BEGIN IMMEDIATE");
    const holdsAnything = db.prepare("SELECT 1 FROM main.sqlite_schema LIMIT 1").get() !== undefined;
    if (holdsAnything && movedTo !== undefined) {
      throw new Error(
        `another process made a new database at ${target} once its unreadable files were moved.`,
      );
    }
    if (holdsAnything) keptAs = await keepCopyAside(target);
    replaceSqliteContents(db, RESTORED);
    db.exec("COMMIT");
  } catch (error) {
    // SQLite ends the transaction by itself after some errors (a full disk, I/O).
    if (db.isTransaction) {
      try {
        db.exec("ROLLBACK");
      } catch {
        // Closing the connection rolls back what is left.
      }
    }
    if (keptAs !== undefined) removeWithSideFiles(keptAs);
    throw failure(error, target, movedTo);
  }
  db.exec(`DETACH DATABASE ${RESTORED}`);
  compactIfMostlyFree(db);
  return keptAs;
}

/**
 * Gives the pages the old contents left free back to the file system, where they are most of it
 * (`VACUUM`, after the restore's commit: nothing of it depends on this). Regression: a small
 * backup restored over a large database left the file its old size, nearly all free pages, and
 * every later backup and `before-restore` copy that size too. A VACUUM that cannot run now (a
 * command writing, a disk too full for its copy) leaves the database as restored, whole.
 */
function compactIfMostlyFree(db: DatabaseSync): void {
  const count = (pragma: string) =>
    Number(Object.values(db.prepare(`PRAGMA main.${pragma}`).get() ?? {})[0] ?? 0);
  if (count("freelist_count") * 2 <= count("page_count")) return;
  try {
    db.exec("VACUUM main");
  } catch {
    // Restored all the same; only its size is what it was.
  }
}

/**
 * Copies the database at `target` to `<target>.before-restore-<stamp>` through SQLite's online
 * backup, with what its WAL holds, as one self-contained file (a rollback journal, like a
 * `tollgate backup`), which `tollgate restore` takes back to undo. Called while the caller's
 * connection holds the write lock: the reading connection, opened now, sees every commit, and
 * none can follow until the caller's.
 */
async function keepCopyAside(target: string): Promise<string> {
  const aside = asideName(target);
  await copySqliteFile(target, aside);
  return aside;
}

/**
 * `<target>.before-restore-<stamp>`, or with `-2`, `-3`, ... where a restore of the same second
 * kept one (a restore undone at once, as its message suggests, failed with a bare EEXIST).
 */
function asideName(target: string): string {
  const name = `${target}.before-restore-${fileStamp(new Date())}`;
  const taken = (candidate: string) =>
    existsSync(candidate) || SIDE_FILES.some((suffix) => existsSync(`${candidate}${suffix}`));
  if (!taken(name)) return name;
  for (let count = 2; ; count++) if (!taken(`${name}-${count}`)) return `${name}-${count}`;
}

/** Moves the files of a database SQLite cannot read to `<target>.before-restore-<stamp>`, as they are. */
function moveAsIs(target: string): string {
  const aside = asideName(target);
  // Each side file follows its database: SQLite finds `<aside>-wal` beside `<aside>`.
  renameSync(target, aside);
  for (const suffix of SIDE_FILES) {
    if (existsSync(`${target}${suffix}`)) renameSync(`${target}${suffix}`, `${aside}${suffix}`);
  }
  return aside;
}

/** The error of a restore that failed, saying why and what it left as it was. */
function failure(error: unknown, target: string, movedTo: string | undefined): Error {
  const outcome =
    movedTo === undefined
      ? "Nothing was changed."
      : `Its unreadable files were moved to ${movedTo}, as they were; nothing else was changed.`;
  const errcode = sqliteErrcode(error);
  if (errcode === SQLITE_BUSY || errcode === SQLITE_LOCKED) {
    return new Error(
      `Another process is writing to the database ${target} (an open sqlite3 session, a tollgate command): stop it, then restore. ${outcome}`,
      { cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  let reason = message.replace(/\.?$/, ".");
  if (errcode === SQLITE_FULL || code === "ENOSPC") reason = `the disk is full (${message}).`;
  // What node:sqlite's backup() says of a failure whose code it lost.
  else if (message === "not an error") reason = "SQLite's copy failed without saying why.";
  return new Error(`Could not restore ${target}: ${reason} ${outcome}`, { cause: error });
}

const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_FULL = 13;

/** SQLite's primary result code of a node:sqlite error; `undefined` for any other error. */
function sqliteErrcode(error: unknown): number | undefined {
  const errcode = (error as { errcode?: unknown }).errcode;
  return typeof errcode === "number" && errcode !== 0 ? errcode & 0xff : undefined;
}

/** SQLITE_CORRUPT or SQLITE_NOTADB: the file is not a database SQLite can read. */
function isUnreadableDatabase(error: unknown): boolean {
  const errcode = sqliteErrcode(error);
  return errcode === 11 || errcode === 26;
}
