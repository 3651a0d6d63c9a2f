import { join } from "node:path";
import type { Migrating } from "./migrate-to-latest.ts";
import type { ClaimReplicaIdOptions, ReplicaClaim } from "./postgres/claim-postgres-replica-id.ts";
import type { MigrationLockWait } from "./postgres/take-migration-lock.ts";
import { openSqliteStore } from "./sqlite/open-sqlite-store.ts";
import type { Store } from "./store.ts";

export interface StoreOptions {
  /**
   * The store of the server that serves from this database. A SQLite file has one such owner
   * (the server releases every reservation it finds when it starts), so its reservations can be
   * held in memory until they last a second, instead of written with each request. On
   * PostgreSQL, where replicas share the database, each replica's store is an owner: its usage
   * rows, accounts and keys take the database's time as they are written, and its paged listings
   * of them stay behind the writes under way, so that a poller's cursor never passes a row still
   * to commit (postgres/usage-stamps.ts, postgres/creation-stamps.ts).
   */
  owner?: boolean;
  /**
   * PostgreSQL: new accounts and keys take the database's time, and paged listings of them stay
   * behind the creations under way (postgres/creation-stamps.ts), as an owner's do. Default: `owner`.
   * A CLI command that makes accounts or keys on a database that replicas serve wants it too: the
   * clock of the machine it runs on may be behind theirs, and a follower of `next_after` then
   * misses what it made.
   */
  stampCreations?: boolean;
  /**
   * Migrate a database an older Tollgate made. Default true; CLI commands say false: a server of
   * the older version may still be running on it, and after a migration it would write rows the
   * new schema's running totals miss. A new database is created either way.
   */
  upgrade?: boolean;
  /**
   * PostgreSQL: told, at once and then every 10 s, while the open waits for another process's
   * migration of the store (who holds its lock, and for how long it has waited).
   */
  onMigrationWait?: (wait: MigrationLockWait) => void;
  /** PostgreSQL: ends a wait for another process's migration; the open then fails. */
  signal?: AbortSignal;
  /**
   * Told, before the first migration runs, which are pending (creating a new store, or upgrading
   * one an older Tollgate made): a migration over a large usage table takes seconds to minutes.
   */
  onMigrating?: (migrating: Migrating) => void;
}

/**
 * Opens the store that `databaseUrl` names and migrates it to the latest schema, creating it
 * when it does not exist yet (so every CLI command works before the first `serve`).
 *
 * - `sqlite:PATH`: a SQLite file; a relative PATH is relative to the working directory, and
 *   `sqlite:///abs/path` is accepted for `/abs/path`. `sqlite::memory:` is an in-memory store.
 * - `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (or `postgresql://`): a PostgreSQL database,
 *   with any parameter `pg` reads (`sslmode`, `application_name`, `options`, ...). `?schema=NAME`
 *   keeps the tables in the schema NAME (lowercase letters, digits, `_`), created when missing;
 *   without it they live in the connection's current schema (usually `public`). See
 *   `postgres/open-postgres-store.ts`.
 *
 * Errors never show a password from the URL.
 */
export async function openStore(databaseUrl: string, options: StoreOptions = {}): Promise<Store> {
  if (databaseUrl.startsWith("sqlite:")) {
    return await openSqliteStore(parseSqliteLocation(databaseUrl), {
      holdReservations: options.owner === true,
      upgrade: options.upgrade ?? true,
      onMigrating: options.onMigrating,
    });
  }
  if (databaseUrl.startsWith("postgres://") || databaseUrl.startsWith("postgresql://")) {
    // Imported only for a PostgreSQL URL: `pg` and its dialect stay out of a SQLite server's memory.
    const { openPostgresStore } = await import("./postgres/open-postgres-store.ts");
    return await openPostgresStore(databaseUrl, {
      stampUsageOnWrite: options.owner === true,
      stampCreationsOnWrite: options.stampCreations ?? options.owner === true,
      upgrade: options.upgrade ?? true,
      onMigrationWait: options.onMigrationWait,
      onMigrating: options.onMigrating,
      signal: options.signal,
    });
  }
  throw new Error(
    `The database URL "${describeScheme(databaseUrl)}" is not one Tollgate knows. Use sqlite:PATH (e.g. sqlite:./data/tollgate.db) or postgres://USER:PASSWORD@HOST:PORT/DATABASE.`,
  );
}

/**
 * Claims the server's replica id on the database that `databaseUrl` names, for as long as the
 * server runs (see `postgres/claim-postgres-replica-id.ts`): throws when another live server
 * uses the same id. `undefined` for SQLite, where one server owns the file and so needs no id of
 * its own (`sqlite/claim-sqlite-file.ts`).
 */
export async function claimReplicaId(
  databaseUrl: string,
  options: ClaimReplicaIdOptions,
): Promise<ReplicaClaim | undefined> {
  if (databaseUrl.startsWith("sqlite:")) return undefined;
  const { claimPostgresReplicaId } = await import("./postgres/claim-postgres-replica-id.ts");
  return await claimPostgresReplicaId(databaseUrl, options);
}

/**
 * Where a server on `databaseUrl` keeps the charges its store did not take yet, so that they
 * outlive the process (billing/charge-journal.ts): beside a SQLite file, as
 * `<file>.pending-charges.jsonl`; for PostgreSQL, in the replica's `journal.folder` as
 * `pending-charges-<replica id>.<store tag>.jsonl` (a replica's id is its own on its store while
 * it runs, claimed on the database, and the same at its restart, which records what the file
 * holds; the tag names the store, see `ReplicaClaim.storeTag`). `undefined` for an in-memory
 * store, and for PostgreSQL without a folder.
 */
export function chargeJournalPath(
  databaseUrl: string,
  journal?: { folder: string; replicaId: string; storeTag: string },
): string | undefined {
  if (!databaseUrl.startsWith("sqlite:")) {
    if (journal === undefined) return undefined;
    return join(
      journal.folder,
      `pending-charges-${encodeURIComponent(journal.replicaId)}.${journal.storeTag}.jsonl`,
    );
  }
  const location = parseSqliteLocation(databaseUrl);
  return location === ":memory:" ? undefined : `${location}.pending-charges.jsonl`;
}

/** The location a `sqlite:` URL names: a path, or `:memory:`. */
export function parseSqliteLocation(databaseUrl: string): string {
  let location = databaseUrl.slice("sqlite:".length);
  if (location.startsWith("//")) location = location.slice(2);
  if (location === "") {
    throw new Error(
      "The database URL `sqlite:` names no file. Write sqlite:PATH, e.g. sqlite:./data/tollgate.db.",
    );
  }
  return location;
}

/** Only the scheme: the rest of a URL may hold a password. */
function describeScheme(databaseUrl: string): string {
  const colon = databaseUrl.indexOf(":");
  return colon === -1 ? "(no scheme)" : `${databaseUrl.slice(0, colon)}:...`;
}
