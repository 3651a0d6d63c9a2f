import { Type } from "@sinclair/typebox";
import { Nullable } from "./schema-helpers.ts";

/**
 * OpenAI chat-completion fields that Tollgate does not act on itself but an upstream model's
 * server does (flex pricing, prompt caching, token biases, predicted outputs, ...): validated only
 * loosely for shape, so that garbage cannot reach the upstream or break the gateway, and passed
 * on as sent (ChatRequest.upstreamExtras). Adding one is one entry here. `null` is "not sent".
 * What a local model cannot apply is refused there (refuse-local-extras.ts); the rest it ignores.
 * Key rules that JSON Schema would word badly (token ids, metadata key lengths) are checked in
 * collect-upstream-extras.ts.
 */
export const UPSTREAM_EXTRA_FIELDS = {
  logit_bias: Type.Optional(
    Nullable(
      Type.Object(
        {},
        {
          additionalProperties: Type.Number({ minimum: -100, maximum: 100 }),
          maxProperties: 300,
          description:
            "Token id (an integer as a string) to a bias from -100 to 100, at most 300 entries: passed on to upstream models as sent. Refused for local models (the ids are another tokenizer's).",
        },
      ),
    ),
  ),
  service_tier: Type.Optional(
    Nullable(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          "The upstream's processing tier: `auto`, `default` or `flex`, passed on to upstream models as sent (local models ignore it); others, such as `priority`, which bill the operator more than the model's price covers, are refused whatever the model. Tollgate's own price does not change with it.",
      }),
    ),
  ),
  prompt_cache_key: Type.Optional(
    Nullable(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        description:
          "Groups requests for the upstream's prompt cache: passed on to upstream models as sent; local models ignore it.",
      }),
    ),
  ),
  safety_identifier: Type.Optional(
    Nullable(
      Type.String({
        minLength: 1,
        maxLength: 256,
        description:
          "A stable identifier of the end user for the upstream's abuse detection: passed on to upstream models as sent; local models ignore it.",
      }),
    ),
  ),
  verbosity: Type.Optional(
    Nullable(
      Type.String({
        minLength: 1,
        maxLength: 32,
        description:
          "How long an answer the model should give (`low`, `medium`, `high`): passed on to upstream models as sent; local models ignore it.",
      }),
    ),
  ),
  store: Type.Optional(
    Nullable(
      Type.Boolean({
        description:
          "`false` is passed on to upstream models (local models ignore it); `true` is refused whatever the model: an upstream would keep the conversation in the account of the service's operator (OpenAI's stored completions).",
      }),
    ),
  ),
  metadata: Type.Optional(
    Nullable(
      Type.Object(
        {},
        {
          additionalProperties: Type.String({ maxLength: 512 }),
          maxProperties: 16,
          description:
            "At most 16 string values (keys up to 64 characters, values up to 512) the upstream keeps with a stored completion: passed on to upstream models as sent; local models ignore it.",
        },
      ),
    ),
  ),
  prediction: Type.Optional(
    Nullable(
      Type.Object(
        {
          type: Type.Literal("content"),
          content: Type.Union([
            Type.String(),
            Type.Array(Type.Object({ type: Type.Literal("text"), text: Type.String() })),
          ]),
        },
        {
          description:
            "Predicted output (OpenAI's predicted outputs: text most of the answer will repeat): passed on to upstream models as sent. Refused for local models, which do not apply it.",
        },
      ),
    ),
  ),
  modalities: Type.Optional(
    Nullable(
      Type.Array(Type.String({ minLength: 1, maxLength: 32 }), {
        maxItems: 8,
        description:
          'Output types asked for: Tollgate answers with text only, so `["text"]` alone is taken (passed on to upstream models as sent; local models ignore it); anything else, such as audio an upstream would produce and bill at its own rates, is refused whatever the model.',
      }),
    ),
  ),
};

/** The names of {@link UPSTREAM_EXTRA_FIELDS}, as a list walked per request without allocating. */
export const UPSTREAM_EXTRA_FIELD_NAMES: readonly string[] = Object.keys(UPSTREAM_EXTRA_FIELDS);
