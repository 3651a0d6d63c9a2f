import { setImmediate as nextTurn } from "node:timers/promises";
import type { Tokenizer } from "node-llama-cpp";
import { ContextLengthError, TOOL_TEXTS_COUNTED } from "../check-context-length.ts";
import type { ChatMessage } from "../engine.ts";
import { shortestToolText } from "./read-tool-json.ts";

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
 * each message and each tool call (`historyItems` x `templateTokensPerItem` and the calls x
 * `templateTokensPerCall`, measured per model, measure-chat-template.ts), checked by arithmetic
 * alone, and the tools the prompt documents (`toolTexts`, see {@link documentedToolTexts}),
 * counted with the messages. Tens of thousands of empty messages render to one long run of special
 * tokens, which node-llama-cpp's tokenizer takes in quadratic time (32,000 of them held the event
 * loop 15 s, 250,000 for minutes), as do the markers of 126,000 empty tool calls in one assistant
 * message (one history item: 14 s), and a hundred tools of 32 KB descriptions held it 2.4 s: all
 * for a refusal that costs nothing.
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
  /** Template tokens each item surely adds (measure-chat-template.ts). */
  templateTokensPerItem?: number;
  /** Template tokens each tool call in the messages surely adds (measure-chat-template.ts). */
  templateTokensPerCall?: number;
}): Promise<void> {
  const { contextLength, maxTokens } = options;
  const room = contextLength - (maxTokens ?? 1);
  const toolTexts = options.toolTexts ?? [];
  const tools = toolTexts.length > 0;
  const { calls } = countMessages(options.messages);
  // A call is an item of its own here: its markers are as many tokens as a message's, or more.
  const items = (options.historyItems ?? 0) + calls;
  const templateTokens = checkTemplateBound({ ...options, items: options.historyItems ?? 0, calls, tools });
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
 * ids, which never reach the template: node-llama-cpp's calls have none, and its Jinja wrapper
 * writes ids of its own; counted, they could refuse a prompt that fits).
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
 * The template-token bound of {@link checkPromptSize} from the messages alone, for the engine to
 * check before it converts them: converting reads each tool call's arguments and each tool result
 * as JSON, and text that is not JSON costs an exception, so 126,000 empty calls took 0.8 s of the
 * event loop there before they were refused. The history has an item at least for each system and
 * user message, and for each tool result beyond the calls (those become user turns,
 * convert-chat-history.ts).
 */
export function checkTemplateTokens(options: {
  messages: readonly ChatMessage[];
  contextLength: number;
  maxTokens: number | undefined;
  templateTokensPerItem?: number;
  templateTokensPerCall?: number;
}): void {
  const { turns, calls, results } = countMessages(options.messages);
  checkTemplateBound({ ...options, items: turns + Math.max(0, results - calls), calls, tools: false });
}

/**
 * The template tokens of `items` history items and `calls` tool calls; beyond the room the context
 * leaves, the refusal, for requests of more than {@link CHECK_ABOVE_ITEMS} items and calls.
 */
function checkTemplateBound(options: {
  items: number;
  calls: number;
  templateTokensPerItem?: number | undefined;
  templateTokensPerCall?: number | undefined;
  contextLength: number;
  maxTokens: number | undefined;
  tools: boolean;
}): number {
  const { items, calls, contextLength, maxTokens } = options;
  const tokens = items * (options.templateTokensPerItem ?? 0) + calls * (options.templateTokensPerCall ?? 0);
  if (items + calls > CHECK_ABOVE_ITEMS && tokens > contextLength - (maxTokens ?? 1))
    throw tooLong(contextLength, tokens, maxTokens, options.tools);
  return tokens;
}

/** System and user messages, tool calls, and tool results. */
function countMessages(messages: readonly ChatMessage[]): { turns: number; calls: number; results: number } {
  let turns = 0;
  let calls = 0;
  let results = 0;
  for (const message of messages) {
    if (message.role === "assistant") calls += message.toolCalls?.length ?? 0;
    else if (message.role === "tool") results += 1;
    else turns += 1;
  }
  return { turns, calls, results };
}

/**
 * The texts of tool definitions that the prompt holds. Where the chat template writes parameter
 * schemas as JSON (`parametersAsJson`, measure-chat-template.ts): the function's name and
 * description, and its parameters' JSON, compact (a template may indent it: whitespace the count
 * leaves out). 128 tools of 10 KB schemas of nested type unions rendered to 1.9 million tokens,
 * tokenized in one piece (3 to 4 s of the event loop) before the request was refused, when only
 * their names counted here. Otherwise what every rendering holds: the function's name and
 * description, and from its parameters the property names, descriptions and string constants
 * (node-llama-cpp's TypeScript-like documentation shows them); keywords and structure are left
 * out, as not every rendering writes them.
 *
 * Tools that a forced call describes are not counted this way: the prompt holds them as that
 * call's instruction (plan-generation.ts), their parameters as JSON, whole, and that text is
 * counted instead. Their names and descriptions alone left out the keywords the grammar drops, so
 * a `pattern` or an `"x-foo"` of 7 MB was rendered and tokenized in one piece before the request
 * was refused for its length: 1.6 to 1.9 s of the event loop, at no cost to its sender.
 */
export function documentedToolTexts(
  tools: readonly { name: string; description?: string | undefined; parameters?: unknown }[],
  options: { parametersAsJson?: boolean } = {},
): string[] {
  const texts: string[] = [];
  for (const tool of tools) {
    texts.push(tool.name);
    if (tool.description !== undefined) texts.push(tool.description);
    if (options.parametersAsJson !== true) collectSchemaTexts(tool.parameters, texts, 0);
    else if (tool.parameters !== undefined) texts.push(JSON.stringify(tool.parameters) ?? "");
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
  const shorten = tools ? ` (${TOOL_TEXTS_COUNTED} count as part of them)` : "";
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
