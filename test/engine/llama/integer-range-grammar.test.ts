import { describe, expect, it } from "vitest";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import {
  integerRangeGrammar,
  largestGrammarInteger,
} from "../../../src/engine/llama/integer-range-grammar.ts";
import { mostStacks } from "./grammar-stack-model.ts";

/** Whether llama.cpp's grammar for `expression` takes `text` whole (node-llama-cpp's full-match check). */
async function matcher(expression: string): Promise<(text: string) => boolean> {
  const llama = await getSharedLlama({ gpu: false });
  const grammar = await llama.createGrammar({ grammar: `root ::= ${expression}` });
  return (text) => (grammar as unknown as { _testText(text: string): boolean })._testText(text);
}

describe("integerRangeGrammar, parsed by llama.cpp", () => {
  it.each([
    [1, 10],
    [0, 100],
    [-50, 50],
    [-1999, -7],
    [-1, 0],
    [0, 0],
    [7, 7],
    [-300, -300],
    [19, 1234],
    [-1000, 999],
    [100, 199],
    [-2000, 2000],
  ])(
    "takes exactly the integers from %i to %i, each in its JSON text (all of -2100 to 2100 tried)",
    async (minimum, maximum) => {
      const accepts = await matcher(integerRangeGrammar(minimum, maximum));
      const wrong: string[] = [];
      for (let value = -2100; value <= 2100; value++) {
        if (accepts(String(value)) !== (value >= minimum && value <= maximum)) wrong.push(String(value));
      }
      expect(wrong).toEqual([]);
      // Other writings of numbers in range are not taken.
      for (const text of ["-0", "00", "01", "+1", "1.0", "1e0", " 1", ""])
        expect(accepts(text), text).toBe(false);
    },
  );

  it("takes wide ranges at their edges, up to 15 digits", async () => {
    const cases: [number, number, string[], string[]][] = [
      [1, 1000000, ["1", "9", "10", "999999", "1000000"], ["0", "1000001", "9999999", "-1"]],
      [
        -largestGrammarInteger,
        largestGrammarInteger,
        ["0", "-1", "999999999999999", "-999999999999999"],
        ["1000000000000000", "-0"],
      ],
      [0, largestGrammarInteger, ["0", "123456789012345"], ["-1", "1234567890123456"]],
      [-largestGrammarInteger, -1, ["-1", "-999999999999999"], ["0", "1", "-1000000000000000"]],
      [
        123456789,
        987654321,
        ["123456789", "123456790", "500000000", "987654321"],
        ["123456788", "987654322", "99999999", "1000000000"],
      ],
      [
        2 ** 40,
        2 ** 41,
        [String(2 ** 40), String(2 ** 40 + 1), String(2 ** 41)],
        [String(2 ** 40 - 1), String(2 ** 41 + 1)],
      ],
    ];
    for (const [minimum, maximum, inside, outside] of cases) {
      const accepts = await matcher(integerRangeGrammar(minimum, maximum));
      for (const text of inside) expect(accepts(text), `${text} in ${minimum}..${maximum}`).toBe(true);
      for (const text of outside) expect(accepts(text), `${text} not in ${minimum}..${maximum}`).toBe(false);
    }
  });

  it("takes every integer of random ranges and nothing next to them", async () => {
    let seed = 7;
    const random = (below: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % below;
    };
    for (let round = 0; round < 40; round++) {
      const digits = 1 + random(9);
      const a = random(10 ** digits) * (random(2) === 0 ? -1 : 1);
      const b = random(10 ** digits) * (random(2) === 0 ? -1 : 1);
      const [minimum, maximum] = a <= b ? [a, b] : [b, a];
      const accepts = await matcher(integerRangeGrammar(minimum, maximum));
      for (const value of [minimum, maximum, Math.floor((minimum + maximum) / 2)])
        expect(accepts(String(value)), `${value} in ${minimum}..${maximum}`).toBe(true);
      const near = [minimum - 1, maximum + 1, minimum - 10, maximum + 10, minimum * 10 - 1, maximum * 10 + 1];
      for (const value of near.filter((value) => value < minimum || value > maximum))
        expect(accepts(String(value)), `${value} not in ${minimum}..${maximum}`).toBe(false);
    }
  });

  it("keep a handful of stacks open, as the plain integer rule does (the stack check counts a number as one)", () => {
    const plain = '"-"{0,1} ("0" | [1-9] [0-9]{0,14})';
    const ranges: [number, number][] = [
      [1, 10],
      [0, 100],
      [-50, 50],
      [1, 1000000],
      [-largestGrammarInteger, largestGrammarInteger],
      [-123456789012345, 987654321098765],
    ];
    const most = ranges.map(([minimum, maximum]) => {
      const grammar = integerRangeGrammar(minimum, maximum);
      let stacks = 0;
      for (const value of [minimum, maximum, Math.round((minimum + maximum) / 2), minimum + 1, maximum - 1])
        stacks = Math.max(stacks, mostStacks(grammar, String(value)), mostStacks(plain, String(value)));
      return stacks;
    });
    // Measured: 2, 3, 5, 3, 3 and 5; the plain rule 3.
    expect(Math.max(...most)).toBeLessThanOrEqual(5);
  });
});
