import { setImmediate as nextTurn } from "node:timers/promises";
import type { Tokenizer } from "node-llama-cpp";
import { ContextLengthError } from "../check-context-length.ts";
import type { ChatMessage } from "../engine.ts";
import { shortestToolText } from "./read-tool-json.ts";

/** Message text up to this many characters is rendered at once (tokenizing it takes milliseconds). */
export const CHECK_ABOVE_CHARS = 64 * 1024;
/** Characters tokenized in one turn of the event loop: a few milliseconds of work. */
const PIECE_CHARS = 16 * 1024;
/**
 * Tokens a cut between two pieces may have split that the whole text would have merged. A cut
 * falls on whitespace where there is some, and a tokenizer's merges reach a few tokens at most.
 */
const MARGIN_PER_PIECE = 8;

/**
 * Refuses, before the prompt is rendered, a request whose messages alone hold more tokens than
 * the context. Rendering and tokenizing run on the event loop in one piece (node-llama-cpp's
 * tokenizer is synchronous): a message of megabytes held every other request on the server for
 * seconds, and a refused request costs its key nothing, so any key could do that over and over.
 * Large message text is tokenized here a piece at a time instead, the event loop free between
 * pieces, counting a lower bound of the prompt's tokens (the chat template only adds to it), and
 * the request is refused as soon as that bound leaves no room; one that fits is rendered as
 * usual, and checked exactly then. Small messages (most) skip this.
 */
export async function checkPromptSize(options: {
  messages: readonly ChatMessage[];
  tokenizer: Tokenizer;
  contextLength: number;
  maxTokens: number | undefined;
}): Promise<void> {
  const texts = messageTexts(options.messages);
  let characters = 0;
  for (const text of texts) characters += text.length;
  if (characters <= CHECK_ABOVE_CHARS) return;
  const { contextLength, maxTokens } = options;
  const room = contextLength - (maxTokens ?? 1);
  // The texts end to end, cut into pieces: many short messages count as much as one long one (a
  // margin per text would swallow texts shorter than it). Joined, neighbours may merge into
  // fewer tokens, never more, so the count stays a lower bound.
  const text = texts.join("");
  let atLeast = 0;
  for (let start = 0; start < text.length; ) {
    const end = pieceEnd(text, start);
    atLeast += Math.max(0, options.tokenizer(text.slice(start, end)).length - MARGIN_PER_PIECE);
    start = end;
    if (atLeast > room) throw tooLong(contextLength, atLeast, maxTokens);
    await nextTurn();
  }
}

/**
 * The texts of the messages that surely become prompt tokens: contents and tool calls (not their
 * ids, which a chat template may leave out: counted, they could refuse a prompt that fits).
 */
function messageTexts(messages: readonly ChatMessage[]): string[] {
  const texts: string[] = [];
  for (const message of messages) {
    // A tool result's JSON is rendered compact (read-tool-json.ts): its whitespace is no token.
    if (message.role === "tool") texts.push(shortestToolText(message.content));
    else if (message.content !== null) texts.push(message.content);
    if (message.role === "assistant") {
      for (const call of message.toolCalls ?? []) texts.push(call.name, shortestToolText(call.arguments));
    }
  }
  return texts;
}

/** Where the piece from `start` ends: {@link PIECE_CHARS} on, moved back to whitespace when there is some near. */
function pieceEnd(text: string, start: number): number {
  const limit = start + PIECE_CHARS;
  if (limit >= text.length) return text.length;
  const space = text.lastIndexOf(" ", limit);
  const end = space > limit - 256 ? space : limit;
  // Never between the halves of a surrogate pair.
  const code = text.charCodeAt(end - 1);
  return code >= 0xd800 && code <= 0xdbff ? end + 1 : end;
}

function tooLong(contextLength: number, atLeast: number, maxTokens: number | undefined): ContextLengthError {
  if (maxTokens === undefined) {
    return new ContextLengthError(
      `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in more than ${atLeast} tokens. Please reduce the length of the messages.`,
      atLeast,
    );
  }
  return new ContextLengthError(
    `This model's maximum context length is ${contextLength} tokens. However, you requested more than ${atLeast + maxTokens} tokens (more than ${atLeast} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    atLeast + maxTokens,
  );
}
