import { statSync } from "node:fs";
import path from "node:path";

/** SQLite's primary result codes that {@link explainSqliteError} explains. */
const SQLITE_BUSY = 5;
const SQLITE_READONLY = 8;
const SQLITE_CORRUPT = 11;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

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
        `The database ${location} is damaged (SQLite says: ${(error as Error).message}). Stop what uses it and restore it from a backup, or rescue what it holds with \`sqlite3 ${location} .recover\`.`,
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
      return new SqliteFileError(
        isFolder(location)
          ? `Cannot open the database ${location}: it is a folder. Name a file in it in the database setting, e.g. sqlite:${path.join(location, "tollgate.db")}.`
          : `Cannot open the database ${location}: check that its folder exists and that this user may read and write the file and its folder.`,
        code,
        error,
      );
    case SQLITE_READONLY:
      return new SqliteFileError(
        `Cannot write the database ${location} (${(error as Error).message}): check that this user may write the file, its folder and the -wal and -shm files beside it.`,
        code,
        error,
      );
    default:
      return error;
  }
}

function isFolder(location: string): boolean {
  try {
    return statSync(location).isDirectory();
  } catch {
    return false;
  }
}
