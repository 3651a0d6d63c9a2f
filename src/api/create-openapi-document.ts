import { adminComponentSchemas, adminPaths } from "./openapi-admin-paths.ts";
import { chatCompletionPath } from "./openapi-chat-completion-path.ts";
import { HEADER_COMPONENTS, RATE_LIMIT_HEADERS } from "./openapi-headers.ts";
import {
  ANY_REQUEST_ERRORS,
  errorResponses,
  json,
  KEY_ERROR,
  reference,
  response,
  SHUTTING_DOWN,
  STORE_UNAVAILABLE,
  toJson,
} from "./openapi-responses.ts";
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
        ...adminComponentSchemas(),
      },
    },
    security: [{ bearerAuth: [] }],
    paths: {
      "/v1/chat/completions": chatCompletionPath(),
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
      ...adminPaths(),
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
              "The store is reachable, no charge waits for it to take writes, and every local model of the start is loaded or marked unavailable.",
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
          summary:
            "Prometheus metrics: requests, latencies, tokens, cost, queue depth, in-flight requests, upstream attempts and fallbacks.",
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
