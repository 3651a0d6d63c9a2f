import { accessSync, constants, type Stats, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** SQLite's primary result codes that {@link explainSqliteError} explains. */
const SQLITE_BUSY = 5;
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

/** The setting that moves the database elsewhere, as every message names it. */
const DATABASE_SETTING = "the database setting (database: in the config, or TOLLGATE_DATABASE_URL)";

/**
 * A SQLite error about the database file (locked by another process, not a database, cannot be
 * opened or written), with a message that names the file and says what to do. It keeps
 * node:sqlite's `code` (`ERR_SQLITE_ERROR`) and `errcode`, so whatever tells a store outage
 * from a bug (a lock is one: the API answers 503 `store_unavailable`) reads it as before; the
 * original error is its `cause`.
 */
export class SqliteFileError extends Error {
  readonly code = "ERR_SQLITE_ERROR";
  /** SQLite's (extended) result code. */
  readonly errcode: number;

  constructor(message: string, errcode: number, cause: unknown) {
    super(message, { cause });
    this.name = "SqliteFileError";
    this.errcode = errcode;
  }
}

/** SQLite's result code of a node:sqlite error, or `undefined` for any other error. */
function resultCodeOf(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const fields = error as Error & { code?: unknown; errcode?: unknown };
  if (fields.code !== "ERR_SQLITE_ERROR" || typeof fields.errcode !== "number") return undefined;
  return fields.errcode;
}

/**
 * True when another connection held the lock a statement needed past the busy timeout
 * (SQLITE_BUSY and its extended codes): the database is fine, only busy now.
 */
export function isSqliteBusy(error: unknown): boolean {
  const code = resultCodeOf(error);
  return code !== undefined && (code & 0xff) === SQLITE_BUSY;
}

/** True when SQLite found the file damaged (SQLITE_CORRUPT) or no database (SQLITE_NOTADB). */
export function isSqliteDamaged(error: unknown): boolean {
  const code = resultCodeOf(error);
  return code !== undefined && ((code & 0xff) === SQLITE_CORRUPT || (code & 0xff) === SQLITE_NOTADB);
}

/**
 * True when SQLite could not write because of where the file lives, not because of a bug: the
 * file locked by another process ({@link isSqliteBusy}), its disk full, an I/O error, the file or
 * its folder made read-only or unopenable. Writes may succeed again once that is fixed; meanwhile
 * requests are refused with 503 `store_unavailable`, as when a PostgreSQL store cannot be reached.
 */
export function isSqliteUnavailable(error: unknown): boolean {
  const code = resultCodeOf(error);
  if (code === undefined) return false;
  const primary = code & 0xff;
  return (
    primary === SQLITE_BUSY ||
    primary === SQLITE_READONLY ||
    primary === SQLITE_IOERR ||
    primary === SQLITE_FULL ||
    primary === SQLITE_CANTOPEN
  );
}

/**
 * The error to throw for a SQLite error on the file at `location`: a {@link SqliteFileError}
 * with the file's name and the fix when the file is the problem, else `error` itself.
 */
export function explainSqliteError(error: unknown, location: string, busyTimeout: number): unknown {
  const code = resultCodeOf(error);
  if (code === undefined || error instanceof SqliteFileError) return error;
  switch (code & 0xff) {
    case SQLITE_BUSY:
      return new SqliteFileError(
        `The database ${location} is locked by another process (waited ${busyTimeout} ms): another command's write, a VACUUM or an open sqlite3 session with a transaction holds it. Retry once it has finished.`,
        code,
        error,
      );
    case SQLITE_CORRUPT:
      return new SqliteFileError(
        `The database ${location} is damaged (SQLite says: ${(error as Error).message}). ${describeDamageRemedy(location)}`,
        code,
        error,
      );
    case SQLITE_NOTADB:
      return new SqliteFileError(
        `${location} is not a SQLite database Tollgate can read (SQLite says: ${(error as Error).message}). Point the database setting (database: in the config, or TOLLGATE_DATABASE_URL) at the right file, or move this one away and Tollgate creates a new database there.`,
        code,
        error,
      );
    case SQLITE_CANTOPEN:
      return new SqliteFileError(cannotOpenMessage(location), code, error);
    case SQLITE_FULL:
      return new SqliteFileError(
        `Cannot write the database ${location}: its disk is full (SQLite says: ${(error as Error).message}). Free space on that disk; until a write succeeds, requests that would need one are refused with 503.`,
        code,
        error,
      );
    case SQLITE_IOERR:
      return new SqliteFileError(
        `Cannot read or write the database ${location}: the disk reported an I/O error (SQLite says: ${(error as Error).message}). Check the disk (dmesg), and the file's -wal and -shm files beside it; until a write succeeds, requests that would need one are refused with 503.`,
        code,
        error,
      );
    case SQLITE_READONLY:
      return new SqliteFileError(
        unwritableFolderMessage(location) ??
          `Cannot write the database ${location} (${(error as Error).message}): check that ${runningUser()} may write the file, its folder and the -wal and -shm files beside it.`,
        code,
        error,
      );
    default:
      return error;
  }
}

/** What to do about a damaged database at `location`. */
export function describeDamageRemedy(location: string): string {
  return `Stop what uses it and restore it from a backup, or rescue what it holds with \`sqlite3 ${location} .recover\`.`;
}

function cannotOpenMessage(location: string): string {
  if (isFolder(location)) {
    return `Cannot open the database ${location}: it is a folder. Name a file in it in the database setting, e.g. sqlite:${path.join(location, "tollgate.db")}.`;
  }
  return (
    unwritableFolderMessage(location) ??
    `Cannot open the database ${location}: check that its folder exists and that ${runningUser()} may read and write the file and its folder.`
  );
}

/**
 * The message for a database whose folder exists but cannot be written, else `undefined`. A
 * database file that may be written is not enough: SQLite creates its -wal and -shm files beside
 * it, and the server its lock file (claim-sqlite-file.ts).
 */
function unwritableFolderMessage(location: string): string | undefined {
  const folder = path.dirname(path.resolve(location));
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EROFS") {
      return `Cannot write the database folder ${folder}: it is on a read-only file system. Point ${DATABASE_SETTING} at a file on a writable one.`;
    }
    if (code !== "EACCES" && code !== "EPERM") return undefined;
    return `Cannot write the database folder ${folder}: Tollgate runs as ${runningUser()}, who may not create files in it (SQLite keeps -wal and -shm files, and the server its lock file, beside the database). Make the folder writable by that user (${chownExample(folder)}), or point ${DATABASE_SETTING} at a file in a folder that user may write.`;
  }
}

/**
 * The error to throw when the folder of the database file `file` could not be created
 * (`mkdirSync`'s error): a message that names the folder, what is in the way and the fix when
 * the file system refused, else `error` itself.
 */
export function explainDatabaseFolderError(error: unknown, file: string): unknown {
  const folder = path.dirname(path.resolve(file));
  const fields = error as NodeJS.ErrnoException;
  switch (fields?.code) {
    case "EEXIST":
    case "ENOTDIR": {
      const blocker = firstFileAlong(folder);
      if (blocker === undefined) return error;
      return new Error(
        `Cannot create the database folder ${folder}: ${blocker === folder ? "it" : blocker} is a file, not a folder. Move that file away, or point ${DATABASE_SETTING} at a file in another folder.`,
        { cause: error },
      );
    }
    case "EACCES":
    case "EPERM": {
      // mkdir names the first folder it could not make; the one to fix is the folder it is in.
      const parent = path.dirname(fields.path ?? folder);
      return new Error(
        `Cannot create the database folder ${folder}: Tollgate runs as ${runningUser()}, who may not create folders in ${parent}. Create ${folder} and make it writable by that user (${chownExample(folder)}), or point ${DATABASE_SETTING} at a file in a folder that user may write.`,
        { cause: error },
      );
    }
    case "ENOENT": {
      // Its parent exists (makeFolderSync makes them in turn) but takes no folders in it.
      const parent = path.dirname(fields.path ?? folder);
      return new Error(
        `Cannot create the database folder ${folder}: ${parent} takes no folders in it (as /dev/fd and /proc hold a process's open files). Point ${DATABASE_SETTING} at a file in a folder that can be written.`,
        { cause: error },
      );
    }
    case "EROFS":
      return new Error(
        `Cannot create the database folder ${folder}: it is on a read-only file system. Point ${DATABASE_SETTING} at a file on a writable one.`,
        { cause: error },
      );
    default:
      return error;
  }
}

/** The first path from the root down to `folder` that exists and is no folder, if any. */
function firstFileAlong(folder: string): string | undefined {
  const { root } = path.parse(folder);
  let current = root;
  for (const part of folder.slice(root.length).split(path.sep)) {
    current = path.join(current, part);
    let found: Stats | undefined;
    try {
      found = statSync(current, { throwIfNoEntry: false });
    } catch {
      // A folder this user may not look into: what it holds stays unknown.
      return undefined;
    }
    if (found === undefined) return undefined;
    if (!found.isDirectory()) return current;
  }
  return undefined;
}

function chownExample(folder: string): string {
  const uid = process.getuid?.();
  return uid === undefined ? "in its properties" : `e.g. chown ${uid} ${folder}`;
}

/**
 * The user this process runs as, by name and uid: in a container (the image runs as `node`) that
 * is rarely the owner of a mounted folder, so the message says whom to give it to.
 */
function runningUser(): string {
  const uid = process.getuid?.();
  let name: string | undefined;
  try {
    name = os.userInfo().username;
  } catch {
    // A uid with no entry in /etc/passwd (docker run --user 1234) has no name.
    name = undefined;
  }
  if (uid === undefined) return `the user ${name ?? "of this process"}`;
  return name === undefined ? `the user with uid ${uid}` : `the user ${name} (uid ${uid})`;
}

function isFolder(location: string): boolean {
  try {
    return statSync(location).isDirectory();
  } catch {
    return false;
  }
}
