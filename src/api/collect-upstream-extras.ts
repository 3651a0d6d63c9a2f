import type { UpstreamExtras } from "../engine/engine.ts";
import { AppError } from "../errors/app-error.ts";
import { shownValue } from "../errors/shown-value.ts";
import type { ChatCompletionRequestBody } from "./schemas/chat-completion-request.ts";
import { UPSTREAM_EXTRA_FIELD_NAMES } from "./schemas/upstream-extra-fields.ts";

/** A token id as `logit_bias` keys it: a whole number, written as OpenAI's tokenizers number them. */
const TOKEN_ID = /^(0|[1-9][0-9]{0,9})$/;
/** OpenAI's bound on a `metadata` key. */
const MAX_METADATA_KEY_LENGTH = 64;

/**
 * The fields of a schema-valid body that only an upstream server acts on (upstream-extra-fields.ts),
 * as sent, or `undefined` when it sent none (null is none). A body without any allocates nothing:
 * the list is walked by index, and the bag is made only for a field that is there.
 */
export function collectUpstreamExtras(body: ChatCompletionRequestBody): UpstreamExtras | undefined {
  const fields = body as Record<string, unknown>;
  let extras: Record<string, unknown> | undefined;
  for (let index = 0; index < UPSTREAM_EXTRA_FIELD_NAMES.length; index++) {
    const name = UPSTREAM_EXTRA_FIELD_NAMES[index] as string;
    const value = fields[name];
    if (value === undefined || value === null) continue;
    extras ??= {};
    extras[name] = value;
  }
  if (extras !== undefined) checkKeys(extras);
  return extras;
}

/**
 * Upstream processing tiers a client may choose: those that cost the operator no more than the
 * model's price assumes. `priority` (and `scale`) bill the operator's upstream account more, at
 * the same catalogue price to the client.
 */
const PASSED_SERVICE_TIERS = new Set(["auto", "default", "flex"]);

/**
 * What the schema leaves to code: the keys of `logit_bias` and `metadata`; the service tiers a
 * client may choose; `store: true`, which would keep the client's conversation in the
 * operator's upstream account (OpenAI's stored completions), not the client's; and `modalities`
 * other than text: Tollgate renders text answers only, so an upstream's audio would be dropped,
 * its tokens billed to the operator at audio rates and to the client at the model's text price.
 */
function checkKeys(extras: Record<string, unknown>): void {
  const tier = extras.service_tier;
  if (typeof tier === "string" && !PASSED_SERVICE_TIERS.has(tier)) {
    throw new AppError(
      "invalid_value",
      `Invalid value for 'service_tier': '${shownValue(tier)}' is not passed on (it would bill the operator's upstream account more than this model's price covers); send auto, default or flex, or leave it out.`,
      { param: "service_tier" },
    );
  }
  if (extras.store === true) {
    throw new AppError(
      "invalid_value",
      "Invalid value for 'store': true is refused (this service keeps no conversation for you, and an upstream model's server would keep it in the account of this service's operator, not yours); leave it out or send false.",
      { param: "store" },
    );
  }
  const modalities = extras.modalities as readonly string[] | undefined;
  if (modalities !== undefined && (modalities.length === 0 || modalities.some((kind) => kind !== "text"))) {
    throw new AppError(
      "invalid_value",
      `Invalid value for 'modalities': Tollgate answers with text only, not ${shownValue(JSON.stringify(modalities))} (an upstream model's audio would be dropped, yet billed); set it to ["text"] or leave it out.`,
      { param: "modalities" },
    );
  }
  const bias = extras.logit_bias as Record<string, unknown> | undefined;
  if (bias !== undefined) {
    for (const key of Object.keys(bias)) {
      if (!TOKEN_ID.test(key)) {
        throw new AppError(
          "invalid_value",
          `Invalid value for 'logit_bias': its keys are token ids (whole numbers as strings, such as "50256"), not '${shownValue(key)}'.`,
          { param: "logit_bias" },
        );
      }
    }
  }
  const metadata = extras.metadata as Record<string, unknown> | undefined;
  if (metadata !== undefined) {
    for (const key of Object.keys(metadata)) {
      if (key.length > MAX_METADATA_KEY_LENGTH) {
        throw new AppError(
          "invalid_value",
          `Invalid value for 'metadata': its keys are at most ${MAX_METADATA_KEY_LENGTH} characters; '${shownValue(key)}' is longer.`,
          { param: "metadata" },
        );
      }
    }
  }
}
