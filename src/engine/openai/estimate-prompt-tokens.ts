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
 * as structured-output prompts include it.
 */
export function estimatePromptTokens(request: ChatRequest): number {
  let tokens = REPLY_PRIMING_TOKENS;
  for (const message of request.messages) {
    tokens += TOKENS_PER_MESSAGE;
    if (message.content !== null) tokens += estimateTextTokens(message.content);
    if (message.role !== "tool" && message.name !== undefined) tokens += estimateTextTokens(message.name);
    if (message.role === "assistant") {
      for (const call of message.toolCalls ?? []) {
        tokens += TOKENS_PER_MESSAGE + estimateTextTokens(call.name) + estimateTextTokens(call.arguments);
      }
    }
  }
  if (request.tools.length > 0) {
    tokens += TOOLS_PREAMBLE_TOKENS + estimateTextTokens(JSON.stringify(request.tools));
  }
  if (request.responseFormat.type === "json_schema") {
    tokens += estimateTextTokens(JSON.stringify(request.responseFormat.schema));
  }
  return tokens;
}
