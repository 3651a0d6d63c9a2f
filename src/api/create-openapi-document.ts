import type { TObject } from "@sinclair/typebox";
import {
  HEADER_COMPONENTS,
  headerReference,
  RATE_LIMIT_HEADERS,
  type ResponseHeaders,
} from "./openapi-headers.ts";
import { UpdateKeyBody } from "./routes/admin-key-update.ts";
import {
  AccountsQuery,
  CreateAccountBody,
  CreateKeyBody,
  CreditBody,
  IdParams,
  KeysQuery,
  UsageQuery,
} from "./schemas/admin-request-schemas.ts";
import {
  AdminAccountListSchema,
  AdminAccountSchema,
  AdminCreatedKeySchema,
  AdminCreditSchema,
  AdminKeyListSchema,
  AdminKeySchema,
  AdminRevokedKeySchema,
  AdminUsageGroupsSchema,
  AdminUsagePageSchema,
} from "./schemas/admin-response-schemas.ts";
import { ChatCompletionRequestSchema } from "./schemas/chat-completion-request.ts";
import {
  ChatCompletionChunkSchema,
  ChatCompletionSchema,
  ErrorResponseSchema,
  HealthSchema,
  ModelListSchema,
  ModelSchema,
  ReadinessSchema,
} from "./schemas/response-schemas.ts";

/** Strips typebox's symbol keys and `undefined`s: what remains is plain JSON Schema. */
function toJson(schema: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

/**
 * An admin request body as the document shows it. The route refuses fields its schema does not
 * name (a typo must not silently drop a balance), with its own message rather than through the
 * schema: the document says so with `additionalProperties`.
 */
function closedBody(schema: TObject): Record<string, unknown> {
  return { ...toJson(schema), additionalProperties: false };
}

const reference = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** A response; every one carries `x-request-id`, whatever its status. */
function response(description: string, content?: Record<string, unknown>, headers: ResponseHeaders = {}) {
  return {
    description,
    headers: { "x-request-id": headerReference("XRequestId"), ...headers },
    ...(content === undefined ? {} : { content }),
  };
}

function json(schema: unknown) {
  return { "application/json": { schema } };
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
function errorResponses(statuses: Record<string, string>, options: ErrorResponseOptions = {}) {
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
const ANY_REQUEST_ERRORS = {
  "400": "`invalid_http_request`: the request is not valid HTTP/1.1, or a `%` in its path starts no escape.",
  "408":
    "`request_timeout`: the request's headers (within a minute) or its whole body (within five minutes) did not arrive in full.",
  "431": "`headers_too_large`: the request's headers are over 16 KiB.",
  "500": "`internal_error`: the server failed; retry.",
};

const KEY_ERROR = "`invalid_api_key`: the key is missing, malformed, unknown, revoked or expired.";
const STORE_UNAVAILABLE =
  "`store_unavailable`: the database cannot be reached; retry after `retry-after` seconds.";
const SHUTTING_DOWN = "`model_unavailable`: the server is shutting down; retry after `retry-after` seconds.";
const VALIDATION_CODES =
  "`invalid_json`, `invalid_content_type`, `missing_required_parameter`, `invalid_type`, `invalid_value` or `array_above_max_length` (`param` names the field)";

/**
 * The errors of a route under `/admin`: the admin key first (SPEC §11), then the request. Admin
 * keys have no rate limits: only a user key's 403 reports them.
 */
function adminErrors(statuses: Record<string, string> = {}) {
  return errorResponses(
    {
      ...ANY_REQUEST_ERRORS,
      "400": `${VALIDATION_CODES}; an unknown query parameter or body field is \`invalid_value\`. Or \`invalid_http_request\`.`,
      "401": KEY_ERROR,
      "403": "`admin_key_required`: the key is not an admin key.",
      "503": STORE_UNAVAILABLE,
      ...statuses,
    },
    { rateLimited: ["403"] },
  );
}

const REQUEST_TOO_LARGE = "`request_too_large`: the request body is over the server's limit.";

/** The query parameters of a route, from the schema it validates its query string with. */
function queryParameters(schema: TObject) {
  const required = new Set(schema.required ?? []);
  return Object.entries(toJson(schema.properties)).map(([name, property]) => ({
    name,
    in: "query",
    required: required.has(name),
    ...(typeof (property as { description?: unknown }).description === "string"
      ? { description: (property as { description: string }).description }
      : {}),
    schema: property,
  }));
}

/** The `{id}` path parameter of an admin route, from the schema the route validates it with. */
function idParameter(description: string) {
  return { name: "id", in: "path", required: true, description, schema: toJson(IdParams.properties.id) };
}

function jsonBody(name: string) {
  return { required: true, content: json(reference(name)) };
}

const adminSecurity = [{ adminKey: [] }];

/**
 * The `data` of each event of a streamed completion (`sse.ts`), as the stream's 200 shows it. An
 * error once the 200 is sent cannot change the status: it comes as an event of its own.
 */
const STREAM_EVENT_SCHEMA = {
  description:
    "With `stream: true`: Server-Sent Events, each `data: <JSON>` and a blank line. First the assistant's role with empty content, then the content and tool-call deltas, the chunk with `finish_reason` and, with `stream_options.include_usage`, a chunk with `choices: []` and the usage; then `data: [DONE]`, and the stream ends. An error after the stream started (`upstream_unavailable` when the upstream's answer breaks off, `model_unavailable` when the model is unloaded as the server shuts down or reloads, `internal_error`) comes instead of the finishing chunk and the usage, as one event whose data is the contract's error object `{error: {message, type, param, code}}`, followed by `data: [DONE]`.",
  anyOf: [reference("ChatCompletionChunk"), reference("ErrorResponse")],
};

/**
 * The OpenAPI 3.1 document of the HTTP API, built from the same schemas that validate
 * requests, so the two cannot drift apart.
 */
export function createOpenApiDocument(options: { version: string }): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "Tollgate",
      version: options.version,
      description:
        "Self-hosted, OpenAI-compatible chat completions behind API keys, balances and rate limits. Every error is `{error: {message, type, param, code}}`; a path that does not exist is answered 404 `not_found` (under `/admin`, only once the admin key is given). Every response carries `x-request-id`.",
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "`sk-tg-...` API key" },
        adminKey: {
          type: "http",
          scheme: "bearer",
          description:
            "The admin key (`sk-tg-...`, printed by `tollgate serve` when it makes one, or `admin_key` / `TOLLGATE_ADMIN_KEY`).",
        },
        metricsKey: {
          type: "http",
          scheme: "bearer",
          description: "The `metrics_key` of the config, when it sets one; otherwise `/metrics` is open.",
        },
      },
      headers: HEADER_COMPONENTS,
      schemas: {
        ChatCompletionRequest: toJson(ChatCompletionRequestSchema),
        ChatCompletion: toJson(ChatCompletionSchema),
        ChatCompletionChunk: toJson(ChatCompletionChunkSchema),
        Model: toJson(ModelSchema),
        ModelList: toJson(ModelListSchema),
        ErrorResponse: toJson(ErrorResponseSchema),
        Health: toJson(HealthSchema),
        Readiness: toJson(ReadinessSchema),
        CreateAccountRequest: closedBody(CreateAccountBody),
        CreditRequest: closedBody(CreditBody),
        CreateKeyRequest: closedBody(CreateKeyBody),
        UpdateKeyRequest: closedBody(UpdateKeyBody),
        Account: toJson(AdminAccountSchema),
        AccountList: toJson(AdminAccountListSchema),
        Credit: toJson(AdminCreditSchema),
        Key: toJson(AdminKeySchema),
        CreatedKey: toJson(AdminCreatedKeySchema),
        RevokedKey: toJson(AdminRevokedKeySchema),
        KeyList: toJson(AdminKeyListSchema),
        UsagePage: toJson(AdminUsagePageSchema),
        UsageGroups: toJson(AdminUsageGroupsSchema),
      },
    },
    security: [{ bearerAuth: [] }],
    paths: {
      "/v1/chat/completions": {
        post: {
          operationId: "createChatCompletion",
          summary: "Creates a model response for a conversation, plain or streamed.",
          requestBody: jsonBody("ChatCompletionRequest"),
          responses: {
            "200": response(
              "A completion, or with `stream: true` a Server-Sent Events stream of chunks.",
              {
                "application/json": { schema: reference("ChatCompletion") },
                "text/event-stream": { schema: STREAM_EVENT_SCHEMA },
              },
              {
                ...RATE_LIMIT_HEADERS,
                "cache-control": headerReference("CacheControl"),
                "x-accel-buffering": headerReference("XAccelBuffering"),
              },
            ),
            ...errorResponses(
              {
                ...ANY_REQUEST_ERRORS,
                "400": `${VALIDATION_CODES}; \`model_not_supported\` (a model of another kind); \`context_length_exceeded\`; or \`invalid_http_request\`.`,
                "401": KEY_ERROR,
                "403": "`model_not_allowed` (the key may not use the model) or `insufficient_balance`.",
                "404": "`model_not_found`.",
                "413": REQUEST_TOO_LARGE,
                "429": "`rate_limit_exceeded`: the key's requests or tokens per minute.",
                "503": `\`model_overloaded\` (the model's queue is full), \`upstream_unavailable\`, \`model_unavailable\` (not loaded, or the server is shutting down), \`store_unavailable\` or \`server_overloaded\` (as many request bodies held as memory allows); retry after \`retry-after\` seconds, unless \`x-should-retry: false\` says no retry can help (a local model that failed to load, until an operator replaces its file and reloads).`,
              },
              // Every answer once the key is known, whatever refuses the request after that.
              { rateLimited: ["400", "403", "404", "413", "429", "500", "503"], neverRetried503: true },
            ),
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "listModels",
          summary: "Lists the models the key may use.",
          responses: {
            "200": response("The models", json(reference("ModelList")), RATE_LIMIT_HEADERS),
            ...errorResponses({
              ...ANY_REQUEST_ERRORS,
              "401": KEY_ERROR,
              "503": `${STORE_UNAVAILABLE} Or ${SHUTTING_DOWN}`,
            }),
          },
        },
      },
      "/v1/models/{model_id}": {
        get: {
          operationId: "retrieveModel",
          summary: "Retrieves one model; ids may contain `/` and `:`.",
          parameters: [{ name: "model_id", in: "path", required: true, schema: { type: "string" } }],
          responses: {
            "200": response("The model", json(reference("Model")), RATE_LIMIT_HEADERS),
            ...errorResponses(
              {
                ...ANY_REQUEST_ERRORS,
                "401": KEY_ERROR,
                "404": "`model_not_found`: no such model, or the key may not use it.",
                "503": `${STORE_UNAVAILABLE} Or ${SHUTTING_DOWN}`,
              },
              { rateLimited: ["404"] },
            ),
          },
        },
      },
      "/admin/accounts": {
        post: {
          operationId: "createAccount",
          summary: "Opens an account.",
          security: adminSecurity,
          requestBody: jsonBody("CreateAccountRequest"),
          responses: {
            "201": response("The new account", json(reference("Account"))),
            ...adminErrors({ "413": REQUEST_TOO_LARGE }),
          },
        },
        get: {
          operationId: "listAccounts",
          summary: "Lists the accounts with their money, a page at a time, oldest first.",
          security: adminSecurity,
          parameters: queryParameters(AccountsQuery),
          responses: {
            "200": response("The accounts", json(reference("AccountList"))),
            ...adminErrors(),
          },
        },
      },
      "/admin/accounts/{id}": {
        get: {
          operationId: "retrieveAccount",
          summary: "Retrieves one account with its money.",
          security: adminSecurity,
          parameters: [idParameter("The account's name or id.")],
          responses: {
            "200": response("The account", json(reference("Account"))),
            ...adminErrors({ "404": "`not_found`: no account has this name or id." }),
          },
        },
      },
      "/admin/accounts/{id}/credits": {
        post: {
          operationId: "creditAccount",
          summary: "Adds money to an account's balance.",
          security: adminSecurity,
          parameters: [
            idParameter("The account's name or id."),
            {
              name: "Idempotency-Key",
              in: "header",
              required: false,
              description:
                "1 to 255 visible ASCII characters: a retry with the same key gets the credit it made instead of a second one.",
              schema: { type: "string", minLength: 1, maxLength: 255 },
            },
          ],
          requestBody: jsonBody("CreditRequest"),
          responses: {
            "201": response("The credit, and the account after it", json(reference("Credit")), {
              "idempotent-replayed": headerReference("IdempotentReplayed"),
            }),
            ...adminErrors({
              "404": "`not_found`: no account has this name or id.",
              "413": REQUEST_TOO_LARGE,
            }),
          },
        },
      },
      "/admin/keys": {
        post: {
          operationId: "createKey",
          summary: "Makes a user key for an account; the whole key is shown once, in this answer.",
          security: adminSecurity,
          requestBody: jsonBody("CreateKeyRequest"),
          responses: {
            "201": response("The new key, with its secret", json(reference("CreatedKey"))),
            ...adminErrors({
              "404": "`not_found`: no account has this name or id.",
              "413": REQUEST_TOO_LARGE,
            }),
          },
        },
        get: {
          operationId: "listKeys",
          summary: "Lists the keys, never their secrets, a page at a time, oldest first.",
          security: adminSecurity,
          parameters: queryParameters(KeysQuery),
          responses: {
            "200": response("The keys", json(reference("KeyList"))),
            ...adminErrors({ "404": "`not_found`: no account has this name or id." }),
          },
        },
      },
      "/admin/keys/{id}": {
        patch: {
          operationId: "updateKey",
          summary:
            "Changes a key's name, models, rate limits or expiry in place: the key's holder keeps it. Every replica uses the new settings within a second. A field left out keeps its value; null clears it.",
          security: adminSecurity,
          parameters: [
            idParameter(
              "The key's public id (the 12 lowercase letters and digits after `sk-tg-`). An admin key has no models or rate limits: only its name and expiry change.",
            ),
          ],
          requestBody: jsonBody("UpdateKeyRequest"),
          responses: {
            "200": response("The key with its new settings", json(reference("Key"))),
            ...adminErrors({
              "400": `${VALIDATION_CODES}; an unknown body field, a body with no field, or a revoked key (\`param: "id"\`; a revoked key cannot be changed) is \`invalid_value\`. Or \`invalid_http_request\`.`,
              "404": "`not_found`: no key has this public id.",
              "413": REQUEST_TOO_LARGE,
            }),
          },
        },
      },
      "/admin/keys/{id}/revoke": {
        post: {
          operationId: "revokeKey",
          summary: "Revokes a key; it stops working on every replica within a second. No body.",
          security: adminSecurity,
          parameters: [
            idParameter(
              "The key's public id (the 12 lowercase letters and digits after `sk-tg-`); an admin key cannot revoke itself here.",
            ),
          ],
          responses: {
            "200": response("The key, revoked", json(reference("RevokedKey"))),
            ...adminErrors({
              "404": "`not_found`: no key has this public id.",
              "413": REQUEST_TOO_LARGE,
            }),
          },
        },
      },
      "/admin/usage": {
        get: {
          operationId: "listUsage",
          summary: "Usage rows or totals, filtered, as JSON pages or as CSV.",
          security: adminSecurity,
          parameters: queryParameters(UsageQuery),
          responses: {
            "200": response("The usage", {
              "application/json": {
                schema: { anyOf: [reference("UsagePage"), reference("UsageGroups")] },
              },
              "text/csv": {
                schema: {
                  type: "string",
                  description:
                    "With `format=csv`: a header line, then one line per row (every row unless `limit` is given; the columns of the JSON rows, in order) or per group (the group, `account` when grouping by key, `requests`, `prompt_tokens`, `completion_tokens`, `cost`). Lines end with CRLF.",
                },
              },
            }),
            ...adminErrors({ "404": "`not_found`: no such account or key." }),
          },
        },
      },
      "/health": {
        get: {
          operationId: "health",
          security: [],
          responses: {
            "200": response("The process is alive.", json(reference("Health"))),
            ...errorResponses(ANY_REQUEST_ERRORS),
          },
        },
      },
      "/ready": {
        get: {
          operationId: "ready",
          security: [],
          responses: {
            "200": response(
              "The store is reachable and every local model is loaded or marked unavailable.",
              json(reference("Readiness")),
            ),
            "503": response(
              "Not ready yet, or shutting down: `reasons` says why.",
              json(reference("Readiness")),
            ),
            ...errorResponses(ANY_REQUEST_ERRORS),
          },
        },
      },
      "/metrics": {
        get: {
          operationId: "metrics",
          summary: "Prometheus metrics: requests, latencies, tokens, cost, queue depth, in-flight requests.",
          // Open unless the config sets `metrics_key`.
          security: [{}, { metricsKey: [] }],
          responses: {
            "200": response("The metrics in Prometheus' text format.", {
              "text/plain": { schema: { type: "string" } },
            }),
            ...errorResponses({
              ...ANY_REQUEST_ERRORS,
              "401": "`invalid_api_key`: the config sets `metrics_key` and the request does not carry it.",
            }),
          },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openApiDocument",
          summary: "This document.",
          security: [],
          responses: {
            "200": response("The OpenAPI 3.1 document.", json({ type: "object" })),
            ...errorResponses(ANY_REQUEST_ERRORS),
          },
        },
      },
    },
  };
}
