import type { Token } from "node-llama-cpp";
import { createPartialStopFinder } from "./create-partial-stop-finder.ts";

/**
 * The request's stop strings applied to text as it is released, for generations that LlamaChat
 * runs (the direct path applies them itself, generate-directly.ts, with the same rules).
 *
 * LlamaChat's own stop handling (`customStopTriggers`) drops the text it holds back for a stop
 * string that has begun when generation ends otherwise (at `maxTokens`, on abort): text that was
 * generated and billed but never sent. So LlamaChat gets no stop strings, and this matcher holds
 * and releases its text instead:
 * - a released chunk (LlamaChat's tokens with their text) waits, whole, while its text from some
 *   point to the end may still become a stop string; chunks before that point are released;
 * - when a stop string completes, the text before its earliest start is released and the rest is
 *   not: the caller then ends generation;
 * - {@link StopMatcher.release} releases what is held, for a generation that ended without a stop.
 */
export interface StopMatcher {
  /** Takes a chunk; answers `true` when a stop string completed (also for chunks after that stop). */
  push(text: string, tokens: readonly Token[]): boolean;
  /** Releases every held chunk (generation ended without a stop). */
  release(): void;
  /** Whether a stop string completed. */
  readonly stopped: boolean;
  /** The tokens of the held chunks, oldest first: the last tokens generated, not released yet. */
  readonly heldTokens: readonly Token[];
}

interface Chunk {
  text: string;
  tokens: readonly Token[];
}

/** Creates a {@link StopMatcher} for `stops` (non-empty strings) that passes released text to `onText`. */
export function createStopMatcher(stops: readonly string[], onText: (text: string) => void): StopMatcher {
  const held: Chunk[] = [];
  let heldText = "";
  let heldTokens: Token[] = [];
  let stopped = false;
  const findPartialStop = createPartialStopFinder(stops);

  /** Releases the held chunks whose text ends by `end` (a text offset). */
  const releaseChunks = (end: number) => {
    let count = 0;
    let length = 0;
    for (let chunk = held[0]; chunk !== undefined && length + chunk.text.length <= end; chunk = held[count]) {
      length += chunk.text.length;
      count += 1;
    }
    if (count === 0) return;
    held.splice(0, count);
    heldTokens = held.flatMap((chunk) => chunk.tokens);
    const text = heldText.slice(0, length);
    heldText = heldText.slice(length);
    if (text !== "") onText(text);
  };

  return {
    push(text, tokens) {
      if (stopped) return true;
      const searchFrom = heldText.length;
      held.push({ text, tokens });
      heldText += text;
      heldTokens = [...heldTokens, ...tokens];
      const stopStart = findStopStart(heldText, stops, searchFrom);
      if (stopStart < 0) {
        releaseChunks(findPartialStop(heldText));
        return false;
      }
      stopped = true;
      const before = heldText.slice(0, stopStart);
      held.length = 0;
      heldText = "";
      heldTokens = [];
      if (before !== "") onText(before);
      return true;
    },
    release: () => releaseChunks(heldText.length),
    get stopped() {
      return stopped;
    },
    get heldTokens() {
      return heldTokens;
    },
  };
}

/**
 * Where the earliest stop string in `text` starts, or -1. `text` before `searchFrom` held none, so
 * only stop strings that end after it are looked for.
 */
function findStopStart(text: string, stops: readonly string[], searchFrom: number): number {
  let earliest = -1;
  for (const stop of stops) {
    const start = text.indexOf(stop, Math.max(0, searchFrom - stop.length + 1));
    if (start >= 0 && (earliest < 0 || start < earliest)) earliest = start;
  }
  return earliest;
}

/**
 * Where the earliest end of `text` that begins some stop text (but is not all of it) starts. For
 * one search; a search per token makes its finder once (create-partial-stop-finder.ts).
 */
export function findPartialStopStart(text: string, stops: readonly string[]): number {
  return createPartialStopFinder(stops)(text);
}
