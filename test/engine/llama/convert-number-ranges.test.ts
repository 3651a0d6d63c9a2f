/**
 * A fractional number's bounds in a local model's output grammar (decimal-range-grammar.ts): the
 * grammar llama.cpp builds takes no number outside them (as a reader parses it: a double), and
 * every number of a few digits inside them.
 */
import { describe, expect, it } from "vitest";
import { createRandom } from "../../support/create-random.ts";
import { schemaGrammarMatcher, schemaRefusal } from "./schema-grammar-matcher.ts";

type Bounds = { minimum?: number; maximum?: number; exclusiveMinimum?: number; exclusiveMaximum?: number };

function within(value: number, bounds: Bounds): boolean {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = bounds;
  return (
    (minimum === undefined || value >= minimum) &&
    (maximum === undefined || value <= maximum) &&
    (exclusiveMinimum === undefined || value > exclusiveMinimum) &&
    (exclusiveMaximum === undefined || value < exclusiveMaximum)
  );
}

const refusal = schemaRefusal;

const cases: Bounds[] = [
  { minimum: 0, maximum: 1 },
  { minimum: -1, maximum: 1 },
  { exclusiveMinimum: 0, exclusiveMaximum: 1 },
  { minimum: 0.25, maximum: 0.75 },
  { minimum: 0 },
  { exclusiveMinimum: 0 },
  { maximum: 100 },
  { minimum: 1.5, exclusiveMaximum: 3.25 },
  { minimum: -2.5, maximum: -0.5 },
  { exclusiveMinimum: -0.001, maximum: 0 },
  { minimum: 0.1, maximum: 0.3 },
  { minimum: 123.456, maximum: 123.457 },
  { minimum: 1e-7, maximum: 2e-7 },
  { exclusiveMinimum: 5, maximum: 10 },
  { minimum: -40, exclusiveMaximum: 60.5 },
];

/** Texts a model could write: a sign, a whole part of up to 3 digits, up to 6 fraction digits. */
function randomTexts(seed: number, count: number): string[] {
  const random = createRandom(seed);
  const texts: string[] = [];
  for (let index = 0; index < count; index++) {
    let text = random(3) === 0 ? "-" : "";
    const wholeDigits = random(4);
    text += wholeDigits === 0 ? "0" : String(random(10 ** wholeDigits));
    if (random(2) === 1) {
      text += ".";
      for (let digits = 1 + random(6); digits > 0; digits--) text += String(random(10));
    }
    texts.push(text);
  }
  return texts;
}

const edges = [
  "0",
  "-0",
  "1",
  "-1",
  "0.5",
  "1.0",
  "1.00",
  "0.25",
  "0.75",
  "0.7500001",
  "100",
  "100.0000001",
  "3.25",
];
const moreEdges = [
  "3.2499999",
  "1.5",
  "1.4999999",
  "0.1",
  "0.3",
  "0.30000001",
  "123.456",
  "123.4565",
  "123.457",
];
const tinyEdges = [
  "0.0000001",
  "0.00000015",
  "0.0000002",
  "0.00000020001",
  "5",
  "5.0",
  "5.000001",
  "10",
  "10.0",
];

describe("a fractional number's bounds in the output grammar", () => {
  it.each(cases)(
    "writes only numbers within %o, and every short one (regression: any number)",
    async (bounds) => {
      const accepts = await schemaGrammarMatcher({ type: "number", ...bounds });
      const unsound: string[] = [];
      const missed: string[] = [];
      for (const text of [
        ...randomTexts(JSON.stringify(bounds).length, 2000),
        ...edges,
        ...moreEdges,
        ...tinyEdges,
      ]) {
        const value = Number(text);
        const taken = accepts(text);
        if (taken && !within(value, bounds)) unsound.push(text);
        // `-0` and `-0.0` are 0, which JSON writes without its sign: the grammar leaves them out. A
        // side without a bound reaches 9 whole digits, which leaves 6 decimals.
        const decimals = text.split(".")[1]?.length ?? 0;
        if (!taken && within(value, bounds) && !/^-0(\.0*)?$/.test(text) && decimals <= 6) missed.push(text);
      }
      expect(unsound).toEqual([]);
      expect(missed).toEqual([]);
      // Where both sides are bounded by a single whole digit: 14 decimals.
      if (bounds.minimum === 0 && bounds.maximum === 1) expect(accepts("0.00000000000001")).toBe(true);
      // No exponent, no leading zero, no bare point.
      for (const text of ["1e-1", "5E0", "00.5", ".5", "1.", "+1"]) expect(accepts(text), text).toBe(false);
    },
  );

  it("writes at most 15 significant digits, so that an exclusive bound holds once a reader parses the number", async () => {
    const accepts = await schemaGrammarMatcher({ type: "number", exclusiveMaximum: 0.1 });
    // 20 digits below 0.1 parse to 0.1 itself, which the bound leaves out.
    expect(Number("0.09999999999999999999")).toBe(0.1);
    expect(accepts("0.09999999999999999999")).toBe(false);
    expect(accepts("0.099999")).toBe(true);
    const unit = await schemaGrammarMatcher({ type: "number", minimum: 0, maximum: 1 });
    expect(unit("0.12345678901234")).toBe(true);
    expect(unit("0.123456789012345")).toBe(false);
  });

  it("holds inside objects and alternatives, beside integers and nulls", async () => {
    const accepts = await schemaGrammarMatcher({
      type: "object",
      properties: {
        confidence: { type: "number", minimum: 0, maximum: 1 },
        delta: { type: ["number", "null"], minimum: -1, maximum: 1 },
        rating: { type: "integer", minimum: 1, maximum: 5 },
      },
      required: ["confidence", "delta", "rating"],
    });
    expect(accepts('{"confidence": 0.93, "delta": null, "rating": 4}')).toBe(true);
    expect(accepts('{"confidence": 1, "delta": -0.5, "rating": 1}')).toBe(true);
    expect(accepts('{"confidence": 1.01, "delta": null, "rating": 4}')).toBe(false);
    expect(accepts('{"confidence": 0.5, "delta": -1.5, "rating": 4}')).toBe(false);
  });

  it("writes the decimals a multipleOf of 1, 0.1, 0.01, ... allows, with or without bounds (regression: any number)", async () => {
    const cents = await schemaGrammarMatcher({ type: "number", multipleOf: 0.01 });
    for (const text of ["12.34", "-5", "0.5", "999999999.99", "0.07"]) expect(cents(text), text).toBe(true);
    for (const text of ["0.001", "1.234", "1e2"]) expect(cents(text), text).toBe(false);
    const unit = await schemaGrammarMatcher({ type: "number", multipleOf: 0.01, minimum: 0, maximum: 1 });
    expect(unit("0.99")).toBe(true);
    expect(unit("0.999")).toBe(false);
    expect(unit("1.01")).toBe(false);
    const whole = await schemaGrammarMatcher({ type: "number", multipleOf: 1, exclusiveMinimum: 0 });
    expect(whole("3")).toBe(true);
    expect(whole("3.5")).toBe(false);
    expect(whole("0")).toBe(false);
    // Other divisors are not written: any number, as before.
    const quarters = await schemaGrammarMatcher({ type: "number", multipleOf: 0.25 });
    expect(quarters("0.3")).toBe(true);
  });

  it("refuses bounds that leave no number of 15 significant digits, only for a local model", async () => {
    for (const bounds of [
      { minimum: 1e20 },
      { maximum: -1e20 },
      { minimum: 0.1000000000000001, maximum: 0.1000000000000002 },
    ]) {
      expect(refusal({ type: "number", ...bounds }), JSON.stringify(bounds)).toMatch(
        /^Invalid JSON Schema in 'schema' at '#': its bounds \(.*\) leave no number of at most 15 significant digits/,
      );
      expect(refusal({ type: "number", ...bounds }, false)).toBeUndefined();
    }
    // A bound beyond 15 digits on its own side is as none.
    const accepts = await schemaGrammarMatcher({ type: "number", minimum: 2.5, maximum: 1e20 });
    expect(accepts("123456.5")).toBe(true);
    expect(accepts("2.4")).toBe(false);
  });
});
