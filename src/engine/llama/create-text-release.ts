import type { LlamaModel, Token } from "node-llama-cpp";
import { createStopSearch } from "./create-stop-search.ts";
import type { DirectPrompt } from "./generate-directly.ts";
import type { LlamaStopReason } from "./map-finish.ts";

/** Generated tokens whose text has been decided, in order, with their text. */
interface Chunk {
  tokens: Token[];
  text: string;
}

/** What replaced U+FFFD decodes to: the bytes of a token that end inside a character. */
const unknownCharacter = "\uFFFD";
/** Tokens of context the detokenizer gets (node-llama-cpp's `maxRecentDetokenizerTokens`). */
const detokenizerContextTokens = 3;

/**
 * Turns sampled tokens into released text, for the direct path (generate-directly.ts, whose module
 * comment gives the rules: LlamaChat's). `push` answers a
 * stop reason when a token ends generation; `finish` releases what is held when generation ends
 * otherwise (max tokens, abort); `released` holds the tokens whose text was released, and
 * `punished` answers what the repeat penalty punishes.
 */
export function createTextRelease(options: {
  model: LlamaModel;
  prompt: DirectPrompt;
  onText: (text: string) => void;
}): {
  push(token: Token): LlamaStopReason | undefined;
  finish(): void;
  released: Token[];
  punished(count: number): Token[];
} {
  const { model, prompt, onText } = options;
  const stopTexts = [...prompt.stopTexts, ...prompt.customStopTexts];
  // Carried from chunk to chunk: a chunk costs its length, not the stop texts' (create-stop-search.ts).
  const search = createStopSearch(stopTexts);
  /**
   * The template's own stop texts alone, where the request's come too: what LlamaChat would hold
   * (it gets no request stop strings, create-stop-matcher.ts), for the repeat penalty.
   */
  const templateSearch =
    prompt.customStopTexts.length > 0 && prompt.stopTexts.length > 0
      ? createStopSearch(prompt.stopTexts)
      : undefined;
  const released: Token[] = [];
  /**
   * Decided text not released yet: it may still become a stop trigger, or is whitespace held. The
   * held chunks are `held[first]` on, and never joined: releasing costs what it releases.
   */
  const held: Chunk[] = [];
  let first = 0;
  let heldLength = 0;
  /** Trailing held chunks that are whitespace only (with `trimWhitespaceSuffix`). */
  let heldWhitespace = 0;
  /** Tokens whose bytes do not form whole characters yet. */
  let partial: Token[] = [];
  /** The last tokens before the next chunk, the detokenizer's context. */
  let context: Token[] = [];
  let startIgnorable = prompt.ignoredStartCharacters.size > 0;

  /**
   * Releases the held chunks that end by `end` (text offset), except whitespace still held; at a
   * stop (`cut`), also the text of the next chunk before `end`.
   */
  const release = (end: number, cut: boolean) => {
    const releasable = held.length - first - heldWhitespace;
    let count = 0;
    let length = 0;
    let text = "";
    for (let chunk = held[first]; count < releasable && chunk !== undefined; chunk = held[first + count]) {
      if (length + chunk.text.length > end) break;
      length += chunk.text.length;
      text += chunk.text;
      for (const token of chunk.tokens) released.push(token);
      count += 1;
    }
    // At a stop, the part of the next chunk before it (the stop text starts in that chunk).
    if (cut && count < releasable && end > length)
      text += held[first + count]?.text.slice(0, end - length) ?? "";
    first += count;
    heldLength -= length;
    if (first === held.length) {
      held.length = 0;
      first = 0;
    } else if (first >= 1024 && first * 2 >= held.length) {
      held.splice(0, first);
      first = 0;
    }
    if (text !== "") onText(text);
  };

  /**
   * The first text generated without the ignored start character it may begin with (the space a
   * template puts after the assistant's header), as LlamaChat drops it, the rest re-tokenized for
   * the repeat penalty. Dropped as the text is decided, before it is held: a stop string neither
   * matches that character (which no client sees) nor leaves it in front of the text released
   * at the stop.
   */
  const withoutIgnoredStart = (chunk: Chunk): Chunk => {
    startIgnorable = false;
    if (!prompt.ignoredStartCharacters.has(chunk.text.charAt(0))) return chunk;
    const rest = chunk.text.slice(1);
    return { tokens: rest === "" ? [] : model.tokenize(rest, false, "trimLeadingSpace"), text: rest };
  };

  const push = (token: Token): LlamaStopReason | undefined => {
    if (model.isEogToken(token)) {
      release(heldLength, true);
      return "eogToken";
    }
    const tokens = partial.length === 0 ? [token] : [...partial, token];
    const text = model.detokenize(tokens, false, context);
    if (text.endsWith(unknownCharacter) && !model.isSpecialToken(token)) {
      partial = tokens;
      return undefined;
    }
    partial = [];
    context = [...context, ...tokens].slice(-detokenizerContextTokens);
    const whitespace = prompt.trimWhitespaceSuffix && text.trim() === "";
    if (!whitespace) heldWhitespace = 0;

    if (prompt.stopTokens.size > 0 && tokens.some((candidate) => prompt.stopTokens.has(candidate))) {
      release(heldLength, true);
      return "stopGenerationTrigger";
    }

    const chunk = startIgnorable && text !== "" ? withoutIgnoredStart({ tokens, text }) : { tokens, text };
    const offset = heldLength;
    held.push(chunk);
    heldLength += chunk.text.length;
    if (whitespace) heldWhitespace += 1;
    if (stopTexts.length === 0) {
      release(heldLength, false);
      return undefined;
    }

    templateSearch?.read(chunk.text);
    // The stop texts that this chunk completed, if any: the text before the earliest is released.
    const found = search.read(chunk.text);
    if (found !== undefined) {
      release(offset + found.start, true);
      const custom = found.stops.every((index) => index >= prompt.stopTexts.length);
      return custom ? "customStopTrigger" : "stopGenerationTrigger";
    }
    release(heldLength - search.begun, false);
    return undefined;
  };

  /**
   * The last `count` tokens the repeat penalty punishes: those released, and those held only
   * because they may begin one of the request's stop strings, as LlamaChat punishes every token it
   * releases (the request's stop strings are not its own) and llama.cpp's server every token
   * sampled. Without them, a stop string that never matched changed the text sampled with a
   * frequency penalty.
   */
  const punished = (count: number): Token[] => {
    // How long an end of the held text may begin one of the template's own stop texts.
    const templateBegun = prompt.customStopTexts.length === 0 ? search.begun : (templateSearch?.begun ?? 0);
    const end = heldLength - templateBegun;
    const releasable = held.length - first - heldWhitespace;
    const extra: Token[] = [];
    let length = 0;
    for (let index = 0; index < releasable; index++) {
      const chunk = held[first + index] as Chunk;
      if (length + chunk.text.length > end) break;
      length += chunk.text.length;
      for (const token of chunk.tokens) extra.push(token);
    }
    if (extra.length === 0) return released.slice(-count);
    return released.slice(-count).concat(extra).slice(-count);
  };

  /**
   * Text held because it might begin a stop string was generated and is billed, and no stop
   * completed: it is the client's, as OpenAI, vLLM and llama.cpp's server return it (LlamaChat
   * drops it, so the LlamaChat path matches stop strings itself, create-stop-matcher.ts).
   * Whitespace held for a grammar that trims it stays dropped, as at any end, and bytes that never
   * formed a whole character are not text.
   */
  const finish = () => release(heldLength, false);

  return { push, finish, released, punished };
}
