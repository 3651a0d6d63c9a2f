import { hideKeySecrets } from "../admin/read-key-reference.ts";
import { AppError, isAppError } from "../errors/app-error.ts";
import { isSqliteUnavailable } from "../store/sqlite/explain-sqlite-error.ts";
import { mapValidationError, type SchemaValidationIssue } from "./map-validation-error.ts";
import { refuseUnsupportedToolTypes } from "./refuse-unsupported-tool-types.ts";

/** The contract's error body: `{"error":{"message","type","param","code"}}`. */
export interface WireError {
  error: { message: string; type: string; param: string | null; code: string };
}

/** The one mapping from an {@link AppError} to the wire. */
export function toWireError(error: AppError): WireError {
  // A key pasted where something else was expected (an amount, a date, a model) comes back in
  // the message that refuses it: never with its secret, whichever route wrote the message.
  return {
    error: {
      message: hideKeySecrets(error.message),
      type: error.type,
      param: error.param === undefined ? null : hideKeySecrets(error.param),
      code: error.code,
    },
  };
}

/**
 * Headers an error response carries besides the body (SPEC §4): `retry-after` on 429 and 503, and
 * `x-should-retry: false` on 403 and on a 429 that no wait can cure (OpenAI's SDKs obey it before
 * `retry-after`, which would have them wait and send the same request again).
 */
export function errorHeaders(error: AppError): Record<string, string> {
  if (error.status === 403) return { "x-should-retry": "false" };
  if (error.status === 429 || error.status === 503) {
    const retryAfter = String(Math.max(1, Math.ceil(error.retryAfterSeconds ?? 1)));
    return error.retryable
      ? { "retry-after": retryAfter }
      : { "retry-after": retryAfter, "x-should-retry": "false" };
  }
  return {};
}

interface FrameworkError {
  code?: string;
  statusCode?: number;
  validation?: SchemaValidationIssue[];
}

/**
 * Turns anything thrown while handling a request into the {@link AppError} the client sees.
 * Errors that are not ours become `internal_error` with a message that leaks nothing. `body`:
 * the request's parsed body, which explains some validation failures better than the schema's
 * first complaint (a tool of another kind than `function`).
 */
export function normalizeError(
  error: unknown,
  body?: unknown,
  limits: { bodyLimitBytes?: number | undefined } = {},
): AppError {
  if (isAppError(error)) return error;
  const framework = (typeof error === "object" && error !== null ? error : {}) as FrameworkError;
  if (Array.isArray(framework.validation))
    return refuseUnsupportedToolTypes(body) ?? mapValidationError(framework.validation);
  switch (framework.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return bodyTooLarge(limits.bodyLimitBytes);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new AppError(
        "invalid_content_type",
        "Unsupported Content-Type. Send the body as JSON with 'Content-Type: application/json'.",
      );
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new AppError("invalid_json", "The request body is empty; send a JSON object.");
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return new AppError("invalid_json", "The request body is not valid JSON.");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new AppError(
        "invalid_json",
        "The request body's length does not match its Content-Length header.",
      );
  }
  if (framework.statusCode === 413) {
    return bodyTooLarge(limits.bodyLimitBytes);
  }
  if (isStoreUnavailable(error)) {
    // The cause goes to the log only: it may name the database's host or user.
    return new AppError(
      "store_unavailable",
      "The server's database is unavailable at the moment. Please retry in a few seconds.",
      { retryAfterSeconds: STORE_RETRY_AFTER_SECONDS, cause: error },
    );
  }
  return new AppError(
    "internal_error",
    "The server had an error while processing your request. Please retry.",
    {
      cause: error,
    },
  );
}

/** The 413 of a body over the limit, naming the limit where it is known. */
function bodyTooLarge(limitBytes: number | undefined): AppError {
  const limit = limitBytes === undefined ? "" : ` (at most ${limitBytes} bytes, the server's body_limit)`;
  return new AppError(
    "request_too_large",
    `The request body is larger than this server accepts${limit}; send a smaller one, such as a shorter conversation.`,
  );
}

/** Seconds a client is told to wait after a store outage: about what reconnecting takes. */
const STORE_RETRY_AFTER_SECONDS = 5;

/**
 * SQLSTATE codes of a PostgreSQL that is going away or cannot take the connection: the 08 class
 * (connection exceptions), admin and crash shutdown, "cannot connect now" (starting up or
 * recovering), too many connections, a statement cancelled by the store's own
 * `statement_timeout` (see `openPostgresStore`); and one that cannot write now: its disk full,
 * out of memory, an I/O error, or a read-only server (a standby, reached after a failover).
 */
const UNAVAILABLE_SQLSTATES = new Set([
  "57P01",
  "57P02",
  "57P03",
  "53300",
  "57014",
  "53100",
  "53200",
  "58030",
  "25006",
]);

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
function isStoreUnavailable(error: unknown): boolean {
  if (error instanceof AggregateError && error.errors.some((each: unknown) => isStoreUnavailable(each))) {
    return true;
  }
  if (!(error instanceof Error)) return false;
  const fields = error as Error & { code?: unknown };
  if (typeof fields.code === "string") {
    if (fields.code.startsWith("08") && fields.code.length === 5) return true;
    if (UNAVAILABLE_SQLSTATES.has(fields.code) || UNAVAILABLE_SOCKET_CODES.has(fields.code)) return true;
    if (fields.code === "ERR_SQLITE_ERROR") return isSqliteUnavailable(error);
  }
  return UNAVAILABLE_PG_MESSAGE.test(error.message);
}
