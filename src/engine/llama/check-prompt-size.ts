import { setImmediate as nextTurn } from "node:timers/promises";
import type { ChatHistoryItem, ChatWrapper, Tokenizer } from "node-llama-cpp";
import { ContextLengthError } from "../check-context-length.ts";
import type { ChatMessage } from "../engine.ts";
import { shortestToolText } from "./read-tool-json.ts";
import { renderPrompt } from "./render-prompt.ts";

/** Message text up to this many characters is rendered at once (tokenizing it takes milliseconds). */
export const CHECK_ABOVE_CHARS = 64 * 1024;
/**
 * Histories up to this many items are rendered at once too (1000 empty messages take about
 * 30 ms); beyond, the template's tokens are counted first. Small requests keep the exact count
 * of their refusal.
 */
export const CHECK_ABOVE_ITEMS = 1000;
/** Characters tokenized in one turn of the event loop: a few milliseconds of work. */
const PIECE_CHARS = 16 * 1024;
/**
 * Tokens a cut between two pieces may have split that the whole text would have merged. A cut
 * falls on whitespace where there is some, and a tokenizer's merges reach a few tokens at most.
 */
const MARGIN_PER_PIECE = 8;

/**
 * Refuses, before the prompt is rendered, a request whose messages, documented tools and chat
 * template alone hold more tokens than the context. Rendering and tokenizing run on the event loop in one piece (node-llama-cpp's
 * tokenizer is synchronous): a message of megabytes held every other request on the server for
 * seconds, and a refused request costs its key nothing, so any key could do that over and over.
 * Large message text is tokenized here a piece at a time instead, the event loop free between
 * pieces, counting a lower bound of the prompt's tokens (the chat template only adds to it), and
 * the request is refused as soon as that bound leaves no room; one that fits is rendered as
 * usual, and checked exactly then. Small messages (most) skip this.
 *
 * Two more lower bounds, for what message text does not show: the chat template's tokens around
 * each message (`historyItems` x `templateTokensPerItem`, see {@link measureTemplateTokensPerItem}),
 * checked by arithmetic alone, and the tools the prompt documents (`toolTexts`, see
 * {@link documentedToolTexts}), counted with the messages. Tens of thousands of empty messages
 * render to one long run of special tokens, which node-llama-cpp's tokenizer takes in quadratic
 * time (32,000 of them held the event loop 15 s, 250,000 for minutes), and a hundred tools of
 * 32 KB descriptions held it 2.4 s: both for a refusal that costs nothing.
 */
export async function checkPromptSize(options: {
  messages: readonly ChatMessage[];
  tokenizer: Tokenizer;
  contextLength: number;
  maxTokens: number | undefined;
  /** Texts of the tools the prompt documents (see {@link documentedToolTexts}). */
  toolTexts?: readonly string[];
  /** Items of the rendered history (its messages, and the reply it opens). */
  historyItems?: number;
  /** Template tokens each item surely adds (see {@link measureTemplateTokensPerItem}). */
  templateTokensPerItem?: number;
}): Promise<void> {
  const { contextLength, maxTokens } = options;
  const room = contextLength - (maxTokens ?? 1);
  const items = options.historyItems ?? 0;
  const templateTokens = items * (options.templateTokensPerItem ?? 0);
  const toolTexts = options.toolTexts ?? [];
  const tools = toolTexts.length > 0;
  if (items > CHECK_ABOVE_ITEMS && templateTokens > room)
    throw tooLong(contextLength, templateTokens, maxTokens, tools);
  const texts = [...messageTexts(options.messages), ...toolTexts];
  let characters = 0;
  for (const text of texts) characters += text.length;
  if (characters <= CHECK_ABOVE_CHARS && items <= CHECK_ABOVE_ITEMS) return;
  // The texts end to end, cut into pieces: many short messages count as much as one long one (a
  // margin per text would swallow texts shorter than it). Joined, neighbours may merge into
  // fewer tokens, never more, so the count stays a lower bound.
  const text = texts.join("");
  let atLeast = templateTokens;
  for (let start = 0; start < text.length; ) {
    const end = pieceEnd(text, start);
    atLeast += Math.max(0, options.tokenizer(text.slice(start, end)).length - MARGIN_PER_PIECE);
    start = end;
    if (atLeast > room) throw tooLong(contextLength, atLeast, maxTokens, tools);
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

/**
 * The texts of tool definitions that every rendering of them holds: the function's name and
 * description, and from its parameters the property names, descriptions and string constants
 * (JSON, as Jinja templates write tools, and node-llama-cpp's TypeScript-like documentation
 * both show them). Keywords and structure are left out: not every rendering writes them.
 *
 * Tools that a forced call describes are not counted this way: the prompt holds them as that
 * call's instruction (plan-generation.ts), their parameters as JSON, whole, and that text is
 * counted instead. Their names and descriptions alone left out the keywords the grammar drops, so
 * a `pattern` or an `"x-foo"` of 7 MB was rendered and tokenized in one piece before the request
 * was refused for its length: 1.6 to 1.9 s of the event loop, at no cost to its sender.
 */
export function documentedToolTexts(
  tools: readonly { name: string; description?: string | undefined; parameters?: unknown }[],
): string[] {
  const texts: string[] = [];
  for (const tool of tools) {
    texts.push(tool.name);
    if (tool.description !== undefined) texts.push(tool.description);
    collectSchemaTexts(tool.parameters, texts, 0);
  }
  return texts;
}

/** Nesting followed at most: deeper schemas were refused or cut while planning. */
const MAX_SCHEMA_DEPTH = 64;

function collectSchemaTexts(schema: unknown, texts: string[], depth: number): void {
  if (depth > MAX_SCHEMA_DEPTH || typeof schema !== "object" || schema === null) return;
  if (Array.isArray(schema)) {
    for (const item of schema) collectSchemaTexts(item, texts, depth + 1);
    return;
  }
  const record = schema as Record<string, unknown>;
  if (typeof record.description === "string") texts.push(record.description);
  if (typeof record.const === "string") texts.push(record.const);
  if (Array.isArray(record.enum))
    for (const value of record.enum) if (typeof value === "string") texts.push(value);
  const properties = record.properties;
  if (typeof properties === "object" && properties !== null && !Array.isArray(properties)) {
    for (const [name, property] of Object.entries(properties)) {
      texts.push(name);
      collectSchemaTexts(property, texts, depth + 1);
    }
  }
  for (const key of ["items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"]) {
    collectSchemaTexts(record[key], texts, depth + 1);
  }
  for (const key of ["$defs", "definitions"]) {
    const definitions = record[key];
    if (typeof definitions !== "object" || definitions === null) continue;
    for (const definition of Object.values(definitions)) collectSchemaTexts(definition, texts, depth + 1);
  }
}

/**
 * The fewest template tokens the chat wrapper adds per history item (role markers, separators),
 * measured once per model: a user message and a reply, both empty, rendered once and three
 * times; half the tokens one pair adds, rounded down (0 for a template that adds none).
 */
export function measureTemplateTokensPerItem(options: {
  chatWrapper: ChatWrapper;
  tokenizer: Tokenizer;
  render: ChatWrapper["generateContextState"];
}): number {
  const count = (pairs: number) => {
    const history: ChatHistoryItem[] = [];
    for (let pair = 0; pair < pairs; pair++)
      history.push({ type: "user", text: "" }, { type: "model", response: [""] });
    history.push({ type: "user", text: "" });
    return renderPrompt({ ...options, history, functions: undefined }).tokens.length;
  };
  try {
    return Math.max(0, Math.floor((count(3) - count(1)) / 4));
  } catch {
    // A template that cannot render empty messages bounds nothing here; the render checks later.
    return 0;
  }
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

/**
 * The refusal of a prompt of more than `atLeast` tokens, in OpenAI's words; where the prompt
 * documents tools, their texts were counted too, and the message says what of them to shorten.
 */
function tooLong(
  contextLength: number,
  atLeast: number,
  maxTokens: number | undefined,
  tools: boolean,
): ContextLengthError {
  const shorten = tools
    ? " (the tools' names, descriptions and parameter schemas count as part of them)"
    : "";
  if (maxTokens === undefined) {
    return new ContextLengthError(
      `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in more than ${atLeast} tokens${shorten}. Please reduce the length of the messages${tools ? " or tools" : ""}.`,
      atLeast,
    );
  }
  return new ContextLengthError(
    `This model's maximum context length is ${contextLength} tokens. However, you requested more than ${atLeast + maxTokens} tokens (more than ${atLeast} in the messages${shorten}, ${maxTokens} in the completion). Please reduce the length of the messages${tools ? ", tools" : ""} or completion.`,
    atLeast + maxTokens,
  );
}
