/**
 * Whether a store operation failed because the store cannot be reached or written now (an
 * outage: retried, answered 503 `store_unavailable`) rather than for good (a bug, a row the
 * store refuses). Shared by the HTTP edge (api/errors.ts) and the charges a server owes
 * (billing/open-charge-journal.ts).
 */
import { isSqliteUnavailable } from "./sqlite/explain-sqlite-error.ts";

/**
 * SQLSTATE codes of a PostgreSQL that cannot answer now, on a connection that still works: a
 * statement cancelled by the store's own `statement_timeout` (see `openPostgresStore`); one
 * that cannot write now: its disk full, out of memory, an I/O error, or a read-only server (a
 * standby, reached after a failover); and a database changed under the server: its schema or a
 * table gone (dropped, renamed, a restore under way), or the role's rights on them taken away.
 * Those were 500 `internal_error` while `/ready` said the store did not answer; a migrated
 * store's statements name only tables it made, so no bug of ours hides behind them.
 */
const UNAVAILABLE_SQLSTATES = new Set([
  "57014",
  "53100",
  "53200",
  "58030",
  "25006",
  "42P01",
  "3F000",
  "42501",
]);

/**
 * SQLSTATE codes of a PostgreSQL that is going away or cannot take the connection (besides the
 * 08 class, connection exceptions): admin and crash shutdown, "cannot connect now" (starting up
 * or recovering), too many connections.
 */
const CONNECTION_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300"]);

/** Socket failures of the store's connection, as `pg` reports them. */
const UNAVAILABLE_SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
]);

/**
 * `pg`'s own errors for a connection that broke or never came (they carry no code): the server
 * closed it, the pool's `connectionTimeoutMillis` passed, or the store's `query_timeout` did.
 */
const UNAVAILABLE_PG_MESSAGE =
  /^(?:Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error and is not queryable)/;

/**
 * True when `error` says the store cannot be reached or cannot answer now, as opposed to a bug:
 * a PostgreSQL connection refused, cut or timed out, or SQLite still locked after its busy
 * timeout, its disk full or failing, its file made read-only. Only the error itself and the members of an `AggregateError` (a refused connection
 * tried on several addresses) are looked at, never `cause`: an upstream model's failed `fetch`
 * carries socket codes in its cause and is no store outage.
 */
export function isStoreUnavailable(error: unknown): boolean {
  if (error instanceof AggregateError && error.errors.some((each: unknown) => isStoreUnavailable(each))) {
    return true;
  }
  if (!(error instanceof Error)) return false;
  const fields = error as Error & { code?: unknown };
  if (typeof fields.code === "string") {
    if (UNAVAILABLE_SQLSTATES.has(fields.code)) return true;
    if (fields.code === "ERR_SQLITE_ERROR") return isSqliteUnavailable(error);
  }
  return isPostgresConnectionLost(error);
}

/**
 * True when `error` says the connection to PostgreSQL broke, never came, or stopped answering
 * (the 08 class, a server shutting down or starting, too many connections, a socket failure,
 * `pg`'s own "Connection terminated" and timeouts), as opposed to an error PostgreSQL answered
 * on a working connection. What such a connection was doing when it broke (a commit under way)
 * may or may not have been done: the CLI says so (admin/explain-store-failure.ts).
 */
export function isPostgresConnectionLost(error: unknown): boolean {
  if (
    error instanceof AggregateError &&
    error.errors.some((each: unknown) => isPostgresConnectionLost(each))
  ) {
    return true;
  }
  if (!(error instanceof Error)) return false;
  const fields = error as Error & { code?: unknown };
  if (typeof fields.code === "string") {
    if (fields.code.startsWith("08") && fields.code.length === 5) return true;
    if (CONNECTION_SQLSTATES.has(fields.code) || UNAVAILABLE_SOCKET_CODES.has(fields.code)) return true;
  }
  return UNAVAILABLE_PG_MESSAGE.test(error.message);
}
