import { AppError, isAppError } from "../errors/app-error.ts";
import { mapValidationError, type SchemaValidationIssue } from "./map-validation-error.ts";

/** The contract's error body: `{"error":{"message","type","param","code"}}`. */
export interface WireError {
  error: { message: string; type: string; param: string | null; code: string };
}

/** The one mapping from an {@link AppError} to the wire. */
export function toWireError(error: AppError): WireError {
  return {
    error: { message: error.message, type: error.type, param: error.param ?? null, code: error.code },
  };
}

/** Headers an error response carries besides the body: no-retry on 403, `retry-after` on 429 and 503. */
export function errorHeaders(error: AppError): Record<string, string> {
  if (error.status === 403) return { "x-should-retry": "false" };
  if (error.status === 429 || error.status === 503) {
    return { "retry-after": String(Math.max(1, Math.ceil(error.retryAfterSeconds ?? 1))) };
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
 * Errors that are not ours become `internal_error` with a message that leaks nothing.
 */
export function normalizeError(error: unknown): AppError {
  if (isAppError(error)) return error;
  const framework = (typeof error === "object" && error !== null ? error : {}) as FrameworkError;
  if (Array.isArray(framework.validation)) return mapValidationError(framework.validation);
  switch (framework.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new AppError("request_too_large", "The request body is larger than this server accepts.");
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
    return new AppError("request_too_large", "The request body is larger than this server accepts.");
  }
  return new AppError(
    "internal_error",
    "The server had an error while processing your request. Please retry.",
    {
      cause: error,
    },
  );
}
