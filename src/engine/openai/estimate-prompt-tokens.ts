import type { ChatRequest } from "../engine.ts";
import { estimateTextTokens } from "./estimate-tokens.ts";

/** Tokens a chat template adds around each message (role markers, separators), as OpenAI counts them. */
const TOKENS_PER_MESSAGE = 4;
/** Tokens that open the assistant's reply. */
const REPLY_PRIMING_TOKENS = 3;
/** Tokens a template adds once when the request offers tools (the tools' preamble). */
const TOOLS_PREAMBLE_TOKENS = 10;

/** A request's prompt tokens as Tollgate counts them before it runs (see {@link countPromptTokens}). */
export interface PromptTokenCounts {
  /** The estimate: what the token rate, the context check and unreported usage go by. */
  estimate: number;
  /** The most the request can count upstream: what prices its reservation. */
  atMost: number;
}

/**
 * Counts the prompt tokens of a request sent to an upstream model, before it runs, in one walk
 * over its texts, each counted two ways:
 *
 * - `estimate`: every message's text ({@link estimateTextTokens}) plus a few tokens of template per
 *   message, tool calls as their id, name and arguments (a tool message's call id too), and the
 *   tools' definitions as their JSON text (templates render them more compactly, so this errs on
 *   the high side). The response format's name, description and schema count too, as
 *   structured-output prompts include them: every text the upstream is sent counts.
 * - `atMost`: every text as its UTF-8 bytes (the same template tokens around them). Byte-level
 *   tokenizers (GPT's, Llama 3's, Qwen's) and SentencePiece with byte fallback never spend less
 *   than a byte on a token, so this holds whatever the text; the estimate does not: crafted text
 *   (combining marks, box drawing, symbols, emoji, letters in no language) counts 4-11x more tokens
 *   upstream than estimated, and since a cost above its reservation is charged only as far as the
 *   balance pays, concurrent requests could spend several times an account's balance. It reserves
 *   about 4.5x the estimate for English prose, which costs the reservation little beside its
 *   completion bound. Never below the estimate: no rule of estimateTextTokens counts more than a
 *   token per UTF-16 unit, and no character has fewer UTF-8 bytes than UTF-16 units.
 */
export function countPromptTokens(request: ChatRequest): PromptTokenCounts {
  let template = REPLY_PRIMING_TOKENS;
  let estimate = 0;
  let atMost = 0;
  const count = (text: string) => {
    estimate += estimateTextTokens(text);
    atMost += Buffer.byteLength(text, "utf8");
  };
  for (const message of request.messages) {
    template += TOKENS_PER_MESSAGE;
    if (message.content !== null) count(message.content);
    if (message.role !== "tool" && message.name !== undefined) count(message.name);
    // The ids go upstream too, and an upstream counts them (up to 1024 characters each): left out,
    // their bytes escaped the reservation and the context check, and an account whose requests
    // carried its prompt in them was charged the upstream's count only as far as its balance paid.
    if (message.role === "assistant") {
      for (const call of message.toolCalls ?? []) {
        template += TOKENS_PER_MESSAGE;
        count(call.id);
        count(call.name);
        count(call.arguments);
      }
    } else if (message.role === "tool") count(message.toolCallId);
  }
  if (request.tools.length > 0) {
    template += TOOLS_PREAMBLE_TOKENS;
    count(JSON.stringify(request.tools));
  }
  const format = request.responseFormat;
  if (format.type === "json_schema") {
    count(format.name);
    if (format.description !== undefined) count(format.description);
    count(JSON.stringify(format.schema));
  }
  return { estimate: template + estimate, atMost: template + atMost };
}

/** {@link countPromptTokens}'s estimate. */
export function estimatePromptTokens(request: ChatRequest): number {
  return countPromptTokens(request).estimate;
}

/** {@link countPromptTokens}'s bound, for pricing a reservation. */
export function countPromptTokensAtMost(request: ChatRequest): number {
  return countPromptTokens(request).atMost;
}
