import { mkdirSync, realpathSync } from "node:fs";
import path from "node:path";
import { Kysely, SqliteDialect, sql } from "kysely";
import type { Database } from "../database.ts";
import { readAccountBalance, readAccountMoney } from "../kysely-billing.ts";
import { createKyselyStore } from "../kysely-store.ts";
import { migrateToLatest } from "../migrate-to-latest.ts";
import type { AccountBalance, Store } from "../store.ts";
import { claimSqliteFile } from "./claim-sqlite-file.ts";
import { type NodeSqliteDatabase, openNodeSqliteDatabase } from "./node-sqlite-database.ts";
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
}

/** One connection to a SQLite file, shared by every store this process opens on it. */
interface SharedConnection extends SqliteConnection {
  /** Settles once the schema is migrated. */
  migrated: Promise<void>;
  /** Open stores using the connection; it is closed when the last one closes. */
  users: number;
  /** Gives up the server's claim on the file (claim-sqlite-file.ts) when the connection closes. */
  releaseClaim?: () => void;
  /** The owner's checkpoints (start-checkpointer.ts). */
  checkpointing?: Checkpointing;
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
 * both apply the same migration.
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
    return {
      ...createStore(connection, options),
      async close(): Promise<void> {
        await connection.billing.close();
        await connection.db.destroy();
      },
    };
  }

  const file = resolveFile(location);
  // Before anything opens: a second server on the file stops here with nothing left open.
  const releaseClaim = options.holdReservations ? claimSqliteFile(file) : undefined;
  let shared = sharedConnections.get(file);
  if (shared === undefined) {
    const opened = openConnection(file);
    const created: SharedConnection = { ...opened, migrated: migrateExclusively(opened.db), users: 0 };
    sharedConnections.set(file, created);
    shared = created;
  }
  const connection = shared;
  connection.users += 1;
  if (releaseClaim !== undefined) {
    connection.releaseClaim ??= releaseClaim;
    connection.checkpointing ??= createCheckpointing({
      file,
      setAutomatic: (automatic) => connection.database.setAutomaticCheckpoint(automatic),
    });
  }
  try {
    await connection.migrated;
  } catch (error) {
    await release(file, connection);
    throw error;
  }
  const store = createStore(connection, options, connection.checkpointing);
  let closed = false;
  return {
    ...store,
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await release(file, connection);
    },
  };
}

/** kysely over one `node:sqlite` connection, and the batched billing on the same connection. */
interface SqliteConnection {
  db: Kysely<Database>;
  database: NodeSqliteDatabase;
  billing: SqliteBillingBatch;
}

function openConnection(location: string): SqliteConnection {
  const database = openNodeSqliteDatabase(location);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return { db, database, billing: createSqliteBillingBatch({ db, database }) };
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
  const store = createKyselyStore(connection.db);
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
    releaseReservations: afterWritingHeld(async (options) => {
      try {
        return await store.releaseReservations(options);
      } finally {
        billing.forgetReservationIds();
      }
    }),
    listReservations: afterWritingHeld(store.listReservations),
    getAccountMoney: withHeldMoney(readAccountMoney),
    getAccountBalance: withHeldMoney(readAccountBalance),
    audit: afterWritingHeld(store.audit),
  };
}

/** Migrates inside one write transaction: atomic, and serialised with other processes. */
async function migrateExclusively(db: Kysely<Database>): Promise<void> {
  await sql`begin immediate`.execute(db);
  try {
    await migrateToLatest(db);
    await sql`commit`.execute(db);
  } catch (error) {
    await sql`rollback`.execute(db).catch(() => {
      // The migration error says more than a failed rollback.
    });
    throw error;
  }
}

async function release(file: string, connection: SharedConnection): Promise<void> {
  connection.users -= 1;
  if (connection.users > 0) return;
  if (sharedConnections.get(file) === connection) sharedConnections.delete(file);
  await connection.billing.close();
  await connection.checkpointing?.stop();
  await connection.db.destroy();
  connection.releaseClaim?.();
}

/** The file's canonical path (folders created), so two spellings of one file share a connection. */
function resolveFile(location: string): string {
  const absolute = path.resolve(location);
  const folder = path.dirname(absolute);
  mkdirSync(folder, { recursive: true });
  return path.join(realpathSync(folder), path.basename(absolute));
}
