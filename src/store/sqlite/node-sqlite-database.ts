import { closeSync, openSync } from "node:fs";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { SqliteDatabase, SqliteStatement } from "kysely";
import { explainSqliteError } from "./explain-sqlite-error.ts";

/** Options of {@link openNodeSqliteDatabase}. */
export interface NodeSqliteDatabaseOptions {
  /**
   * Milliseconds a statement waits for a lock held by another process before failing. Default
   * {@link DEFAULT_BUSY_TIMEOUT_MS}. The wait blocks the thread (node:sqlite is synchronous).
   */
  busyTimeoutMilliseconds?: number;
  /** Prepared statements kept, keyed by SQL text; the oldest is dropped beyond this. Default 256. */
  statementCacheSize?: number;
}

/** How long a connection waits for another process's write lock unless told otherwise. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/**
 * The size a WAL file is cut back to when SQLite starts it over (`journal_size_limit`): without a
 * limit the file keeps the largest size it ever had.
 */
export const WAL_SIZE_LIMIT_BYTES = 32 * 2 ** 20;

/**
 * Creates the empty file of a new database readable by its owner only (mode 0600), where none is:
 * SQLite gives its -wal and -shm files the database's mode. Regression: a new database was made
 * readable by every user of the machine (key hashes, balances, users), while backups of it are
 * not. An existing file keeps its mode; a file that cannot be made here is left to SQLite, whose
 * error says why.
 */
export function createPrivateDatabaseFile(location: string): void {
  if (location === ":memory:" || location === "") return;
  try {
    closeSync(openSync(location, "wx", 0o600));
  } catch {
    // There already, or not to be made: SQLite opens it, or says why not.
  }
}

/**
 * Opens a SQLite file (or `:memory:`) with `node:sqlite` and wraps it in the better-sqlite3-like
 * shape that kysely's `SqliteDialect` drives.
 *
 * Settings: WAL journal (readers never block the writer, so the CLI and `serve` can share the
 * file), `synchronous = NORMAL` (the usual pairing with WAL: never corrupts; a power cut may lose
 * the last commits, where FULL would fsync on every commit and cost each request a disk flush),
 * a busy timeout, foreign keys on, and the WAL file cut back to {@link WAL_SIZE_LIMIT_BYTES} when it
 * starts over. Transactions start with `begin immediate` (see `prepare`).
 *
 * Every INTEGER is read as a `bigint` (`readBigInts`), so money in nano-units never passes
 * through a floating-point number; code that wants a `number` (rpm, tpm) converts explicitly.
 *
 * SQLite's errors about the file itself (locked by another process, not a database, cannot be
 * opened) are thrown as {@link SqliteFileError}s that name the file and the way out.
 */
export function openNodeSqliteDatabase(
  location: string,
  options: NodeSqliteDatabaseOptions = {},
): NodeSqliteDatabase {
  const busyTimeout = Math.trunc(options.busyTimeoutMilliseconds ?? DEFAULT_BUSY_TIMEOUT_MS);
  let database: DatabaseSync;
  try {
    createPrivateDatabaseFile(location);
    database = new DatabaseSync(location, {
      readBigInts: true,
      enableForeignKeyConstraints: true,
      timeout: busyTimeout,
    });
  } catch (error) {
    throw explainSqliteError(error, location, busyTimeout);
  }
  try {
    database.exec("PRAGMA journal_mode = WAL");
    database.exec("PRAGMA synchronous = NORMAL");
    database.exec(`PRAGMA busy_timeout = ${busyTimeout}`);
    database.exec("PRAGMA foreign_keys = ON");
    database.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  } catch (error) {
    database.close();
    throw explainSqliteError(error, location, busyTimeout);
  }
  return new NodeSqliteDatabase(database, {
    location,
    busyTimeout,
    cacheSize: options.statementCacheSize ?? 256,
  });
}

/**
 * The connection kysely drives, plus direct access for the few statements that the billing hot
 * path runs without kysely (`sqlite-billing-batch.ts`). Direct statements must only run while
 * kysely's connection lock is held (`db.connection().execute(...)`), so that they never land in
 * the middle of a transaction kysely has open.
 */
export class NodeSqliteDatabase implements SqliteDatabase {
  /** The file (or `:memory:`), as errors name it. */
  readonly location: string;
  readonly #database: DatabaseSync;
  readonly #statements = new Map<string, NodeSqliteStatement>();
  readonly #cacheSize: number;
  #busyTimeout: number;
  #resumeWrites: (() => void) | undefined;
  #writesResumed: Promise<void> | undefined;

  constructor(database: DatabaseSync, options: { location: string; busyTimeout: number; cacheSize: number }) {
    this.#database = database;
    this.location = options.location;
    this.#busyTimeout = options.busyTimeout;
    this.#cacheSize = options.cacheSize;
  }

  /** Milliseconds a statement waits for another process's lock before failing. */
  get busyTimeout(): number {
    return this.#busyTimeout;
  }

  /** Changes {@link busyTimeout} (the server's own connection waits far less than the CLI's). */
  setBusyTimeout(milliseconds: number): void {
    this.#busyTimeout = Math.trunc(milliseconds);
    this.#database.exec(`PRAGMA busy_timeout = ${this.#busyTimeout}`);
  }

  /** See {@link explainSqliteError}. */
  explain(error: unknown): unknown {
    return explainSqliteError(error, this.location, this.#busyTimeout);
  }

  prepare(sql: string): SqliteStatement {
    const cached = this.#statements.get(sql);
    if (cached !== undefined) return cached;
    // kysely opens transactions with a plain `begin`, which takes the write lock only at the
    // first write: a transaction that reads and then writes can then fail at once with
    // SQLITE_BUSY when another process (the CLI, another server) wrote in between, whatever the
    // busy timeout. `begin immediate` takes the lock up front and waits for it instead.
    const text = sql.trim().toLowerCase() === "begin" ? "begin immediate" : sql;
    let prepared: StatementSync;
    try {
      prepared = this.#database.prepare(text);
    } catch (error) {
      throw this.explain(error);
    }
    const statement = new NodeSqliteStatement(prepared, this, text.trim().toLowerCase() === "rollback");
    if (this.#statements.size >= this.#cacheSize) {
      // Maps iterate in insertion order: the first key is the oldest statement.
      const oldest = this.#statements.keys().next();
      if (oldest.done !== true) this.#statements.delete(oldest.value);
    }
    this.#statements.set(sql, statement);
    return statement;
  }

  /** A statement run directly with `node:sqlite` (not cached: the caller keeps it). */
  prepareDirect(sql: string): StatementSync {
    return this.#database.prepare(sql);
  }

  /** True while a transaction is open (SQLite ends one by itself after some errors). */
  get inTransaction(): boolean {
    return this.#database.isTransaction;
  }

  /**
   * SQLite's automatic checkpoint on this connection: on (every 1000 pages of WAL, its default)
   * or off, while a worker thread checkpoints instead (start-checkpointer.ts).
   */
  setAutomaticCheckpoint(automatic: boolean): void {
    if (this.#database.isOpen) this.#database.exec(`PRAGMA wal_autocheckpoint = ${automatic ? 1000 : 0}`);
  }

  /**
   * Holds the writes that wait for {@link writesResumed} (the billing batch's) for at most `ms`,
   * while the checkpoint worker copies the rest of the WAL (see start-checkpointer.ts); returns
   * the function that resumes them sooner. A second call while paused returns the same one.
   */
  pauseWrites(ms: number): () => void {
    if (this.#resumeWrites !== undefined) return this.#resumeWrites;
    const { promise, resolve } = Promise.withResolvers<void>();
    const resume = () => {
      clearTimeout(timer);
      if (this.#resumeWrites === resume) {
        this.#resumeWrites = undefined;
        this.#writesResumed = undefined;
      }
      resolve();
    };
    const timer = setTimeout(resume, ms);
    this.#resumeWrites = resume;
    this.#writesResumed = promise;
    return resume;
  }

  /** While writes are paused ({@link pauseWrites}), resolves when they may go on. */
  get writesResumed(): Promise<void> | undefined {
    return this.#writesResumed;
  }

  close(): void {
    this.#statements.clear();
    if (this.#database.isOpen) this.#database.close();
  }
}

class NodeSqliteStatement implements SqliteStatement {
  /** True when the statement returns rows: a SELECT, a PRAGMA that answers, or `... RETURNING`. */
  readonly reader: boolean;
  readonly #statement: StatementSync;
  readonly #database: NodeSqliteDatabase;
  /**
   * A `rollback`: kysely sends one after a transaction failed, but SQLite ends the transaction by
   * itself after some errors (disk full, I/O), and rolling back none would fail and replace the
   * error that ended it ("cannot rollback - no transaction is active"). It then does nothing.
   */
  readonly #rollback: boolean;

  constructor(statement: StatementSync, database: NodeSqliteDatabase, rollback: boolean) {
    this.#statement = statement;
    this.#database = database;
    this.#rollback = rollback;
    this.reader = statement.columns().length > 0;
  }

  all(parameters: ReadonlyArray<unknown>): unknown[] {
    const values = toSqlParameters(parameters);
    try {
      return this.#statement.all(...values);
    } catch (error) {
      throw this.#database.explain(error);
    }
  }

  run(parameters: ReadonlyArray<unknown>): { changes: number | bigint; lastInsertRowid: number | bigint } {
    if (this.#rollback && !this.#database.inTransaction) return { changes: 0, lastInsertRowid: 0 };
    const values = toSqlParameters(parameters);
    try {
      const { changes, lastInsertRowid } = this.#statement.run(...values);
      return { changes, lastInsertRowid };
    } catch (error) {
      throw this.#database.explain(error);
    }
  }

  iterate(parameters: ReadonlyArray<unknown>): IterableIterator<unknown> {
    const values = toSqlParameters(parameters);
    try {
      return this.#statement.iterate(...values);
    } catch (error) {
      throw this.#database.explain(error);
    }
  }
}

/** Checks and converts parameters (booleans as 0 or 1) for `node:sqlite`. */
export function toSqlParameters(parameters: ReadonlyArray<unknown>): SQLInputValue[] {
  return parameters.map(toSqlParameter);
}

function toSqlParameter(value: unknown, index: number): SQLInputValue {
  switch (typeof value) {
    case "string":
    case "number":
    case "bigint":
      return value;
    case "boolean":
      return value ? 1 : 0;
    case "object":
      if (value === null || value instanceof Uint8Array) return value as SQLInputValue;
      break;
    default:
      break;
  }
  // A programming error in a query: name the parameter's type, never its value (it may be a secret).
  const kind = value === undefined ? "undefined" : `of type ${typeof value}`;
  throw new TypeError(
    `SQL parameter ${index + 1} is ${kind}, which SQLite cannot store; pass a string, number, bigint, boolean, null or bytes.`,
  );
}
