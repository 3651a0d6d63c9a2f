import { Type } from "@sinclair/typebox";
import { COMPLETION_TOKENS_DETAILS, PROMPT_TOKENS_DETAILS } from "../../engine/engine.ts";
import { StringEnum } from "./schema-helpers.ts";

/**
 * The response shapes, for `/openapi.json`. The seed contract's fields plus SPEC §4's additions
 * (tool calls, the models' kind, pricing, context length and status).
 */

export const ErrorResponseSchema = Type.Object({
  error: Type.Object({
    message: Type.String(),
    type: Type.String(),
    param: Type.Union([Type.String(), Type.Null()]),
    code: Type.String(),
  }),
});

/** An upstream's breakdown of a count, where it gave one (OpenAI's names, each a whole number). */
function detailsSchema(names: readonly string[], description: string) {
  return Type.Optional(
    Type.Object(
      Object.fromEntries(names.map((name) => [name, Type.Optional(Type.Integer({ minimum: 0 }))])),
      {
        additionalProperties: false,
        description,
      },
    ),
  );
}

const UsageSchema = Type.Object({
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
  prompt_tokens_details: detailsSchema(
    PROMPT_TOKENS_DETAILS,
    "Upstream models only, as the upstream reported it (e.g. `cached_tokens`); the charge is by `prompt_tokens`.",
  ),
  completion_tokens_details: detailsSchema(
    COMPLETION_TOKENS_DETAILS,
    "Upstream models only, as the upstream reported it (e.g. `reasoning_tokens`); the charge is by `completion_tokens`.",
  ),
});

const FinishReasonSchema = StringEnum(["stop", "length", "tool_calls", "content_filter"]);

const ToolCallSchema = Type.Object({
  id: Type.String(),
  type: Type.Literal("function"),
  function: Type.Object({
    name: Type.String(),
    arguments: Type.String({ description: "A JSON object as text." }),
  }),
});

const TopLogprobSchema = Type.Object({
  token: Type.String(),
  logprob: Type.Number(),
  bytes: Type.Union([Type.Array(Type.Integer({ minimum: 0, maximum: 255 })), Type.Null()], {
    description: "The token's UTF-8 bytes; null where the upstream gave none.",
  }),
});

const TokenLogprobSchema = Type.Object({
  ...TopLogprobSchema.properties,
  top_logprobs: Type.Array(TopLogprobSchema, {
    description:
      "The most likely tokens at this position (`top_logprobs` of them, where the upstream gave them).",
  }),
});

/** A choice's log probabilities: null unless the request asked for them (upstream models only). */
const LogprobsSchema = Type.Union(
  [
    Type.Object({
      content: Type.Union([Type.Array(TokenLogprobSchema), Type.Null()]),
      refusal: Type.Union([Type.Array(TokenLogprobSchema), Type.Null()]),
    }),
    Type.Null(),
  ],
  {
    description:
      "With `logprobs: true` (upstream models only), the log probabilities of the tokens, as the upstream gave them; in a stream, those of each chunk's tokens. Null otherwise.",
  },
);

export const ChatCompletionSchema = Type.Object({
  id: Type.String(),
  object: Type.Literal("chat.completion"),
  created: Type.Integer({ description: "Unix time in seconds." }),
  model: Type.String(),
  choices: Type.Array(
    Type.Object({
      index: Type.Integer(),
      message: Type.Object({
        role: Type.Literal("assistant"),
        content: Type.String(),
        refusal: Type.Union([Type.String(), Type.Null()], {
          description: "The model's refusal when it declined to answer (an upstream's); null otherwise.",
        }),
        tool_calls: Type.Optional(Type.Array(ToolCallSchema)),
      }),
      logprobs: LogprobsSchema,
      finish_reason: FinishReasonSchema,
    }),
  ),
  usage: UsageSchema,
});

export const ChatCompletionChunkSchema = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("chat.completion.chunk"),
    created: Type.Integer(),
    model: Type.String(),
    choices: Type.Array(
      Type.Object({
        index: Type.Integer(),
        delta: Type.Object({
          role: Type.Optional(Type.Literal("assistant")),
          content: Type.Optional(Type.String()),
          refusal: Type.Optional(Type.String()),
          tool_calls: Type.Optional(
            Type.Array(
              Type.Object({
                index: Type.Integer(),
                id: Type.Optional(Type.String()),
                type: Type.Optional(Type.Literal("function")),
                function: Type.Object({ name: Type.Optional(Type.String()), arguments: Type.String() }),
              }),
            ),
          ),
        }),
        logprobs: LogprobsSchema,
        finish_reason: Type.Union([FinishReasonSchema, Type.Null()]),
      }),
    ),
    usage: Type.Optional(Type.Union([UsageSchema, Type.Null()])),
  },
  {
    description:
      "One Server-Sent Event `data: <chunk>`; the stream ends with `data: [DONE]`. An error after the stream started is sent as `data: {error}`.",
  },
);

export const ModelSchema = Type.Object({
  id: Type.String(),
  object: Type.Literal("model"),
  created: Type.Integer(),
  owned_by: Type.String(),
  kind: StringEnum(["chat", "image", "embedding"]),
  pricing: Type.Union([
    Type.Object({ input_per_million: Type.String(), output_per_million: Type.String() }),
    Type.Object({ per_million: Type.String() }),
  ]),
  context_length: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  status: StringEnum(["available", "loading", "unavailable"]),
});

export const ModelListSchema = Type.Object({
  object: Type.Literal("list"),
  data: Type.Array(ModelSchema),
});

export const HealthSchema = Type.Object({ status: Type.Literal("ok") });

export const ReadinessSchema = Type.Object({
  status: StringEnum(["ready", "not_ready"]),
  reasons: Type.Array(Type.String(), { description: "Why the server is not ready; empty when it is." }),
});
