/**
 * The building blocks of the OpenAPI document's responses (create-openapi-document.ts): schema
 * references, responses with their headers, and the error responses with the descriptions the
 * paths share.
 */
import { headerReference, RATE_LIMIT_HEADERS, type ResponseHeaders } from "./openapi-headers.ts";

/** Strips typebox's symbol keys and `undefined`s: what remains is plain JSON Schema. */
export function toJson(schema: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

export const reference = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** A response; every one carries `x-request-id`, whatever its status. */
export function response(
  description: string,
  content?: Record<string, unknown>,
  headers: ResponseHeaders = {},
) {
  return {
    description,
    headers: { "x-request-id": headerReference("XRequestId"), ...headers },
    ...(content === undefined ? {} : { content }),
  };
}

export function json(schema: unknown) {
  return { "application/json": { schema } };
}

export function jsonBody(name: string) {
  return { required: true, content: json(reference(name)) };
}

/**
 * Extra headers of an error response by status (SPEC §4, `errors.ts`): no-retry on 403,
 * retry-after on 429 and 503, and no-retry on a 429 or 503 that waiting cannot cure (a request
 * above the key's token rate; a local model that failed to load, which only a chat request meets:
 * `neverRetried503`).
 */
function errorHeaders(status: string, options: { neverRetried503: boolean }): ResponseHeaders {
  const noRetry = { "x-should-retry": headerReference("XShouldRetry") };
  if (status === "403") return noRetry;
  if (status === "429") return { "retry-after": headerReference("RetryAfter"), ...noRetry };
  if (status === "503")
    return { "retry-after": headerReference("RetryAfter"), ...(options.neverRetried503 ? noRetry : {}) };
  return {};
}

/** Which error responses carry more than {@link errorHeaders} always gives their status. */
interface ErrorResponseOptions {
  /** Statuses a rate-limited key may be answered once authenticated: they report its limits. */
  rateLimited?: readonly string[];
  /** The 503 may come from a local model that failed to load: `x-should-retry: false`. */
  neverRetried503?: boolean;
}

/** Error responses in the contract's shape; each description names the codes the status carries. */
export function errorResponses(statuses: Record<string, string>, options: ErrorResponseOptions = {}) {
  return Object.fromEntries(
    Object.entries(statuses).map(([status, description]) => [
      status,
      response(description, json(reference("ErrorResponse")), {
        ...errorHeaders(status, { neverRetried503: options.neverRetried503 ?? false }),
        ...(options.rateLimited?.includes(status) ? RATE_LIMIT_HEADERS : {}),
      }),
    ]),
  );
}

/**
 * What any request can be answered, whatever its path: Node's HTTP parser and the request
 * timeout come before routing (`answer-client-error.ts`), and an unexpected failure is a 500.
 */
export const ANY_REQUEST_ERRORS = {
  "400": "`invalid_http_request`: the request is not valid HTTP/1.1, or a `%` in its path starts no escape.",
  "408":
    "`request_timeout`: the request's headers (within a minute) or its whole body (within five minutes) did not arrive in full, or its body stopped arriving for 30 seconds.",
  "431": "`headers_too_large`: the request's headers are over 16 KiB.",
  "500": "`internal_error`: the server failed; retry.",
};

export const KEY_ERROR = "`invalid_api_key`: the key is missing, malformed, unknown, revoked or expired.";
export const STORE_UNAVAILABLE =
  "`store_unavailable`: the database cannot be reached; retry after `retry-after` seconds.";
export const SHUTTING_DOWN =
  "`model_unavailable`: the server is shutting down; retry after `retry-after` seconds.";
export const VALIDATION_CODES =
  "`invalid_json`, `invalid_content_type`, `missing_required_parameter`, `invalid_type`, `invalid_value` or `array_above_max_length` (`param` names the field)";
export const REQUEST_TOO_LARGE = "`request_too_large`: the request body is over the server's limit.";
