import { createHash } from "node:crypto";
import { Kysely, sql } from "kysely";
import { Pool, TypeOverrides } from "pg";
import type { Database } from "../database.ts";
import { createKyselyStore } from "../kysely-store.ts";
import {
  compareSchema,
  type Migrating,
  migrateToLatest,
  readAppliedMigrations,
  refuseOlderSchema,
} from "../migrate-to-latest.ts";
import type { Store } from "../store.ts";
import { POSTGRES_SUM_WINDOW_ROWS } from "../usage-sum-window.ts";
import { announceCreation, lockAccountName, readCreationHorizon } from "./creation-stamps.ts";
import { discardUnusableConnections } from "./discard-unusable-connections.ts";
import { parsePostgresUrl } from "./parse-postgres-url.ts";
import { createPostgresBilling } from "./postgres-billing.ts";
import { postgresCommitCheck } from "./postgres-commit-check.ts";
import { PostgresStoreDialect } from "./postgres-store-dialect.ts";
import { createRunAlone } from "./run-alone.ts";
import { type MigrationLockWait, takeMigrationLock } from "./take-migration-lock.ts";
import { readUsageListingHorizon, STATEMENT_TIME_TEXT } from "./usage-stamps.ts";

/** Options of {@link openPostgresStore}. */
export interface PostgresStoreOptions {
  /** Connections the store opens at most; more concurrent queries wait for one. Default 10. */
  poolSize?: number;
  /** Milliseconds to wait for a new connection (or a free one) before failing. Default 10,000. */
  connectionTimeoutMilliseconds?: number;
  /**
   * Milliseconds a statement may take before it fails. Default 30,000. The server cancels it
   * (`statement_timeout`: a lock that is never released), and the client gives up a moment later
   * (`query_timeout`: a server or network that stopped answering), so no request and no
   * readiness check waits for ever.
   */
  queryTimeoutMilliseconds?: number;
  /** Migrate a database an older Tollgate made (see `StoreOptions.upgrade`). Default true. */
  upgrade?: boolean;
  /**
   * Usage rows take the time of the statement that writes them, not their record's `createdAt`,
   * and paged usage listings stop at the horizon of writes under way (usage-stamps.ts): a server's
   * store (`StoreOptions.owner`). Default false: a CLI command, or a test that writes rows of
   * given times.
   */
  stampUsageOnWrite?: boolean;
  /**
   * Likewise new accounts and keys, and paged listings of them (creation-stamps.ts): replicas'
   * clocks differ, the database's is the one they share. Default false, as {@link stampUsageOnWrite}.
   */
  stampCreationsOnWrite?: boolean;
  /** Told, at once and then every 10 s, while another process's migration makes the open wait. */
  onMigrationWait?: ((wait: MigrationLockWait) => void) | undefined;
  /** Told which migrations are pending before they run (see `StoreOptions.onMigrating`). */
  onMigrating?: ((migrating: Migrating) => void) | undefined;
  /** Ends a wait for another process's migration: the open fails. */
  signal?: AbortSignal | undefined;
}

/** How much longer than the server's statement timeout the client waits for an answer. */
const CLIENT_TIMEOUT_MARGIN_MS = 1_000;

/** PostgreSQL's type id of `bigint` (`int8`). */
const INT8_TYPE_ID = 20;

/**
 * Opens the PostgreSQL store at `databaseUrl` (see `parsePostgresUrl` for the URL, `?schema=NAME`
 * included) and migrates it to the latest schema, creating the schema and the tables when missing.
 *
 * One `pg` pool per store (10 connections unless told), driven by kysely's `PostgresDialect` (with
 * an introspector of its own, see `PostgresStoreDialect`): the same migrations and queries as SQLite (see `database.ts`). Every `bigint` column and aggregate
 * is read as a JS `bigint` by a type parser of this pool only (pg's default answers strings, and
 * the global `pg.types` is left alone), so money never passes through a floating-point number.
 *
 * Several replicas may start at once: the migration runs under a session advisory lock keyed by
 * the schema, so one migrates while the others wait, then find nothing left to do. `close()` ends
 * the pool. Errors show the URL without its password.
 */
export async function openPostgresStore(
  databaseUrl: string,
  options: PostgresStoreOptions = {},
): Promise<Store> {
  const location = parsePostgresUrl(databaseUrl);
  const queryTimeout = options.queryTimeoutMilliseconds ?? 30_000;
  const types = new TypeOverrides();
  types.setTypeParser(INT8_TYPE_ID, "text", (text: string) => BigInt(text));
  const connectionTimeoutMillis = options.connectionTimeoutMilliseconds ?? 10_000;
  const pool = new Pool({
    connectionString: location.connectionString,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis,
    statement_timeout: queryTimeout,
    query_timeout: queryTimeout + CLIENT_TIMEOUT_MARGIN_MS,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    fallback_application_name: "tollgate",
    types,
  });
  // A connection broke (the server restarted or failed over, an administrator terminated its
  // backend, a proxy cut it). pg emits an 'error' event for it, and an 'error' event without a
  // listener ends the process. While the connection is idle the pool listens (and emits it here);
  // while it is checked out (a statement running, or between the statements of a transaction)
  // only the client's own listeners hear it, and a terminated backend's goodbye and the end of
  // its socket often arrive together, before the failed statement has given its connection back.
  // So every connection gets a listener of its own as it opens. Nothing else is needed: the
  // statement (or the next one on that connection) fails with the error, which the API answers
  // with 503 `store_unavailable`, and the pool drops the broken connection when it comes back
  // (pg marks it not queryable) and opens another when asked. A connection to a server that
  // became read-only, or one left waiting for the answer to a statement pg gave up on (its
  // `query_timeout`), is healthy to pg; the store closes it itself (discard-unusable-connections.ts).
  listenForConnectionErrors(pool);
  const db = new Kysely<Database>({
    dialect: new PostgresStoreDialect({ pool: discardUnusableConnections(pool) }),
  });

  try {
    await migrateExclusively(db, location.schema, {
      upgrade: options.upgrade ?? true,
      onWait: options.onMigrationWait,
      onMigrating: options.onMigrating,
      signal: options.signal,
      openMigrationConnection: () => {
        const migrationPool = new Pool({
          connectionString: location.connectionString,
          max: 1,
          connectionTimeoutMillis,
          keepAlive: true,
          fallback_application_name: "tollgate",
          types,
        });
        // As the main pool's (above): a connection cut during the migration ended the process
        // with an uncaught exception, before the start's own failure was said.
        listenForConnectionErrors(migrationPool);
        return new Kysely<Database>({ dialect: new PostgresStoreDialect({ pool: migrationPool }) });
      },
    });
  } catch (error) {
    await db.destroy().catch(() => {
      // The reason the store did not open says more than a failure to close it.
    });
    throw new Error(`Could not open the PostgreSQL store at ${location.redacted}: ${describeError(error)}`, {
      cause: error,
    });
  }

  const stampOnWrite = options.stampUsageOnWrite === true;
  const store = createKyselyStore(db, {
    lockRows: true,
    lockAccountName,
    sumWindowRows: POSTGRES_SUM_WINDOW_ROWS,
    commitCheck: postgresCommitCheck,
    ...(stampOnWrite
      ? { usageTimeSql: STATEMENT_TIME_TEXT, readListingHorizon: () => readUsageListingHorizon(db) }
      : {}),
    ...(options.stampCreationsOnWrite === true
      ? {
          creationStamps: {
            timeSql: STATEMENT_TIME_TEXT,
            announce: announceCreation,
            readHorizon: (table) => readCreationHorizon(db, table),
          },
        }
      : {}),
  });
  let closing: Promise<void> | undefined;
  return {
    ...store,
    ...createPostgresBilling(db, { stampOnWrite }),
    runAlone: createRunAlone(db, location.schema),
    async readClock(): Promise<number> {
      const { rows } = await sql<{ now: string }>`
        select (extract(epoch from clock_timestamp()) * 1000)::text as now`.execute(db);
      const now = Number(rows[0]?.now);
      if (!Number.isFinite(now)) throw new Error("PostgreSQL did not tell its time.");
      return now;
    },
    close(): Promise<void> {
      closing ??= store.close();
      return closing;
    },
  };
}

/**
 * Creates the schema when the URL names one that is missing, then migrates, all on one connection
 * holding a session advisory lock keyed by the schema: replicas starting together on one database
 * take turns, and a replica that crashes midway lets go of the lock with its connection. (kysely's
 * migrator also takes a lock, but only around the migrations proper, after it has created its own
 * tables.) A database already current takes no lock: a replica starting while another migrates
 * a different schema, or holds the lock for long, does not wait for it. Without `upgrade`, a
 * database an older Tollgate made is refused, not migrated.
 *
 * The migration runs on a connection of its own, without the pool's statement timeout: a
 * migration that rewrites a table of tens of millions of usage rows takes minutes, and cut at
 * the timeout it would roll back and be cut again at every start, leaving the server unable to
 * start at all. Likewise a replica waits for the lock for as long as another migrates, saying so
 * (take-migration-lock.ts).
 */
async function migrateExclusively(
  db: Kysely<Database>,
  schema: string | undefined,
  options: {
    upgrade: boolean;
    openMigrationConnection: () => Kysely<Database>;
    onWait: ((wait: MigrationLockWait) => void) | undefined;
    onMigrating: ((migrating: Migrating) => void) | undefined;
    signal: AbortSignal | undefined;
  },
): Promise<void> {
  const target = await db.connection().execute(async (connection) => {
    const found = schema ?? (await readCurrentSchema(connection));
    // The migrations commit together (transactional DDL): this sees all of them or none.
    const applied = await readAppliedMigrations(connection, found);
    const state = compareSchema(applied);
    if (state === "current") return undefined;
    if (state === "behind" && !options.upgrade) throw refuseOlderSchema(applied ?? []);
    return found;
  });
  if (target === undefined) return;
  const migrationDb = options.openMigrationConnection();
  try {
    await migrationDb.connection().execute(async (connection) => {
      // Set on the connection, not left to the server's default: a role or database may have a
      // statement timeout of its own.
      await sql`set statement_timeout = 0`.execute(connection);
      const lockKey = createHash("sha256").update(`tollgate.migrate:${target}`).digest().readBigInt64BE(0);
      await takeMigrationLock(connection, lockKey, { onWait: options.onWait, signal: options.signal });
      let failure: unknown;
      try {
        if (schema !== undefined) await createSchemaIfMissing(connection, schema);
        // Told under the lock: what another replica migrated meanwhile is not pending.
        await migrateToLatest(connection, { migrationTableSchema: target, onMigrating: options.onMigrating });
      } catch (error) {
        failure = error;
      }
      try {
        await sql`select pg_advisory_unlock(${lockKey})`.execute(connection);
      } catch (error) {
        // A broken connection took the lock with it; the migration's own failure matters more.
        failure ??= error;
      }
      if (failure !== undefined) throw failure;
    });
  } finally {
    await migrationDb.destroy();
  }
}

async function readCurrentSchema(connection: Kysely<Database>): Promise<string> {
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(
    connection,
  );
  const schema = rows[0]?.schema;
  if (schema === undefined || schema === null) {
    throw new Error(
      "the connection's search_path names no schema that exists; create it, or name one with ?schema=NAME in the URL (Tollgate then creates it)",
    );
  }
  return schema;
}

/** Looks before creating: `create schema if not exists` needs the CREATE right even when it exists. */
async function createSchemaIfMissing(connection: Kysely<Database>, schema: string): Promise<void> {
  const { rows } = await sql<{ found: number }>`
    select 1 as found from pg_namespace where nspname = ${schema}
  `.execute(connection);
  if (rows.length === 0) await sql`create schema if not exists ${sql.id(schema)}`.execute(connection);
}

/** The error's message and its causes' (`pg` reports a refused connection as an `AggregateError`). */
export function describeError(error: unknown, depth = 0): string {
  if (depth > 3) return "";
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map((each: unknown) => describeError(each, depth + 1)))].join("; ");
  }
  if (!(error instanceof Error)) return String(error);
  const code = "code" in error && typeof error.code === "string" ? error.code : undefined;
  const message = error.message === "" ? (code ?? error.name) : error.message;
  const cause = error.cause === undefined ? "" : describeError(error.cause, depth + 1);
  return cause === "" ? message : `${message.replace(/\.$/, "")}: ${cause}`;
}

/**
 * Hears the 'error' a broken connection emits, on the pool (idle connections) and on each
 * connection as it opens (one checked out): unheard, it ends the process (see openPostgresStore).
 */
function listenForConnectionErrors(pool: Pool): void {
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    client.on("error", () => {});
  });
}
