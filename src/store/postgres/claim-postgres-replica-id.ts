import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "pg";
import { describeError } from "./open-postgres-store.ts";
import { parsePostgresUrl } from "./parse-postgres-url.ts";

/** What happened to a claim after it was taken (see {@link claimPostgresReplicaId}). */
export type ReplicaClaimEvent =
  /** The claim's connection broke: the id is unclaimed until a retry takes it again. */
  | { type: "lost"; error: unknown }
  /** A retry could not reach the database; another follows. */
  | { type: "retry-failed"; error: unknown }
  /** A retry found the id claimed by another live server (a duplicate replica id); another follows. */
  | { type: "claimed-elsewhere"; error: Error }
  /** A retry took the claim again. */
  | { type: "retaken" };

/** Options of {@link claimPostgresReplicaId}. */
export interface ClaimReplicaIdOptions {
  replicaId: string;
  /** Told what happens to the claim once it was taken; never throws into the claim. */
  onEvent?: (event: ReplicaClaimEvent) => void;
  /** Milliseconds between tries to take a lost claim again. Default 5,000. */
  retryMilliseconds?: number;
  /**
   * How long the first claim waits for an id in use to come free before it throws, in
   * milliseconds. Default 0. A server's start waits a little: another replica may hold a dead
   * one's id for a moment, to record the charges its journal left (billing/open-charge-journal.ts).
   */
  waitWhenInUseMs?: number;
}

/** A replica id claimed on a database; `close()` gives it up. */
export interface ReplicaClaim {
  /**
   * 12 hex digits naming the store the id is claimed on (the database and the schema of its
   * tables, as the claim's lock does): a replica's journal of owed charges carries it in its
   * name, so that deployments sharing a folder never read each other's (open-charge-journal.ts).
   */
  storeTag: string;
  /**
   * How far this machine's clock is ahead of the database's (negative: behind), in milliseconds,
   * as measured when the claim was taken (the round trip's half is the error). Credits carry each
   * replica's own time and key expiry is judged on it (the server warns at start); usage rows,
   * accounts and keys are stamped with the database's, and leases go by its clock
   * (billing/lease-clock.ts).
   */
  clockSkewMs: number;
  close(): Promise<void>;
}

const DEFAULT_RETRY_MS = 5_000;
/** Between tries of a first claim that waits for an id in use (`waitWhenInUseMs`). */
const IN_USE_RETRY_MS = 200;
/** Bounds on connecting and on each statement: a start never waits for ever on a stalled database. */
const CONNECT_TIMEOUT_MS = 10_000;
const QUERY_TIMEOUT_MS = 10_000;
/**
 * The database's TCP keepalives on the claim's connection (seconds): when a replica's machine is
 * gone without closing its connections, PostgreSQL ends its session, and so frees its id, within
 * about a minute instead of the system default of two hours.
 */
const SERVER_KEEPALIVE = { idle: 30, interval: 10, count: 3 };

/**
 * Claims `replicaId` on the PostgreSQL database at `databaseUrl` for as long as the server runs,
 * or throws a one-line error when a live server of any process, on any machine, holds it.
 *
 * A starting replica releases the open reservations of its own id (SPEC §11), taking them for
 * left-overs of its previous run: a second live server with the same id would release the first
 * one's running requests' money, and those requests would be served without being paid for. The
 * claim is a session-level advisory lock keyed by the schema and the id, held on a connection of
 * its own (not one of the store's pool, which comes and goes): PostgreSQL frees it when the
 * session ends, so a crashed replica's id is free again for its restart.
 *
 * When that connection breaks later (a database restart, a failover), the lock is gone with it;
 * the claim reports `lost` and tries to take it again every `retryMilliseconds` in the background,
 * never throwing. `close()` unlocks and ends the connection.
 */
export async function claimPostgresReplicaId(
  databaseUrl: string,
  options: ClaimReplicaIdOptions,
): Promise<ReplicaClaim> {
  const location = parsePostgresUrl(databaseUrl);
  const { replicaId } = options;
  const retryMilliseconds = options.retryMilliseconds ?? DEFAULT_RETRY_MS;
  const report = (event: ReplicaClaimEvent) => {
    try {
      options.onEvent?.(event);
    } catch {
      // A failing listener must not stop the retries.
    }
  };
  // Computed on the first connection (the schema may be the connection's current one) and kept:
  // a retry claims the same lock.
  let lockKey: string | undefined;
  let storeTag = "";
  let current: Client | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let retrying: Promise<void> | undefined;

  const take = async (): Promise<Client> => {
    const client = new Client({
      connectionString: location.connectionString,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: QUERY_TIMEOUT_MS,
      keepAlive: true,
      fallback_application_name: "tollgate",
    });
    let failure: unknown;
    // An 'error' event without a listener would end the process; the 'end' that follows it is
    // what reports the loss.
    client.on("error", (error) => {
      failure = error;
    });
    client.on("end", () => {
      if (client !== current || closed) return;
      current = undefined;
      report({ type: "lost", error: failure ?? new Error("the connection to PostgreSQL ended") });
      scheduleRetry();
    });
    try {
      await client.connect();
      await client
        .query(
          `set tcp_keepalives_idle = ${SERVER_KEEPALIVE.idle}; set tcp_keepalives_interval = ${SERVER_KEEPALIVE.interval}; set tcp_keepalives_count = ${SERVER_KEEPALIVE.count}`,
        )
        .catch(() => {
          // Only a faster release after a lost machine: the claim holds without it.
        });
      if (lockKey === undefined) {
        const store = await identifyStore(client, location.schema);
        lockKey = computeLockKey(store.schema, replicaId);
        storeTag = createHash("sha256")
          .update(`${store.database}\u0000${store.schema}`)
          .digest("hex")
          .slice(0, 12);
      }
      const { rows } = await client.query<{ claimed: boolean }>(
        "select pg_try_advisory_lock($1::bigint) as claimed",
        [lockKey],
      );
      if (rows[0]?.claimed !== true) throw new ReplicaIdInUseError(replicaId, location.redacted);
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
  };

  const scheduleRetry = () => {
    retryTimer = setTimeout(() => {
      retrying = take().then(
        async (client) => {
          if (closed) {
            await client.end().catch(() => {});
            return;
          }
          current = client;
          report({ type: "retaken" });
        },
        (error: unknown) => {
          if (closed) return;
          report(
            error instanceof ReplicaIdInUseError
              ? { type: "claimed-elsewhere", error }
              : { type: "retry-failed", error },
          );
          scheduleRetry();
        },
      );
    }, retryMilliseconds);
    // A lost claim never keeps a process alive that has nothing else to do.
    retryTimer.unref();
  };

  let clockSkewMs = 0;
  const waitUntil = performance.now() + (options.waitWhenInUseMs ?? 0);
  try {
    for (;;) {
      try {
        current = await take();
        break;
      } catch (error) {
        if (!(error instanceof ReplicaIdInUseError) || performance.now() >= waitUntil) throw error;
        await sleep(IN_USE_RETRY_MS);
      }
    }
    // Only a warning depends on it: a failed measurement is no reason to refuse the start.
    clockSkewMs = await measureClockSkew(current).catch(() => 0);
  } catch (error) {
    if (error instanceof ReplicaIdInUseError) throw error;
    throw new Error(
      `Could not claim the replica id "${replicaId}" on the PostgreSQL store at ${location.redacted}: ${describeError(error)}`,
      { cause: error },
    );
  }

  let closing: Promise<void> | undefined;
  return {
    storeTag,
    clockSkewMs,
    close() {
      closing ??= (async () => {
        closed = true;
        clearTimeout(retryTimer);
        await retrying;
        const client = current;
        current = undefined;
        if (client === undefined) return;
        // Unlocked before the connection ends: a replica that starts right after this one closed
        // must find the id free, not the lock of a backend still on its way out.
        await client.query("select pg_advisory_unlock($1::bigint)", [lockKey]).catch(() => {});
        await client.end().catch(() => {});
      })();
      return closing;
    },
  };
}

/** This machine's clock less the database's, in milliseconds, taken halfway through a round trip. */
async function measureClockSkew(client: Client): Promise<number> {
  const sentAt = Date.now();
  const { rows } = await client.query<{ now: string }>(
    "select (extract(epoch from clock_timestamp()) * 1000)::text as now",
  );
  const receivedAt = Date.now();
  return Math.round((sentAt + receivedAt) / 2 - Number(rows[0]?.now));
}

/** The database the connection is on, and the schema of the store's tables there. */
async function identifyStore(
  client: Client,
  schema: string | undefined,
): Promise<{ database: string; schema: string }> {
  const { rows } = await client.query<{ database: string; schema: string | null }>(
    "select current_database() as database, current_schema() as schema",
  );
  return { database: rows[0]?.database ?? "", schema: schema ?? rows[0]?.schema ?? "" };
}

/** The advisory lock's key: a 64-bit hash of the schema and the id, apart from the migration's. */
function computeLockKey(schema: string, replicaId: string): string {
  return createHash("sha256")
    .update(`tollgate.replica:${schema}\u0000${replicaId}`)
    .digest()
    .readBigInt64BE(0)
    .toString();
}

/** A live server of another process, or of this one, holds the replica id. */
class ReplicaIdInUseError extends Error {
  constructor(replicaId: string, database: string) {
    super(
      `Another running Tollgate server already uses the replica id "${replicaId}" on ${database}; set TOLLGATE_REPLICA_ID to a unique value per replica (a replica that has just stopped frees its id within a minute).`,
    );
    this.name = "ReplicaIdInUseError";
  }
}
