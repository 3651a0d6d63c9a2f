import { createStopSearch } from "./create-stop-search.ts";

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
 * - when stop strings complete in a chunk, the text before the earliest start among them is
 *   released and the rest is not: the caller then ends generation;
 * - {@link StopMatcher.release} releases what is held, for a generation that ended without a stop.
 *
 * A chunk costs its own length per stop string, not the stop strings' length: the search carries
 * its state from chunk to chunk (create-stop-search.ts), and the held text is kept as its chunks,
 * never joined or cut again until it is released.
 */
export interface StopMatcher {
  /** Takes a chunk; answers `true` when a stop string completed (also for chunks after that stop). */
  push(text: string): boolean;
  /** Releases every held chunk (generation ended without a stop). */
  release(): void;
  /** Whether a stop string completed. */
  readonly stopped: boolean;
}

/** Released entries left at the front of a held list before it is compacted. */
const compactAfter = 1024;

/** Creates a {@link StopMatcher} for `stops` (non-empty strings) that passes released text to `onText`. */
export function createStopMatcher(stops: readonly string[], onText: (text: string) => void): StopMatcher {
  const search = createStopSearch(stops);
  /** The held chunks are `held[first]` on: releasing moves `first` rather than shifting the list. */
  const held: string[] = [];
  let first = 0;
  /** The held chunks' text length. */
  let heldLength = 0;
  let stopped = false;

  const clear = () => {
    held.length = 0;
    first = 0;
    heldLength = 0;
    search.reset();
  };

  /** Releases the held chunks whose text ends by `end` (an offset in the held text). */
  const releaseChunks = (end: number) => {
    let length = 0;
    let text = "";
    const from = first;
    for (let chunk = held[first]; chunk !== undefined && length + chunk.length <= end; chunk = held[first]) {
      length += chunk.length;
      text += chunk;
      first += 1;
    }
    if (first === from) return;
    heldLength -= length;
    if (first === held.length) {
      held.length = 0;
      first = 0;
    } else if (first >= compactAfter && first * 2 >= held.length) {
      held.splice(0, first);
      first = 0;
    }
    if (text !== "") onText(text);
  };

  /** The held text before `end` (an offset in it). */
  const heldTextBefore = (end: number): string => {
    let text = "";
    for (let index = first; index < held.length && text.length < end; index += 1) {
      const chunk = held[index] ?? "";
      text += chunk.length <= end - text.length ? chunk : chunk.slice(0, end - text.length);
    }
    return text;
  };

  return {
    push(text) {
      if (stopped) return true;
      const offset = heldLength;
      held.push(text);
      heldLength += text.length;
      const found = search.read(text);
      if (found === undefined) {
        releaseChunks(heldLength - search.begun);
        return false;
      }
      stopped = true;
      // The stop string starts in the held text: the text that could begin one was held.
      const before = heldTextBefore(offset + found.start);
      clear();
      if (before !== "") onText(before);
      return true;
    },
    release() {
      releaseChunks(heldLength);
      // Nothing is held: what comes next is matched afresh, as the text before it is gone.
      search.reset();
    },
    get stopped() {
      return stopped;
    },
  };
}
