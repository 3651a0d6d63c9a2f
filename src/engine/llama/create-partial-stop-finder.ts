import { borderLengths } from "./border-lengths.ts";

/**
 * Creates the search for where the earliest end of a text that begins some stop string (but is
 * not all of it) starts: the text's length when none does. The direct path runs it on every token,
 * on the text it holds (generate-directly.ts); the LlamaChat path carries its search from token to
 * token instead (create-stop-search.ts), which costs nothing per token in the stop strings' length.
 *
 * Why not try each start in turn: the held text grows up to the longest stop string, and a long
 * periodic run ("abab…") that begins a long stop string matches far at every start before it
 * fails, so one token cost held² steps a stop string: 30,000 characters held against four stop
 * strings held the event loop 3.5 s. Here each stop string's failure function (Knuth–Morris–Pratt)
 * is made once, and a search reads at most the stop string's length of the text's end, once.
 *
 * `stops` are taken as they are; an empty one never begins anything.
 */
export function createPartialStopFinder(stops: readonly string[]): (text: string) => number {
  const searches = stops
    .filter((stop) => stop.length > 1)
    .map((stop) => ({ stop, borders: borderLengths(stop) }));
  // A one-character stop string is never begun without being all of it.
  return (text) => {
    let earliest = text.length;
    for (const { stop, borders } of searches) {
      const begun = longestBegunEnd(text, stop, borders);
      if (begun > 0) earliest = Math.min(earliest, text.length - begun);
    }
    return earliest;
  };
}

/**
 * The length of the longest end of `text` shorter than `stop` that begins it (0 for none). Only
 * the last `stop.length - 1` characters can be such an end, so the match starts there and never
 * completes the whole stop string.
 */
function longestBegunEnd(text: string, stop: string, borders: Int32Array): number {
  let matched = 0;
  for (let index = Math.max(0, text.length - stop.length + 1); index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    while (matched > 0 && stop.charCodeAt(matched) !== code) matched = borders[matched - 1] ?? 0;
    if (stop.charCodeAt(matched) === code) matched += 1;
  }
  return matched;
}
