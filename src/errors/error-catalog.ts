/**
 * Every error Tollgate answers with, in one place: stable code, HTTP status, wire type and
 * whether a client may retry. The wire shape is produced by `api/errors.ts` only.
 */
export const errorCatalog = {
  invalid_api_key: { status: 401, type: "invalid_request_error", retryable: false },
  admin_key_required: { status: 403, type: "permission_error", retryable: false },
  model_not_allowed: { status: 403, type: "permission_error", retryable: false },
  insufficient_balance: { status: 403, type: "insufficient_quota", retryable: false },
  model_not_found: { status: 404, type: "invalid_request_error", retryable: false },
  not_found: { status: 404, type: "invalid_request_error", retryable: false },
  invalid_json: { status: 400, type: "invalid_request_error", retryable: false },
  invalid_content_type: { status: 400, type: "invalid_request_error", retryable: false },
  missing_required_parameter: { status: 400, type: "invalid_request_error", retryable: false },
  invalid_type: { status: 400, type: "invalid_request_error", retryable: false },
  invalid_value: { status: 400, type: "invalid_request_error", retryable: false },
  array_above_max_length: { status: 400, type: "invalid_request_error", retryable: false },
  model_not_supported: { status: 400, type: "invalid_request_error", retryable: false },
  context_length_exceeded: { status: 400, type: "invalid_request_error", retryable: false },
  request_too_large: { status: 413, type: "invalid_request_error", retryable: false },
  headers_too_large: { status: 431, type: "invalid_request_error", retryable: false },
  invalid_http_request: { status: 400, type: "invalid_request_error", retryable: false },
  request_timeout: { status: 408, type: "invalid_request_error", retryable: true },
  rate_limit_exceeded: { status: 429, type: "rate_limit_error", retryable: true },
  model_overloaded: { status: 503, type: "server_error", retryable: true },
  upstream_unavailable: { status: 503, type: "server_error", retryable: true },
  model_unavailable: { status: 503, type: "server_error", retryable: true },
  store_unavailable: { status: 503, type: "server_error", retryable: true },
  server_overloaded: { status: 503, type: "server_error", retryable: true },
  // Code that builds an `internal_error` logs the fault itself first (with its stack, the request
  // id and what only it knows): the edge logs only faults thrown as they were (build-app.ts).
  internal_error: { status: 500, type: "server_error", retryable: true },
} as const satisfies Record<string, { status: number; type: string; retryable: boolean }>;

/** A stable error code, as sent in `error.code`. */
export type ErrorCode = keyof typeof errorCatalog;
