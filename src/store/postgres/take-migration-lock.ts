import { setTimeout as sleep } from "node:timers/promises";
import { type Kysely, sql } from "kysely";
import type { Database } from "../database.ts";

/** The session that holds the migration lock, as PostgreSQL tells of it. */
export interface MigrationLockHolder {
  pid: number;
  applicationName: string;
  /** The holder's client address; absent for a local socket, or where this role may not see it. */
  clientAddress: string | undefined;
}

/** What a start that waits for another process's migration is told, now and then. */
export interface MigrationLockWait {
  /** `undefined` where PostgreSQL did not say (the lock was let go meanwhile, or not visible). */
  holder: MigrationLockHolder | undefined;
  waitedMs: number;
}

/** How often the lock is tried while another session holds it. */
const POLL_MS = 250;
/** How often a wait is reported: at once, then this often. */
export const REPORT_EVERY_MS = 10_000;

/**
 * Takes the session advisory lock `key` on `connection`, for as long as another session holds
 * it: a replica waits while another migrates, however long a migration over a big table takes.
 * Tried rather than waited for in PostgreSQL (`pg_advisory_lock` says nothing while it waits):
 * `onWait` hears at once, then every {@link REPORT_EVERY_MS}, who holds it (a stuck session
 * holding it would otherwise stop every start without a word), and `signal` ends the wait (a
 * `SIGTERM` to a server that is still starting).
 */
export async function takeMigrationLock(
  connection: Kysely<Database>,
  key: bigint,
  options: { onWait?: ((wait: MigrationLockWait) => void) | undefined; signal?: AbortSignal | undefined },
): Promise<void> {
  const started = performance.now();
  let reported = Number.NEGATIVE_INFINITY;
  for (;;) {
    const { rows } = await sql<{ taken: boolean }>`select pg_try_advisory_lock(${key}) as taken`.execute(
      connection,
    );
    if (rows[0]?.taken === true) return;
    const now = performance.now();
    if (options.signal?.aborted === true) throw stoppedWaiting(options.signal);
    if (now - reported >= REPORT_EVERY_MS) {
      reported = now;
      options.onWait?.({ holder: await readHolder(connection, key), waitedMs: Math.round(now - started) });
    }
    try {
      await sleep(POLL_MS, undefined, options.signal === undefined ? {} : { signal: options.signal });
    } catch {
      throw stoppedWaiting(options.signal);
    }
  }
}

function stoppedWaiting(signal: AbortSignal | undefined): Error {
  return new Error("stopped while waiting for another process to finish migrating the store", {
    cause: signal?.reason,
  });
}

/**
 * The session holding the advisory lock `key`: PostgreSQL keeps a bigint key's high and low 32
 * bits as the lock's `classid` and `objid` (`objsubid` 1). Advisory locks belong to a database,
 * and pg_locks shows every database's: another deployment on the cluster may hold the same key.
 */
async function readHolder(
  connection: Kysely<Database>,
  key: bigint,
): Promise<MigrationLockHolder | undefined> {
  const unsigned = BigInt.asUintN(64, key);
  const high = String(unsigned >> 32n);
  const low = String(unsigned & 0xffff_ffffn);
  const { rows } = await sql<{ pid: number; application_name: string | null; client: string | null }>`
    select a.pid, a.application_name, host(a.client_addr) as client
    from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid::bigint = ${high}::bigint and l.objid::bigint = ${low}::bigint
    limit 1`.execute(connection);
  const row = rows[0];
  if (row === undefined) return undefined;
  return {
    pid: row.pid,
    applicationName: row.application_name ?? "",
    clientAddress: row.client ?? undefined,
  };
}
