import { borderLengths } from "./border-lengths.ts";

/**
 * The request's stop strings searched for in generated text as it comes, a chunk at a time, without
 * reading any text twice: each stop string's Knuth–Morris–Pratt state (how much of its start the
 * text read ends with) is carried from one chunk to the next.
 *
 * Why: searching the held text again on every token (`indexOf` over the end that may hold a stop
 * string, then the longest end that begins one) costs the longest stop string's length per token,
 * and a request may send four stop strings of any length: against four 200,000-character stop
 * strings every token scanned about 800,000 characters on the event loop. Here a chunk costs its
 * own length per stop string, amortized (a failed match falls back along the prefix function at
 * most as far as the characters read before it had advanced it).
 *
 * Both answers are about the text read since the search was made or {@link StopSearch.reset}:
 * which stop strings end in the chunk just read, and how long an end of the text begins one. A
 * caller that holds text back keeps it from where the longest such end starts, so a stop string
 * found always starts inside what it holds.
 *
 * Text is compared by UTF-16 code unit, as `indexOf` compares it. An empty stop string is never
 * found and never begun.
 */
export interface StopSearch {
  /**
   * Reads `text`, the next chunk: the stop strings that end in it, or `undefined`. After a stop
   * string is found the search has stopped part way through `text`: {@link StopSearch.reset} it
   * before reading more.
   */
  read(text: string): StopFound | undefined;
  /**
   * The length of the longest end of the text read that begins some stop string but is not all of
   * it (0 for none). Meaningful after a read that found nothing.
   */
  readonly begun: number;
  /** Forgets the text read: what is read next starts afresh. */
  reset(): void;
}

/** The stop strings that end in a chunk read. */
export interface StopFound {
  /**
   * Where the one that starts earliest starts, from the start of the chunk: negative when it began
   * in the text read before. Of each stop string, its first occurrence that ends in the chunk.
   */
  start: number;
  /** The indices (in the `stops` given, ascending) of every stop string that ends in the chunk. */
  stops: number[];
}

/** Creates a {@link StopSearch} for `stops`; each stop string's prefix function is made here, once. */
export function createStopSearch(stops: readonly string[]): StopSearch {
  const searches = stops.map((stop, index) => ({ index, stop, borders: borderLengths(stop), matched: 0 }));
  const live = searches.filter((search) => search.stop.length > 0);
  return {
    read(text) {
      let found: StopFound | undefined;
      for (const search of live) {
        const { stop, borders } = search;
        let matched = search.matched;
        for (let index = 0; index < text.length; index += 1) {
          const code = text.charCodeAt(index);
          while (matched > 0 && stop.charCodeAt(matched) !== code) matched = borders[matched - 1] ?? 0;
          if (stop.charCodeAt(matched) === code) matched += 1;
          if (matched === stop.length) {
            const start = index + 1 - stop.length;
            if (found === undefined) found = { start, stops: [search.index] };
            else {
              found.start = Math.min(found.start, start);
              found.stops.push(search.index);
            }
            break;
          }
        }
        search.matched = matched;
      }
      return found;
    },
    get begun() {
      let longest = 0;
      for (const search of live) longest = Math.max(longest, search.matched);
      return longest;
    },
    reset() {
      for (const search of searches) search.matched = 0;
    },
  };
}
