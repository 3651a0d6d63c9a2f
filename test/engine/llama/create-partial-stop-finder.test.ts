import { describe, expect, it } from "vitest";
import { createPartialStopFinder } from "../../../src/engine/llama/create-partial-stop-finder.ts";
import { findPartialStopStart } from "../../../src/engine/llama/create-stop-matcher.ts";

/** The search as it was first written, every start tried in turn: the behaviour to keep. */
function findByEveryStart(text: string, stops: readonly string[]): number {
  let earliest = text.length;
  for (const stop of stops) {
    for (let start = Math.max(0, text.length - stop.length + 1); start < earliest; start += 1) {
      if (text.slice(start) === stop.slice(0, text.length - start)) {
        earliest = start;
        break;
      }
    }
  }
  return earliest;
}

/** A small seeded generator (mulberry32), so that a failure repeats. */
function createRandom(seed: number): (below: number) => number {
  let state = seed;
  return (below) => {
    state = (state + 0x6d2b79f5) | 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return Math.floor((((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296) * below);
  };
}

function randomText(random: (below: number) => number, alphabet: string, maxLength: number): string {
  let text = "";
  for (let length = random(maxLength + 1); length > 0; length -= 1)
    text += alphabet.charAt(random(alphabet.length));
  return text;
}

describe("createPartialStopFinder", () => {
  it("finds what trying every start finds, on random texts and stop strings", () => {
    const random = createRandom(20_260_128);
    for (let round = 0; round < 20_000; round += 1) {
      // Two or three letters: periodic runs and repeated borders, where the failure function matters.
      const alphabet = round % 2 === 0 ? "ab" : "abc";
      const stops = Array.from({ length: 1 + random(4) }, () => randomText(random, alphabet, 9));
      const text = randomText(random, alphabet, 24);
      const expected = findByEveryStart(text, stops);
      expect(createPartialStopFinder(stops)(text), `${JSON.stringify(text)} ${JSON.stringify(stops)}`).toBe(
        expected,
      );
      expect(findPartialStopStart(text, stops)).toBe(expected);
    }
  });

  it("keeps the cases the matcher relies on", () => {
    const find = createPartialStopFinder(["abd", "bx"]);
    expect(find("abcab")).toBe(3);
    expect(find("")).toBe(0);
    // A stop string of one character is never begun without being complete; an empty one never.
    expect(createPartialStopFinder(["x", ""])("abx")).toBe(3);
    // Surrogate pairs are compared by code unit, as before: half an emoji begins one.
    expect(createPartialStopFinder(["😀!"])(`a${"😀".charAt(0)}`)).toBe(1);
  });

  // Regression: trying every start compared each start to the end when a long periodic run that
  // begins a long stop string was broken by the last token: 30,000 characters held against one
  // stop string took 1 s of the event loop a token, four took 3.5 s; 100,000 held, about 45 s.
  it("searches 100,000 held characters against four 200,001-character stop strings at once", () => {
    const stop = `${"ab".repeat(100_000)}X`;
    const held = `${"ab".repeat(50_000)}\n`;
    const started = performance.now();
    expect(findPartialStopStart(held, [stop, stop, stop, stop])).toBe(held.length);
    expect(findPartialStopStart(`${held}ab`, [stop, stop, stop, stop])).toBe(held.length);
    // Milliseconds now; tens of seconds before.
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
