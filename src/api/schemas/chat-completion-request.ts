import { type Static, Type } from "@sinclair/typebox";
import { Nullable, StringEnum } from "./schema-helpers.ts";
import { UPSTREAM_EXTRA_FIELDS } from "./upstream-extra-fields.ts";

/**
 * The body of `POST /v1/chat/completions` as JSON Schema (typebox). It validates types and
 * ranges; rules that span fields (a `tool` message needs `tool_call_id`, a named `tool_choice`
 * must name a tool) live in `convert-chat-request.ts`. Unknown fields are ignored (SPEC section 4;
 * OpenAI refuses them, but clients send fields newer than this list);
 * OpenAI's fields that only an upstream server acts on are listed (upstream-extra-fields.ts) and
 * passed on to upstream models as sent.
 */

/** The most tokens a request may ask for: 2^31 - 1. */
export const MAX_TOKEN_COUNT = 2_147_483_647;

const TextContentPart = Type.Object(
  {
    type: Type.String({
      description: 'Only "text" parts are supported, and "refusal" parts in assistant messages.',
    }),
    text: Type.Optional(Type.String()),
    refusal: Type.Optional(Type.String({ description: 'The text of a "refusal" part.' })),
  },
  { description: "A content part; Tollgate's models take text parts only (and an assistant's refusals)." },
);

const MessageContent = Type.Union([Type.String(), Type.Array(TextContentPart), Type.Null()], {
  description:
    "The message text, or an array of text parts. May be null on an assistant message with tool_calls.",
});

/**
 * Longest tool call id: ids are tens of characters; a local prompt renders them, and megabytes of
 * one held the event loop for seconds.
 */
const MAX_TOOL_CALL_ID_LENGTH = 1024;
/** Longest tool description: a long manual fits; it is rendered into a local model's prompt whole. */
const MAX_TOOL_DESCRIPTION_LENGTH = 32 * 1024;

const ToolCallInMessage = Type.Object({
  id: Type.String({ maxLength: MAX_TOOL_CALL_ID_LENGTH }),
  type: Type.Optional(Type.Literal("function")),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});

export const ChatMessageSchema = Type.Object({
  role: StringEnum(["system", "developer", "user", "assistant", "tool"], {
    description: "`developer` is treated as `system`.",
  }),
  content: Type.Optional(MessageContent),
  // Null as absent, inside messages as at the top: a message stored as a client library dumps it
  // (openai-python's `model_dump()`: `"tool_calls": None`, `"name": None`) comes back so.
  name: Type.Optional(
    Nullable(
      Type.String({
        maxLength: 256,
        description: "The participant's name: passed on to upstream models; local models ignore it.",
      }),
    ),
  ),
  refusal: Type.Optional(
    Nullable(
      Type.String({
        description:
          "An assistant message's refusal, as OpenAI answers one (its content then null): taken as what the assistant said.",
      }),
    ),
  ),
  tool_calls: Type.Optional(Nullable(Type.Array(ToolCallInMessage))),
  tool_call_id: Type.Optional(Nullable(Type.String({ maxLength: MAX_TOOL_CALL_ID_LENGTH }))),
});

export const ToolSchema = Type.Object({
  type: Type.Literal("function"),
  function: Type.Object({
    name: Type.String({ minLength: 1, maxLength: 64, pattern: "^[a-zA-Z0-9_-]+$" }),
    description: Type.Optional(Nullable(Type.String({ maxLength: MAX_TOOL_DESCRIPTION_LENGTH }))),
    parameters: Type.Optional(Nullable(Type.Object({}, { additionalProperties: true }))),
    strict: Type.Optional(Nullable(Type.Boolean())),
  }),
});

const NamedToolChoice = Type.Object({
  type: Type.Literal("function"),
  function: Type.Object({ name: Type.String() }),
});

export const ToolChoiceSchema = Type.Union([StringEnum(["none", "auto", "required"]), NamedToolChoice]);

export const ResponseFormatSchema = Type.Object({
  type: StringEnum(["text", "json_object", "json_schema"]),
  json_schema: Type.Optional(
    Type.Object({
      name: Type.String({ minLength: 1, maxLength: 64, pattern: "^[a-zA-Z0-9_-]+$" }),
      description: Type.Optional(Nullable(Type.String())),
      schema: Type.Optional(Nullable(Type.Object({}, { additionalProperties: true }))),
      strict: Type.Optional(Nullable(Type.Boolean())),
    }),
  ),
});

export const ChatCompletionRequestSchema = Type.Object(
  {
    model: Type.String({ description: "A model id from `GET /v1/models`." }),
    messages: Type.Array(ChatMessageSchema, { minItems: 1 }),
    temperature: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 2, default: 1 }))),
    top_p: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 1, default: 1 }))),
    frequency_penalty: Type.Optional(Nullable(Type.Number({ minimum: -2, maximum: 2, default: 0 }))),
    presence_penalty: Type.Optional(Nullable(Type.Number({ minimum: -2, maximum: 2, default: 0 }))),
    // The contract leaves the upper bound open; a signed 32-bit count is what llama.cpp and the
    // upstream servers take, and keeps token arithmetic (reservations, rate limits) exact.
    max_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: MAX_TOKEN_COUNT }))),
    max_completion_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: MAX_TOKEN_COUNT }))),
    n: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 128, default: 1 }))),
    stream: Type.Optional(Nullable(Type.Boolean({ default: false }))),
    stream_options: Type.Optional(
      Nullable(Type.Object({ include_usage: Type.Optional(Nullable(Type.Boolean())) })),
    ),
    stop: Type.Optional(
      Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 4 }), Type.Null()], {
        description: "Up to 4 sequences where generation stops; the sequence is not returned.",
      }),
    ),
    tools: Type.Optional(Nullable(Type.Array(ToolSchema, { maxItems: 128 }))),
    tool_choice: Type.Optional(Type.Union([ToolChoiceSchema, Type.Null()])),
    parallel_tool_calls: Type.Optional(Nullable(Type.Boolean())),
    reasoning_effort: Type.Optional(
      Nullable(
        Type.String({
          minLength: 1,
          maxLength: 32,
          description:
            "How hard a reasoning model thinks (`minimal`, `low`, `medium`, `high`, ...): passed on to upstream models as sent; local models ignore it.",
        }),
      ),
    ),
    response_format: Type.Optional(Type.Union([ResponseFormatSchema, Type.Null()])),
    // JSON numbers are read as doubles: a larger seed would go on rounded, silently another seed
    // (2^63 - 1 would even become 2^63, which strict upstreams refuse).
    seed: Type.Optional(
      Nullable(Type.Integer({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })),
    ),
    user: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
    logprobs: Type.Optional(
      Nullable(
        Type.Boolean({
          default: false,
          description:
            "Return the log probability of each output token (`choices[].logprobs`). Upstream models pass on what their server gives; local models cannot give them, and a request that asks for them is refused with 400 `invalid_value`.",
        }),
      ),
    ),
    top_logprobs: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: 20,
          description:
            "How many of the most likely tokens to return at each position, with their log probabilities; needs `logprobs: true`.",
        }),
      ),
    ),
    ...UPSTREAM_EXTRA_FIELDS,
    // Listed so that they are refused rather than ignored (convert-chat-request.ts): a legacy
    // client would get plain text where it expects a function call.
    functions: Type.Optional(
      Type.Unknown({
        description:
          "Legacy function calling: refused with 400 `invalid_value`; send `tools` (and `tool_choice`) instead.",
      }),
    ),
    function_call: Type.Optional(
      Type.Unknown({
        description:
          "Legacy function calling: refused with 400 `invalid_value`; send `tool_choice` (with `tools`) instead.",
      }),
    ),
  },
  { additionalProperties: true },
);

export type ChatCompletionRequestBody = Static<typeof ChatCompletionRequestSchema>;
export type ChatMessageBody = Static<typeof ChatMessageSchema>;
