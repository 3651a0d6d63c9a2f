import { hideKeySecrets } from "../admin/read-key-reference.ts";
import { AppError, isAppError } from "../errors/app-error.ts";
import { isStoreUnavailable } from "../store/is-store-unavailable.ts";
import { mapValidationError, type SchemaValidationIssue } from "./map-validation-error.ts";
import { refuseInfiniteNumbers } from "./refuse-infinite-numbers.ts";
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
    return (
      refuseUnsupportedToolTypes(body) ??
      refuseInfiniteNumbers(framework.validation, body) ??
      mapValidationError(framework.validation, body)
    );
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
  if (isBodyAborted(error)) {
    return new AppError(
      "invalid_json",
      "The request body ended before its Content-Length: the connection closed.",
    );
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
export function bodyTooLarge(limitBytes: number | undefined): AppError {
  const limit = limitBytes === undefined ? "" : ` (at most ${limitBytes} bytes, the server's body_limit)`;
  return new AppError(
    "request_too_large",
    `The request body is larger than this server accepts${limit}; send a smaller one, such as a shorter conversation.`,
  );
}

/**
 * Node's error for a request whose client hung up while sending its body ("aborted", with
 * ECONNRESET but no system call): the client's doing. Its socket code made it look like a store
 * connection that broke, and each was logged as "the store is unavailable" (found by fuzzing).
 */
function isBodyAborted(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const fields = error as Error & { code?: unknown; syscall?: unknown };
  return fields.code === "ECONNRESET" && fields.message === "aborted" && fields.syscall === undefined;
}

/** Seconds a client is told to wait after a store outage: about what reconnecting takes. */
const STORE_RETRY_AFTER_SECONDS = 5;
