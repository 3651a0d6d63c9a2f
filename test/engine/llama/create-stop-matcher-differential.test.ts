/**
 * The stop matcher against the matcher as it was first written (the held text searched again on
 * every chunk with `indexOf`, and every start tried for a begun stop string): the same text
 * released in the same pieces, the same answers, on random texts, stop
 * strings and chunk splits over alphabets small enough that stop strings overlap and repeat.
 */
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { createStopMatcher, type StopMatcher } from "../../../src/engine/llama/create-stop-matcher.ts";
import { createStopSearch } from "../../../src/engine/llama/create-stop-search.ts";
import { createRandom } from "../../support/create-random.ts";

/** The matcher as it was: the behaviour to keep. */
function createReferenceMatcher(stops: readonly string[], onText: (text: string) => void): StopMatcher {
  const held: { text: string }[] = [];
  let heldText = "";
  let stopped = false;
  const releaseChunks = (end: number) => {
    let count = 0;
    let length = 0;
    for (let chunk = held[0]; chunk !== undefined && length + chunk.text.length <= end; chunk = held[count]) {
      length += chunk.text.length;
      count += 1;
    }
    if (count === 0) return;
    held.splice(0, count);
    const text = heldText.slice(0, length);
    heldText = heldText.slice(length);
    if (text !== "") onText(text);
  };
  return {
    push(text) {
      if (stopped) return true;
      const searchFrom = heldText.length;
      held.push({ text });
      heldText += text;
      const stopStart = findStopStart(heldText, stops, searchFrom);
      if (stopStart < 0) {
        releaseChunks(findByEveryStart(heldText, stops));
        return false;
      }
      stopped = true;
      const before = heldText.slice(0, stopStart);
      held.length = 0;
      heldText = "";
      if (before !== "") onText(before);
      return true;
    },
    release: () => releaseChunks(heldText.length),
    get stopped() {
      return stopped;
    },
  };
}

function findStopStart(text: string, stops: readonly string[], searchFrom: number): number {
  let earliest = -1;
  for (const stop of stops) {
    const start = text.indexOf(stop, Math.max(0, searchFrom - stop.length + 1));
    if (start >= 0 && (earliest < 0 || start < earliest)) earliest = start;
  }
  return earliest;
}

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

/** Random text of code units from `alphabet`'s letters (which may be whole characters or halves). */
function randomText(
  random: (below: number) => number,
  alphabet: readonly string[],
  maxLetters: number,
): string {
  let text = "";
  for (let length = random(maxLetters + 1); length > 0; length -= 1)
    text += alphabet[random(alphabet.length)];
  return text;
}

const alphabets: readonly (readonly string[])[] = [
  ["a", "b"],
  ["a", "b", "c"],
  ["a", "b", "c", "d"],
  // Surrogate pairs and an accent: chunks may cut a character, stops may begin with half of one.
  ["😀", "é", "a"],
  ["\uD83D", "\uDE00", "x"],
];

/** Splits `text` into chunks of random lengths, some empty, each with its own token ids. */
function randomChunks(random: (below: number) => number, text: string, nextToken: () => Token) {
  const chunks: { text: string; tokens: Token[] }[] = [];
  for (let offset = 0; offset < text.length; ) {
    const length = random(5) === 0 ? 0 : 1 + random(random(4) === 0 ? 12 : 4);
    chunks.push({
      text: text.slice(offset, offset + length),
      tokens: Array.from({ length: random(3) }, nextToken),
    });
    offset += length;
  }
  return chunks;
}

function record(create: typeof createStopMatcher, stops: readonly string[]) {
  const released: string[] = [];
  return { matcher: create(stops, (text) => released.push(text)), released };
}

/** What a matcher did for each step of a round: its answer, what it released so far, what it held. */
function runRound(
  create: typeof createStopMatcher,
  stops: readonly string[],
  chunks: readonly { text: string; tokens: Token[] }[],
  releaseAt: number,
): unknown[] {
  const { matcher, released } = record(create, stops);
  const steps: unknown[] = [];
  for (const [index, chunk] of chunks.entries()) {
    if (index === releaseAt) {
      matcher.release();
      steps.push(["release", released.length]);
    }
    const answer = matcher.push(chunk.text);
    steps.push([answer, matcher.stopped, released.length]);
  }
  matcher.release();
  steps.push(["end", matcher.stopped], released);
  return steps;
}

describe("createStopMatcher against the matcher as it was", () => {
  it("releases, holds and stops alike on random texts, stop strings and chunk splits", () => {
    const random = createRandom(20_261_128);
    let stopsSeen = 0;
    for (let round = 0; round < 30_000; round += 1) {
      const alphabet = alphabets[round % alphabets.length] ?? ["a"];
      // Mostly short stop strings, which overlap often; now and then longer ones held long.
      const longest = round % 7 === 0 ? 20 : 8;
      const stops = Array.from({ length: 1 + random(4) }, () =>
        randomText(random, alphabet, 1 + random(longest)),
      ).map((stop) => stop || (alphabet[0] ?? "a"));
      const text = randomText(random, alphabet, round % 7 === 0 ? 80 : 40);
      let token = 0;
      const chunks = randomChunks(random, text, () => {
        token += 1;
        return token as Token;
      });
      // Now and then the functions path releases what is held (a call began) and text follows.
      const releaseAt = random(3) === 0 ? random(chunks.length + 1) : -1;
      const expected = runRound(createReferenceMatcher, stops, chunks, releaseAt);
      const actual = runRound(createStopMatcher, stops, chunks, releaseAt);
      if (JSON.stringify(actual) !== JSON.stringify(expected))
        expect(actual, JSON.stringify({ round, stops, chunks, releaseAt })).toEqual(expected);
      if (expected.some((step) => Array.isArray(step) && step[0] === true)) stopsSeen += 1;
    }
    // Both outcomes were exercised, many times each.
    expect(stopsSeen).toBeGreaterThan(5_000);
    expect(stopsSeen).toBeLessThan(25_000);
  });

  it("releases part of thousands of held chunks alike", () => {
    // All of "a"×1,100 "b" "a"×1,100 begins the stop string, then a "b" leaves only its last
    // 1,101 chunks beginning it: 1,101 chunks are released, 1,101 stay held.
    const stop = `${"a".repeat(1_100)}b${"a".repeat(1_100)}z`;
    const text = `${"a".repeat(1_100)}b${"a".repeat(1_100)}b${"a".repeat(1_099)}bz${"a".repeat(1_100)}z`;
    const chunks = [...text].map((letter, index) => ({ text: letter, tokens: [index as Token] }));
    const expected = runRound(createReferenceMatcher, [stop, "c"], chunks, -1);
    expect(runRound(createStopMatcher, [stop, "c"], chunks, -1)).toEqual(expected);
    // The first release is that part: the held list was compacted with 1,101 chunks left.
    expect((expected.at(-1) as string[])[0]).toBe(`${"a".repeat(1_100)}b`);
  });
});

describe("createStopSearch", () => {
  it("finds, chunk by chunk, each stop string's first occurrence that ends in the chunk", () => {
    const random = createRandom(1_128);
    for (let round = 0; round < 10_000; round += 1) {
      const alphabet = alphabets[round % alphabets.length] ?? ["a"];
      const stops = Array.from({ length: 1 + random(4) }, () => randomText(random, alphabet, 6));
      const text = randomText(random, alphabet, 30);
      const search = createStopSearch(stops);
      let read = "";
      for (const chunk of randomChunks(random, text, () => 0 as Token)) {
        const from = read.length;
        read += chunk.text;
        const starts = stops.map((stop) =>
          stop === "" ? -1 : read.indexOf(stop, Math.max(0, from - stop.length + 1)),
        );
        const ended = starts.flatMap((start, index) => (start >= 0 ? [index] : []));
        const found = search.read(chunk.text);
        const label = JSON.stringify({ round, stops, read });
        if (ended.length === 0) {
          expect(found, label).toBeUndefined();
          // The longest end of the text read that begins a stop string but is not all of it.
          expect(read.length - search.begun, label).toBe(findByEveryStart(read, stops));
          continue;
        }
        expect(found, label).toEqual({
          start: Math.min(...ended.map((index) => starts[index] ?? 0)) - from,
          stops: ended,
        });
        search.reset();
        read = "";
      }
    }
  });

  it("keeps the cases the matchers rely on", () => {
    const search = createStopSearch(["abd", "bx"]);
    expect(search.read("abcab")).toBeUndefined();
    expect(search.begun).toBe(2);
    // A stop string of one character is never begun without being complete; an empty one never.
    const short = createStopSearch(["x", ""]);
    expect(short.read("ab")).toBeUndefined();
    expect(short.begun).toBe(0);
    expect(short.read("x")).toEqual({ start: 0, stops: [0] });
    // Surrogate pairs are compared by code unit, as indexOf compares them: half an emoji begins one.
    const emoji = createStopSearch(["😀!"]);
    expect(emoji.read(`a${"😀".charAt(0)}`)).toBeUndefined();
    expect(emoji.begun).toBe(1);
  });

  // Regression (once 45 s of event loop a token): a long periodic run that begins long stop
  // strings, broken by the last character, then begun again.
  it("follows 100,000 characters against four 200,001-character stop strings", () => {
    const stop = `${"ab".repeat(100_000)}X`;
    const search = createStopSearch([stop, stop, stop, stop]);
    expect(search.read("ab".repeat(50_000))).toBeUndefined();
    expect(search.begun).toBe(100_000);
    expect(search.read("\n")).toBeUndefined();
    expect(search.begun).toBe(0);
    expect(search.read("ab")).toBeUndefined();
    expect(search.begun).toBe(2);
  });
});
