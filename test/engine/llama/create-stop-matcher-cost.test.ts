/**
 * What the stop matcher reads per chunk does not grow with the stop strings' length. Counted, not
 * timed: the matcher reads text and stop strings only with `charCodeAt` (its search is
 * create-stop-search.ts), so the calls to `String.prototype.charCodeAt` made while chunks are
 * pushed are the characters it examined.
 *
 * Regression: the held text was searched again on every chunk, `indexOf` for a complete stop string
 * and the longest end that begins one, so each token cost up to the longest stop string's length:
 * against four 200,001-character stop strings, 10,000 tokens of a text that keeps beginning them
 * held the event loop for seconds.
 */
import { describe, expect, it } from "vitest";
import { createStopMatcher } from "../../../src/engine/llama/create-stop-matcher.ts";

/** Four stop strings of `length` characters: a long periodic run that generated text keeps beginning. */
function periodicStops(length: number): string[] {
  const run = "ab".repeat((length - 1) / 2);
  return ["W", "X", "Y", "Z"].map((end) => run + end);
}

/**
 * Pushes `tokens` chunks, runs of `run` "ab" chunks each broken by a newline, and answers the
 * `charCodeAt` calls made while pushing and the characters pushed (all released at the end).
 */
function countReads(
  stops: readonly string[],
  tokens: number,
  run: number,
): { reads: number; characters: number } {
  const released: string[] = [];
  const matcher = createStopMatcher(stops, (text) => released.push(text));
  const chunks = Array.from({ length: tokens }, (_, index) => ((index + 1) % (run + 1) === 0 ? "\n" : "ab"));
  const original = String.prototype.charCodeAt;
  let reads = 0;
  String.prototype.charCodeAt = function (this: string, index: number) {
    reads += 1;
    return original.call(this, index);
  };
  try {
    for (const chunk of chunks) {
      if (matcher.push(chunk)) throw new Error("no stop string completes here");
    }
  } finally {
    String.prototype.charCodeAt = original;
  }
  matcher.release();
  expect(released.join("")).toBe(chunks.join(""));
  return { reads, characters: released.join("").length };
}

describe("createStopMatcher's reads", () => {
  it("are the same against four 2,001- and four 200,001-character stop strings", () => {
    // Runs of 1,000 characters held: shorter than either stop string, so both are only begun.
    const short = countReads(periodicStops(2_001), 10_000, 500);
    const long = countReads(periodicStops(200_001), 10_000, 500);
    expect(long.reads).toBe(short.reads);
  });

  it("stay within a few per character and stop string, whatever is held", () => {
    // Runs of 10,000 characters, all held, and each break falls back along the prefix function.
    const { reads, characters } = countReads(periodicStops(200_001), 10_000, 5_000);
    // Each character is read once per stop string: the count counts.
    expect(reads).toBeGreaterThanOrEqual(4 * characters);
    // Per stop string and character: the character, the stop string's next one, and the fallbacks,
    // which cannot outnumber the characters that advanced the match.
    expect(reads).toBeLessThanOrEqual(4 * 4 * characters);
  });
});
