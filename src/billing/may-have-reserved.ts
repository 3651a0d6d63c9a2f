/**
 * Whether a reserve that failed with `error` may all the same have taken its money: its statement
 * reached the store, or may have, and no answer came back. pg gives up on a statement after its
 * `query_timeout` while the statement still sits in the connection's socket (a database that
 * hangs runs it once it resumes), and a connection that broke mid-statement may have committed
 * it. A refused or timed-out connection, or a statement the server cancelled or rolled back,
 * took nothing.
 */
export function mayHaveReserved(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = "code" in error && typeof error.code === "string" ? error.code : undefined;
  if (code !== undefined && UNCLEAR_CODES.has(code)) return true;
  return UNCLEAR_MESSAGE.test(error.message);
}

/** A connection that broke under a statement: a socket failure, or PostgreSQL's `connection_failure`. */
const UNCLEAR_CODES = new Set(["ECONNRESET", "EPIPE", "ETIMEDOUT", "08006"]);

/** pg's own: it stopped waiting for the answer, or the connection ended under the statement. */
const UNCLEAR_MESSAGE = /^(?:Query read timeout|Connection terminated unexpectedly)/;
