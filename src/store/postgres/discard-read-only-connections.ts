import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import type { Pool, PoolClient } from "pg";

/** SQLSTATE `read_only_sql_transaction`: the server the connection reached cannot write. */
const READ_ONLY_SQLSTATE = "25006";

/**
 * `pool` as kysely's `PostgresDialect` takes it, with one difference: a connection on which a
 * statement failed because the server cannot write is closed when it is given back, not kept.
 *
 * After a failover that leaves the old primary running as a standby (managed databases behind a
 * cluster address do this), the pool's open connections still reach the old server: every write
 * on them fails with 25006 while new connections reach the new primary. `pg` keeps such a
 * connection (it is healthy, only read-only) and, busy, it never idles long enough to be closed,
 * so the store would answer 503 until the replica restarts. Closed instead, the failed request is
 * the only one to see it; the next opens a connection that finds the new primary.
 */
export function discardReadOnlyConnections(pool: Pool): PostgresPool {
  // One wrapper per pg connection: kysely keeps its per-connection state by the client it is given.
  const wrappers = new WeakMap<PoolClient, ReadOnlyDiscardingClient>();
  return {
    // pg's pool has its client class at run time, though its types do not say so.
    Client: (pool as Pool & Pick<PostgresPool, "Client">).Client,
    options: pool.options,
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (wrapper === undefined) {
        wrapper = new ReadOnlyDiscardingClient(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

class ReadOnlyDiscardingClient implements PostgresPoolClient {
  readonly #client: PoolClient;
  #readOnly = false;

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
      if ((error as { code?: unknown } | null)?.code === READ_ONLY_SQLSTATE) this.#readOnly = true;
      throw error;
    });
  }

  release(destroy?: boolean): void {
    this.#client.release(destroy === true || this.#readOnly);
  }
}
