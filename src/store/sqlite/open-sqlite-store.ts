import { existsSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Kysely, SqliteDialect, sql } from "kysely";
import { makeFolderSync } from "../../files/make-folder.ts";
import { toTimestampText } from "../column-values.ts";
import type { Database } from "../database.ts";
import { createKyselyStore, readAccountsWithMoney } from "../kysely-store.ts";
import {
  compareSchema,
  type Migrating,
  migrateToLatest,
  readAppliedMigrations,
  refuseOlderSchema,
} from "../migrate-to-latest.ts";
import { readAccountBalance, readAccountMoney } from "../read-account-money.ts";
import type { AccountBalance, AccountPage, Store } from "../store.ts";
import { claimSqliteFile } from "./claim-sqlite-file.ts";
import {
  explainDatabaseFolderError,
  explainSqliteError,
  isSqliteBusy,
  SqliteFileError,
} from "./explain-sqlite-error.ts";
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  type NodeSqliteDatabase,
  openNodeSqliteDatabase,
} from "./node-sqlite-database.ts";
import { createSqliteBillingBatch, type SqliteBillingBatch } from "./sqlite-billing-batch.ts";
import { type Checkpointing, createCheckpointing } from "./start-checkpointer.ts";

export interface SqliteStoreOptions {
  /**
   * Hold reservations in memory until they are a second old (see `sqlite-billing-batch.ts`):
   * only for the server that owns the file, the one process that reserves on it. Claims the file
   * (claim-sqlite-file.ts): opening fails while a server of another process has it. Once its
   * writes are sustained, the owner checkpoints the WAL on a worker thread (start-checkpointer.ts).
   */
  holdReservations: boolean;
  /** Migrate a file an older Tollgate made (see `StoreOptions.upgrade`). Default true. */
  upgrade?: boolean;
  /** Told which migrations are pending before they run (see `StoreOptions.onMigrating`). */
  onMigrating?: ((migrating: Migrating) => void) | undefined;
}

/**
 * How long the server's own connection waits for a lock another process holds on the file.
 * node:sqlite waits on the event loop's thread, so every request in flight waits with it: the
 * wait is kept to what the CLI's writes beside a serving server take (a few milliseconds each,
 * `accounts credit` included), and a longer lock (a VACUUM, an open sqlite3 session) fails
 * fast instead: settles are retried in the background, reservations and other writes answer
 * 503 `store_unavailable` until the file is free. The CLI waits {@link DEFAULT_BUSY_TIMEOUT_MS}.
 */
export const OWNER_BUSY_TIMEOUT_MS = 50;

/** How long the owner's start (releasing what its previous run left) waits for a locked file. */
const START_LOCK_WAIT_MS = DEFAULT_BUSY_TIMEOUT_MS;

/**
 * How often the owner refreshes the query planner's statistics (see {@link startOptimizing}). A
 * run does nothing (well under a millisecond) unless a table has grown or shrunk about tenfold
 * since it was last analyzed: so a file that starts empty is analyzed once its tables have rows,
 * then again at about ten, a hundred, a thousand times as many.
 */
export const OPTIMIZE_EVERY_MS = 60 * 60 * 1000;

/**
 * Index entries ANALYZE reads per index (`analysis_limit`), so a run stays short on a large
 * file: it still counts every row (about half a second for 2 million usage rows), but judges
 * how many rows share a value from this many entries. SQLite suggests 100 to 1,000; a larger
 * sample costs little more and keeps an index whose values have few rows each (an account's
 * usage) apart from one with a few values (the models) for longer: until the first value in
 * the index has this many rows, when both look alike.
 */
const ANALYSIS_LIMIT_ENTRIES = 10_000;

/** One connection to a SQLite file, shared by every store this process opens on it. */
interface SharedConnection extends SqliteConnection {
  /** Settles once the schema is migrated. */
  migrated: Promise<void>;
  /** Open stores using the connection; it is closed when the last one closes. */
  users: number;
  /** Open stores of the server that owns the file; while any is, locks are waited for briefly. */
  owners: number;
  /** Gives up the server's claim on the file (claim-sqlite-file.ts) when the connection closes. */
  releaseClaim?: () => void;
  /** The owner's checkpoints (start-checkpointer.ts). */
  checkpointing?: Checkpointing;
  /** The owner's planner statistics ({@link startOptimizing}). */
  optimizing?: Optimizing;
}

const sharedConnections = new Map<string, SharedConnection>();

/**
 * Opens (creating the file and its parent folders when missing) and migrates the SQLite store
 * at `location`: a file path, or `:memory:` for a store that lives as long as the process.
 *
 * Stores opened on the same file in one process share one connection. node:sqlite is
 * synchronous: a second connection in the same thread that waited for a lock held by the first
 * would block the thread, so the first could never finish and release it (every statement would
 * stall for the busy timeout, then fail with "database is locked"). Sharing the connection lets
 * kysely queue the transactions instead. Other processes (the CLI beside `serve`) have their own
 * connection and wait for SQLite's write lock; every transaction takes it up front
 * (`begin immediate`), the migration included, so two processes starting on a new file do not
 * both apply the same migration (a file already migrated opens without the lock). The server's
 * own connection waits only {@link OWNER_BUSY_TIMEOUT_MS} for it.
 *
 * Errors about the file itself (not a database, a folder, locked, its folder not writable, a file
 * where its folder should be) name it and the fix (`explain-sqlite-error.ts`); a server that cannot
 * open its file gives its claim back.
 */
export async function openSqliteStore(
  location: string,
  options: SqliteStoreOptions = { holdReservations: false },
): Promise<Store> {
  if (location === ":memory:") {
    const connection = openConnection(location);
    try {
      await migrateExclusively(connection.db);
    } catch (error) {
      await connection.db.destroy();
      throw error;
    }
    const optimizing = options.holdReservations ? startOptimizing(connection.db) : undefined;
    await optimizing?.opened;
    return {
      ...createStore(connection, options),
      async close(): Promise<void> {
        await connection.billing.close();
        await optimizing?.stop();
        await connection.db.destroy();
      },
    };
  }

  const file = resolveSqliteFile(location);
  // Before anything opens: a second server on the file stops here with nothing left open.
  const releaseClaim = options.holdReservations ? claimSqliteFile(file) : undefined;
  let shared = sharedConnections.get(file);
  if (shared === undefined) {
    let opened: SqliteConnection;
    try {
      opened = openConnection(file);
    } catch (error) {
      // Not a database, a folder, locked: a server that cannot start leaves no claim behind.
      releaseClaim?.();
      throw error;
    }
    const created: SharedConnection = {
      ...opened,
      migrated: migrateUnlessCurrent(opened.db, options.upgrade ?? true, options.onMigrating),
      users: 0,
      owners: 0,
    };
    sharedConnections.set(file, created);
    shared = created;
  }
  const connection = shared;
  connection.users += 1;
  if (releaseClaim !== undefined) {
    // One claim a connection: it holds the file until the connection closes.
    if (connection.releaseClaim === undefined) connection.releaseClaim = releaseClaim;
    else releaseClaim();
    connection.checkpointing ??= createCheckpointing({
      file,
      setAutomatic: (automatic) => connection.database.setAutomaticCheckpoint(automatic),
      pauseWrites: (ms) => connection.database.pauseWrites(ms),
    });
  }
  try {
    await connection.migrated;
  } catch (error) {
    await release(file, connection);
    throw error;
  }
  if (options.holdReservations) {
    connection.owners += 1;
    connection.database.setBusyTimeout(OWNER_BUSY_TIMEOUT_MS);
    // After the short busy timeout is set: a CLI command holding the file delays this 50 ms.
    connection.optimizing ??= startOptimizing(connection.db);
    await connection.optimizing.opened;
  }
  const store = createStore(connection, options, connection.checkpointing);
  let closed = false;
  return {
    ...store,
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      if (options.holdReservations) {
        connection.owners -= 1;
        if (connection.owners === 0 && connection.users > 1) {
          connection.database.setBusyTimeout(DEFAULT_BUSY_TIMEOUT_MS);
        }
      }
      await release(file, connection);
    },
  };
}

/** kysely over one `node:sqlite` connection, and the batched billing on the same connection. */
interface SqliteConnection {
  /** The file (or `:memory:`), as messages name it. */
  location: string;
  db: Kysely<Database>;
  database: NodeSqliteDatabase;
  billing: SqliteBillingBatch;
}

function openConnection(location: string): SqliteConnection {
  const database = openNodeSqliteDatabase(location);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return { location, db, database, billing: createSqliteBillingBatch({ db, database }) };
}

/**
 * The kysely store, with reserve and settle held in memory and group-committed (see
 * `sqlite-billing-batch.ts`). Whatever reads or changes reservations otherwise first writes the
 * ones held in memory, so it sees exactly what a store that wrote every reservation would.
 */
function createStore(
  connection: SqliteConnection,
  options: SqliteStoreOptions,
  checkpointing?: Checkpointing,
): Store {
  const { billing } = connection;
  const store = createKyselyStore(connection.db, {
    lockRows: false,
    // A page stops before this millisecond, once every row stamped before it has committed: a
    // settle stamps its row and queues it in one synchronous step, and rows of one millisecond
    // commit in batches whose order their ids (taken at admission) do not follow. A poller
    // following `next_after` missed a row that committed behind its cursor, beside a row of the
    // same millisecond with a larger id that an earlier batch had committed (0.2 % under load).
    readListingHorizon: async () => {
      const horizon = toTimestampText(new Date());
      await billing.drain();
      return horizon;
    },
  });
  const afterWritingHeld =
    <Parameters extends unknown[], Result>(read: (...parameters: Parameters) => Promise<Result>) =>
    async (...parameters: Parameters): Promise<Result> => {
      await billing.writeHeld();
      return await read(...parameters);
    };
  // The file's figures plus what is held in memory, read together under the connection's lock
  // (no batch can commit in between): what the file would say with every row written, without
  // writing them (a flood of refused requests asks for this on every refusal).
  const withHeldMoney =
    <Money extends AccountBalance>(
      read: (db: Kysely<Database>, accountId: string) => Promise<Money | undefined>,
    ) =>
    (accountId: string): Promise<Money | undefined> =>
      connection.db.connection().execute(async (locked) => {
        const money = await read(locked, accountId);
        if (money === undefined) return undefined;
        return { ...money, reservedNano: money.reservedNano + billing.heldFor(accountId) };
      });
  return {
    ...store,
    reserve: (reservation) => billing.reserve(reservation, { hold: options.holdReservations }),
    settle: (usage) => {
      checkpointing?.noteWrite();
      return billing.settle(usage);
    },
    renewLeases: afterWritingHeld(store.renewLeases),
    releaseReservations: afterWritingHeld(async (releasing) => {
      try {
        // The owner runs this as it starts, before it serves: a lock held a moment longer than
        // its short busy timeout (a CLI command) is waited out, without blocking the thread.
        if (!options.holdReservations) return await store.releaseReservations(releasing);
        return await retryWhileBusy(
          () => store.releaseReservations(releasing),
          START_LOCK_WAIT_MS,
          connection.location,
        );
      } finally {
        billing.forgetReservationIds();
      }
    }),
    listReservations: afterWritingHeld(store.listReservations),
    getAccountMoney: withHeldMoney(readAccountMoney),
    getAccountBalance: withHeldMoney(readAccountBalance),
    // As getAccountMoney for every account: the rows and what is held, under the same lock.
    listAccountsWithMoney: (page?: AccountPage) =>
      connection.db.connection().execute(async (locked) => {
        const accounts = await readAccountsWithMoney(locked, page);
        return accounts.map((account) => {
          const heldNano = billing.heldFor(account.id);
          return heldNano === 0n ? account : { ...account, reservedNano: account.reservedNano + heldNano };
        });
      }),
    // Its answer shows the account's money as the reads above do, with what is held here.
    credit: async (credit) => {
      const result = await store.credit(credit);
      if (!("money" in result)) return result;
      const reservedNano = result.money.reservedNano + billing.heldFor(credit.accountId);
      return { ...result, money: { ...result.money, reservedNano } };
    },
    audit: afterWritingHeld(store.audit),
  };
}

/**
 * Migrates the file unless every migration has been applied. Checking is a read, which another
 * process's write lock does not block: a CLI command (`accounts list`) or a server starts while a
 * long write holds the file, and only a file that needs migrating waits for the lock. Without
 * `upgrade`, a file an older Tollgate made is refused, not migrated.
 */
async function migrateUnlessCurrent(
  db: Kysely<Database>,
  upgrade: boolean,
  onMigrating: ((migrating: Migrating) => void) | undefined,
): Promise<void> {
  const applied = await readAppliedMigrations(db, undefined);
  const state = compareSchema(applied);
  if (state === "current") return;
  if (state === "behind" && !upgrade) throw refuseOlderSchema(applied ?? []);
  await migrateExclusively(db, onMigrating);
}

/**
 * Runs `operation` again while it fails on another process's lock, pausing between attempts
 * without blocking the thread, for about `forMs`; then its last error is thrown, saying how long
 * it waited.
 */
async function retryWhileBusy<Result>(
  operation: () => Promise<Result>,
  forMs: number,
  location: string,
): Promise<Result> {
  const startedAt = performance.now();
  for (;;) {
    try {
      return await operation();
    } catch (error) {
      if (!isSqliteBusy(error)) throw error;
      const waited = performance.now() - startedAt;
      // Said with the time waited here, not the last statement's busy timeout (it said 50 ms
      // after five seconds).
      if (waited >= forMs)
        throw explainSqliteError(
          error instanceof SqliteFileError ? error.cause : error,
          location,
          Math.round(waited),
        );
    }
    await sleep(OWNER_BUSY_TIMEOUT_MS);
  }
}

/** Migrates inside one write transaction: atomic, and serialised with other processes. */
async function migrateExclusively(
  db: Kysely<Database>,
  onMigrating?: (migrating: Migrating) => void,
): Promise<void> {
  await sql`begin immediate`.execute(db);
  try {
    // Told under the write lock: what another process migrated meanwhile is not pending.
    await migrateToLatest(db, { onMigrating });
    await sql`commit`.execute(db);
  } catch (error) {
    await sql`rollback`.execute(db).catch(() => {
      // The migration error says more than a failed rollback.
    });
    throw error;
  }
}

/** The owner's planner statistics, from {@link startOptimizing}. */
interface Optimizing {
  /** Settles when the run at opening is over (it never fails: see {@link optimize}). */
  opened: Promise<void>;
  /** Stops the periodic runs and runs once more, as SQLite advises before closing. */
  stop(): Promise<void>;
}

/**
 * Keeps the query planner's statistics as SQLite advises for a connection that stays open
 * (https://sqlite.org/lang_analyze.html#autoanalyze): `PRAGMA optimize` when it opens, every
 * {@link OPTIMIZE_EVERY_MS}, and before it closes. Without statistics the planner takes every
 * index to narrow a search alike, and may walk every usage row of a model to find the few of one
 * account (GET /admin/usage?account=..&model=..), blocking the event loop for a second. When
 * ANALYZE runs it blocks the thread too: at opening, before the server serves, and otherwise
 * once per tenfold growth of a table (about 0.4 s for 2 million usage rows).
 * Only the server that owns the file runs it: a CLI command's connection is too short-lived to
 * need statistics, and its analysis would hold the write lock the server's writes wait for.
 */
function startOptimizing(db: Kysely<Database>): Optimizing {
  let running = optimize(db);
  const timer = setInterval(() => {
    running = running.then(() => optimize(db));
  }, OPTIMIZE_EVERY_MS);
  // The statistics alone never keep the process alive.
  timer.unref();
  return {
    opened: running,
    async stop(): Promise<void> {
      clearInterval(timer);
      await running;
      await optimize(db);
    },
  };
}

/**
 * One `PRAGMA optimize`, over every table (0x10000: not only those this connection has read
 * since it opened, so a table that has only been written gets its statistics too) and within
 * {@link ANALYSIS_LIMIT_ENTRIES}. Through kysely, so it waits for the transaction in flight. A run
 * that fails (a CLI command holds the file longer than the owner waits) is tried again at the next.
 */
async function optimize(db: Kysely<Database>): Promise<void> {
  try {
    await sql.raw(`PRAGMA analysis_limit = ${ANALYSIS_LIMIT_ENTRIES}`).execute(db);
    await sql.raw("PRAGMA optimize = 0x10002").execute(db);
  } catch {
    // Statistics only guide the planner; every query answers the same without them.
  }
}

async function release(file: string, connection: SharedConnection): Promise<void> {
  connection.users -= 1;
  if (connection.users > 0) return;
  if (sharedConnections.get(file) === connection) sharedConnections.delete(file);
  await connection.billing.close();
  await connection.optimizing?.stop();
  await connection.checkpointing?.stop();
  await connection.db.destroy();
  connection.releaseClaim?.();
}

/**
 * The file's canonical path (folders created), so two spellings of one file share a connection.
 * A folder that cannot be created (a file in the way, no permission) is named with the fix.
 */
export function resolveSqliteFile(location: string): string {
  const absolute = path.resolve(location);
  const folder = path.dirname(absolute);
  try {
    makeFolderSync(folder);
  } catch (error) {
    throw explainDatabaseFolderError(error, absolute);
  }
  // The file's own name when it is a link to another: two names for one file are one claim.
  if (existsSync(absolute)) {
    refuseHardLinks(absolute);
    return realpathSync(absolute);
  }
  return path.join(realpathSync(folder), path.basename(absolute));
}

/**
 * Refuses a database file with more than one name (hard links: `ln`, `cp -l`). SQLite keeps a
 * database's write-ahead log and its lock beside the name it opens, so a server opened by one name
 * and another server or command by another each wrote to a log of its own, unseen by the other: a
 * second server started beside the first (the claim is also by name), and the charges it took
 * were lost when it stopped. A symbolic link is followed to the one name instead.
 */
function refuseHardLinks(file: string): void {
  const stat = statSync(file);
  // A folder has a name in each of its subfolders too; it is refused as a folder later.
  if (!stat.isFile() || stat.nlink <= 1) return;
  throw new Error(
    `The database ${file} has ${stat.nlink} names (hard links to one file): SQLite keeps its write-ahead log beside the name it is opened by, so writes through one name go unseen through the other, and charges are lost. Remove the other names (find them with: find / -xdev -samefile ${file}); to copy the database, use tollgate backup.`,
  );
}
