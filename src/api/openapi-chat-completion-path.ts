/**
 * The `/v1/chat/completions` path of the OpenAPI document (create-openapi-document.ts): a
 * completion or its stream, and every error a chat request can meet.
 */
import { headerReference, RATE_LIMIT_HEADERS } from "./openapi-headers.ts";
import {
  ANY_REQUEST_ERRORS,
  errorResponses,
  jsonBody,
  KEY_ERROR,
  REQUEST_TOO_LARGE,
  reference,
  response,
  VALIDATION_CODES,
} from "./openapi-responses.ts";

/**
 * The `data` of each event of a streamed completion (`sse.ts`), as the stream's 200 shows it. An
 * error once the 200 is sent cannot change the status: it comes as an event of its own.
 */
const STREAM_EVENT_SCHEMA = {
  description:
    "With `stream: true`: Server-Sent Events, each `data: <JSON>` and a blank line. First the assistant's role with empty content, then the content and tool-call deltas (each with the log probabilities of its tokens where `logprobs: true` asked for them and the upstream gave them, else `logprobs: null`), the chunk with `finish_reason` and, with `stream_options.include_usage`, a chunk with `choices: []` and the usage; then `data: [DONE]`, and the stream ends. An error after the stream started (`upstream_unavailable` when the upstream's answer breaks off, `model_unavailable` when the model is unloaded as the server shuts down or reloads, `internal_error`) comes instead of the finishing chunk and the usage, as one event whose data is the contract's error object `{error: {message, type, param, code}}`, followed by `data: [DONE]`.",
  anyOf: [reference("ChatCompletionChunk"), reference("ErrorResponse")],
};

/** The path item of `/v1/chat/completions`. */
export function chatCompletionPath() {
  return {
    post: {
      operationId: "createChatCompletion",
      summary: "Creates a model response for a conversation, plain or streamed.",
      description:
        'OpenAI\'s fields that only an upstream server acts on (`logit_bias`, `service_tier`, `prompt_cache_key`, `safety_identifier`, `verbosity`, `store`, `metadata`, `prediction`, `modalities`) are checked for shape and passed on to upstream models as sent; `modalities` other than `["text"]`, a `service_tier` that bills the operator more (such as `priority`) and `store: true` are refused with 400 `invalid_value` whatever the model; a local model also refuses `logit_bias` and `prediction`, and ignores the others. Other fields Tollgate does not list are ignored.',
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
            "400": `${VALIDATION_CODES} (\`invalid_value\` too for what the model cannot do: \`n\` above 1, \`logprobs\`, \`logit_bias\` or \`prediction\` on a local model; \`modalities\` other than \`["text"]\`; and for legacy \`functions\` / \`function_call\`, which are not supported: send \`tools\` / \`tool_choice\`); \`model_not_supported\` (a model of another kind); \`context_length_exceeded\`; or \`invalid_http_request\`.`,
            "401": KEY_ERROR,
            "403": "`model_not_allowed` (the key may not use the model) or `insufficient_balance`.",
            "404": "`model_not_found`.",
            "413": REQUEST_TOO_LARGE,
            "429": "`rate_limit_exceeded`: the key's requests or tokens per minute.",
            "503": `\`model_overloaded\` (the model's queue is full), \`upstream_unavailable\`, \`model_unavailable\` (not loaded, or the server is shutting down), \`store_unavailable\` or \`server_overloaded\` (as many request bodies held as memory allows); retry after \`retry-after\` seconds, unless \`x-should-retry: false\` says no retry can help (a local model that failed to load, until an operator replaces its file and reloads; a download the server tries again by itself comes with \`retry-after\`).`,
          },
          // Every answer once the key is known, whatever refuses the request after that.
          { rateLimited: ["400", "403", "404", "413", "429", "500", "503"], neverRetried503: true },
        ),
      },
    },
  };
}
