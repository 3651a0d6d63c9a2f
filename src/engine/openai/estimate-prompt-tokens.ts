import type { ChatRequest } from "../engine.ts";
import { estimateTextTokens } from "./estimate-tokens.ts";

/** Tokens a chat template adds around each message (role markers, separators), as OpenAI counts them. */
const TOKENS_PER_MESSAGE = 4;
/** Tokens that open the assistant's reply. */
const REPLY_PRIMING_TOKENS = 3;
/** Tokens a template adds once when the request offers tools (the tools' preamble). */
const TOOLS_PREAMBLE_TOKENS = 10;

/**
 * Estimates the prompt tokens of a request sent to an upstream model, before it runs: every
 * message's text ({@link estimateTextTokens}) plus a few tokens of template per message, tool calls
 * as their name and arguments, and the tools' definitions as their JSON text (templates render
 * them more compactly, so this errs on the high side). The response format's schema counts too,
 * as structured-output prompts include it. `countText` counts one text (default the estimate).
 */
export function estimatePromptTokens(
  request: ChatRequest,
  countText: (text: string) => number = estimateTextTokens,
): number {
  let tokens = REPLY_PRIMING_TOKENS;
  for (const message of request.messages) {
    tokens += TOKENS_PER_MESSAGE;
    if (message.content !== null) tokens += countText(message.content);
    if (message.role !== "tool" && message.name !== undefined) tokens += countText(message.name);
    if (message.role === "assistant") {
      for (const call of message.toolCalls ?? []) {
        tokens += TOKENS_PER_MESSAGE + countText(call.name) + countText(call.arguments);
      }
    }
  }
  if (request.tools.length > 0) {
    tokens += TOOLS_PREAMBLE_TOKENS + countText(JSON.stringify(request.tools));
  }
  if (request.responseFormat.type === "json_schema") {
    tokens += countText(JSON.stringify(request.responseFormat.schema));
  }
  return tokens;
}

/**
 * The most prompt tokens the request can count upstream, for pricing its reservation: every text
 * as its UTF-8 bytes (the estimate's template tokens around them). Byte-level tokenizers (GPT's,
 * Llama 3's, Qwen's) and SentencePiece with byte fallback never spend less than a byte on a token,
 * so this holds whatever the text; the estimate does not: crafted text (combining marks, box
 * drawing, symbols, emoji, letters in no language) counts 4-11x more tokens upstream than
 * estimated, and since a cost above its reservation is charged only as far as the balance
 * pays, concurrent requests could spend several times an account's balance. It reserves about
 * 4.5x the estimate for English prose, which costs the reservation little beside its completion
 * bound. Only the money uses it: the token rate, the context check and usage the upstream does
 * not report go by the estimate.
 */
export function countPromptTokensAtMost(request: ChatRequest): number {
  // Never below the estimate: no rule of estimateTextTokens counts more than a token per UTF-16
  // unit, and no character has fewer UTF-8 bytes than UTF-16 units.
  return estimatePromptTokens(request, countUtf8Bytes);
}

function countUtf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
