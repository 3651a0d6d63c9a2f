/**
 * createNameSuggester measures a name only as far as it could still be suggested (common
 * beginnings and ends left out, a letter-count lower bound, the table stopped at the first row
 * above the bound): checked against the plain, full table on random names.
 */
import { describe, expect, it } from "vitest";
import { createNameSuggester, suggestName } from "../../src/catalog/suggest-name.ts";

/** Levenshtein distance with adjacent transpositions as one edit: the whole table. */
function fullDistance(left: string, right: string): number {
  const table = Array.from({ length: left.length + 1 }, (_, row) =>
    Array.from({ length: right.length + 1 }, (_, column) => (row === 0 ? column : column === 0 ? row : 0)),
  );
  for (let row = 1; row <= left.length; row++) {
    for (let column = 1; column <= right.length; column++) {
      let distance = Math.min(
        table[row - 1]![column]! + 1,
        table[row]![column - 1]! + 1,
        table[row - 1]![column - 1]! + (left[row - 1] === right[column - 1] ? 0 : 1),
      );
      if (
        row > 1 &&
        column > 1 &&
        left[row - 1] === right[column - 2] &&
        left[row - 2] === right[column - 1]
      ) {
        distance = Math.min(distance, table[row - 2]![column - 2]! + 1);
      }
      table[row]![column] = distance;
    }
  }
  return table[left.length]![right.length]!;
}

const normalize = (name: string) => name.toLowerCase().replace(/[_-]/g, "");

/**
 * What a suggestion must be: the first name of the same normalized form; else the first of the
 * names closest to `input` among those within one edit per three letters of it; else none.
 */
function expected(input: string, known: readonly string[]): string | undefined {
  const same = known.find((name) => normalize(name) === normalize(input));
  if (same !== undefined) return same;
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const allowed = Math.floor(Math.min(input.length, name.length) / 3);
    const distance = fullDistance(input.toLowerCase(), name.toLowerCase());
    if (distance <= allowed && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** A seeded generator, so that a failure repeats. */
function createRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

describe("createNameSuggester", () => {
  it("suggests what the full table does, on random names and near misses of them", () => {
    const random = createRandom(7);
    const letters = "abAB-_c1";
    const word = (length: number) =>
      Array.from({ length }, () => letters[Math.floor(random() * letters.length)]).join("");
    const mutate = (name: string) => {
      const at = Math.floor(random() * (name.length + 1));
      const kind = Math.floor(random() * 4);
      if (kind === 0) return name.slice(0, at) + word(1) + name.slice(at);
      if (kind === 1) return name.slice(0, at) + name.slice(at + 1);
      if (kind === 2) return name.slice(0, at) + word(1) + name.slice(at + 1);
      return name.slice(0, at) + name.slice(at + 1, at + 2) + name.slice(at, at + 1) + name.slice(at + 2);
    };
    for (let round = 0; round < 300; round++) {
      const known = Array.from({ length: 1 + Math.floor(random() * 12) }, () =>
        word(Math.floor(random() * 14)),
      );
      const suggest = createNameSuggester(known);
      for (let attempt = 0; attempt < 10; attempt++) {
        const base = known[Math.floor(random() * known.length)]!;
        const input =
          random() < 0.3 ? word(Math.floor(random() * 14)) : mutate(random() < 0.5 ? base : mutate(base));
        expect(suggest(input), `${JSON.stringify(input)} among ${JSON.stringify(known)}`).toBe(
          expected(input, known),
        );
        expect(suggestName(input, known)).toBe(suggest(input));
      }
    }
  });

  it("answers the same for an input asked again (its reused tables keep nothing between names)", () => {
    const suggest = createNameSuggester(["parallel", "max_queue", "threads"]);
    expect(suggest("paralel")).toBe("parallel");
    expect(suggest("zzzzzzz")).toBeUndefined();
    expect(suggest("thraeds")).toBe("threads");
    expect(suggest("paralel")).toBe("parallel");
  });
});
