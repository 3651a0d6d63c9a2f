import { ChatCompletionRequestSchema } from "./schemas/chat-completion-request.ts";
import {
  ChatCompletionChunkSchema,
  ChatCompletionSchema,
  ErrorResponseSchema,
  ModelListSchema,
  ModelSchema,
} from "./schemas/response-schemas.ts";

/** Strips typebox's symbol keys and `undefined`s: what remains is plain JSON Schema. */
function toJson(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema));
}

const reference = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function errorResponses(statuses: Record<string, string>) {
  return Object.fromEntries(
    Object.entries(statuses).map(([status, description]) => [
      status,
      { description, content: { "application/json": { schema: reference("ErrorResponse") } } },
    ]),
  );
}

/**
 * The OpenAPI 3.1 document of the public API, built from the same schemas that validate
 * requests, so the two cannot drift apart.
 */
export function createOpenApiDocument(options: { version: string }): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "Tollgate",
      version: options.version,
      description:
        "Self-hosted, OpenAI-compatible chat completions behind API keys, balances and rate limits.",
    },
    components: {
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "`sk-tg-...` API key" } },
      schemas: {
        ChatCompletionRequest: toJson(ChatCompletionRequestSchema),
        ChatCompletion: toJson(ChatCompletionSchema),
        ChatCompletionChunk: toJson(ChatCompletionChunkSchema),
        Model: toJson(ModelSchema),
        ModelList: toJson(ModelListSchema),
        ErrorResponse: toJson(ErrorResponseSchema),
      },
    },
    security: [{ bearerAuth: [] }],
    paths: {
      "/v1/chat/completions": {
        post: {
          operationId: "createChatCompletion",
          summary: "Creates a model response for a conversation, plain or streamed.",
          requestBody: {
            required: true,
            content: { "application/json": { schema: reference("ChatCompletionRequest") } },
          },
          responses: {
            "200": {
              description: "A completion, or with `stream: true` a Server-Sent Events stream of chunks.",
              content: {
                "application/json": { schema: reference("ChatCompletion") },
                "text/event-stream": { schema: reference("ChatCompletionChunk") },
              },
            },
            ...errorResponses({
              "400": "Invalid request",
              "401": "Missing or invalid API key",
              "403": "Model not allowed for the key, or balance too low",
              "404": "Unknown model",
              "413": "Request body too large",
              "429": "Rate limit exceeded",
              "500": "Server error",
              "503": "Model overloaded or unavailable",
            }),
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "listModels",
          summary: "Lists the models the key may use.",
          responses: {
            "200": {
              description: "The models",
              content: { "application/json": { schema: reference("ModelList") } },
            },
            ...errorResponses({ "401": "Missing or invalid API key", "500": "Server error" }),
          },
        },
      },
      "/v1/models/{model_id}": {
        get: {
          operationId: "retrieveModel",
          summary: "Retrieves one model; ids may contain `/` and `:`.",
          parameters: [{ name: "model_id", in: "path", required: true, schema: { type: "string" } }],
          responses: {
            "200": {
              description: "The model",
              content: { "application/json": { schema: reference("Model") } },
            },
            ...errorResponses({
              "401": "Missing or invalid API key",
              "404": "Unknown model",
              "500": "Server error",
            }),
          },
        },
      },
      "/health": {
        get: {
          operationId: "health",
          security: [],
          responses: { "200": { description: "The process is alive." } },
        },
      },
      "/ready": {
        get: {
          operationId: "ready",
          security: [],
          responses: {
            "200": {
              description: "The store is reachable and every local model is loaded or marked unavailable.",
            },
            "503": { description: "Not ready yet." },
          },
        },
      },
    },
  };
}
