import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import { DatabaseError, type Pool, type PoolClient } from "pg";

/** SQLSTATE `read_only_sql_transaction`: the server the connection reached cannot write. */
const READ_ONLY_SQLSTATE = "25006";

/**
 * `pool` as kysely's `PostgresDialect` takes it, with one difference: a connection that can no
 * longer serve the store is closed when it is given back, not kept. Two failures of a statement
 * make it so.
 *
 * The server cannot write (SQLSTATE 25006). After a failover that leaves the old primary running
 * as a standby (managed databases behind a cluster address do this), the pool's open connections
 * still reach the old server: every write on them fails with 25006 while new connections reach
 * the new primary. `pg` keeps such a connection (it is healthy, only read-only) and, busy, it
 * never idles long enough to be closed, so the store would answer 503 until the replica restarts.
 *
 * The failure did not come from the server: `pg`'s own `query_timeout` ("Query read timeout": the
 * server or the network to it stopped answering), or any other error without a server's SQLSTATE.
 * `pg` fails the statement but keeps waiting for its answer on the connection, and queues the
 * connection's next statements behind it. If the answer never comes (a network or a proxy that
 * drops bytes without closing anything: TCP keeps such a connection open for hours), every later
 * statement given that connection waits out its own timeout and fails too, long after the network
 * is healthy again. An error the server answered (a constraint, its `statement_timeout`, a
 * serialization failure) leaves the connection ready for the next statement, and it is kept.
 *
 * Closed instead, the failed request is the only one to see such a connection; the next opens one
 * that reaches the server as it is now. kysely closes a connection itself only when a rollback
 * fails, which covers a transaction cut after its `begin` but not a statement alone, nor a
 * `begin` that timed out.
 */
export function discardUnusableConnections(pool: Pool): PostgresPool {
  // One wrapper per pg connection: kysely keeps its per-connection state by the client it is given.
  const wrappers = new WeakMap<PoolClient, UnusableDiscardingClient>();
  return {
    // pg's pool has its client class at run time, though its types do not say so.
    Client: (pool as Pool & Pick<PostgresPool, "Client">).Client,
    options: pool.options,
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (wrapper === undefined) {
        wrapper = new UnusableDiscardingClient(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/** Whether a statement that failed with `error` leaves its connection unfit for the next. */
function makesConnectionUnusable(error: unknown): boolean {
  if (!(error instanceof DatabaseError) || typeof error.code !== "string") {
    // Not the server's answer (pg's read timeout, a socket error, a reply pg could not parse):
    // where the connection stands in the protocol is unknown.
    return true;
  }
  return error.code === READ_ONLY_SQLSTATE;
}

class UnusableDiscardingClient implements PostgresPoolClient {
  readonly #client: PoolClient;
  #unusable = false;

  constructor(client: PoolClient) {
    this.#client = client;
  }

  /** The backend's process id, which kysely reads to cancel a statement. */
  get processID(): number | undefined {
    return (this.#client as PoolClient & { processID?: number | null }).processID ?? undefined;
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    first: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof first !== "string") {
      return (this.#client.query as (cursor: unknown) => unknown).call(
        this.#client,
        first,
      ) as PostgresCursor<R>;
    }
    const result = this.#client.query(first, parameters as unknown[]) as unknown as Promise<
      PostgresQueryResult<R>
    >;
    return result.catch((error: unknown) => {
      if (makesConnectionUnusable(error)) this.#unusable = true;
      throw error;
    });
  }

  release(destroy?: boolean): void {
    this.#client.release(destroy === true || this.#unusable);
  }
}
