import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { isMultipleOf, leastCommonMultiple } from "../../../src/engine/llama/decimal-multiples.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { schemaGrammarMatcher, wrongIntegers as wrongIntegersWithin } from "./schema-grammar-matcher.ts";

const param = "response_format.json_schema.schema";

function convert(schema: unknown) {
  return convertJsonSchemaToGbnf(schema, { param });
}

/** The integers of -100 to 100 that the grammar of `schema` takes and `inRange` does not, or the reverse. */
function wrongIntegers(schema: unknown, inRange: (value: number) => boolean): Promise<number[]> {
  return wrongIntegersWithin(schema, inRange, 100);
}

/** The refusal converting `schema` throws (checked to be a 400 `invalid_value` naming the param), or `undefined`. */
function refusal(schema: unknown): string | undefined {
  try {
    convert(schema);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: "invalid_value", param, status: 400 });
    return (error as AppError).message;
  }
}

describe("number bounds merged from allOf branches and anyOf siblings", () => {
  it.each([
    // Regression: the first branch's exclusive bound was kept (2 to 5 were written).
    [{ allOf: [{ exclusiveMinimum: 1 }, { exclusiveMinimum: 5 }] }, (v: number) => v > 5],
    [{ allOf: [{ exclusiveMaximum: 50 }, { exclusiveMaximum: 10 }] }, (v: number) => v < 10],
    [{ allOf: [{ minimum: 5 }, { exclusiveMinimum: 5 }] }, (v: number) => v > 5],
    [{ allOf: [{ exclusiveMinimum: 5 }, { minimum: 5 }] }, (v: number) => v > 5],
    [{ allOf: [{ exclusiveMinimum: 4 }, { minimum: 7 }, { exclusiveMinimum: 6 }] }, (v: number) => v >= 7],
    [{ allOf: [{ maximum: 10 }, { exclusiveMaximum: 10 }, { maximum: 20 }] }, (v: number) => v < 10],
    // Draft 4: `true` makes its own branch's `minimum` exclusive, not another's (regression: > 5).
    [{ allOf: [{ minimum: 3, exclusiveMinimum: true }, { minimum: 5 }] }, (v: number) => v >= 5],
    [{ allOf: [{ minimum: 5 }, { exclusiveMinimum: true }] }, (v: number) => v >= 5],
    [{ allOf: [{ minimum: 5, exclusiveMinimum: true }, { minimum: 5 }] }, (v: number) => v > 5],
    [{ allOf: [{ maximum: 9, exclusiveMaximum: true }, { maximum: 20 }] }, (v: number) => v < 9],
    [{ allOf: [{ maximum: 20, exclusiveMaximum: true }, { exclusiveMaximum: 30 }] }, (v: number) => v < 20],
    // The keywords beside an anyOf meet each branch as allOf branches meet.
    [{ exclusiveMinimum: 0, anyOf: [{ exclusiveMinimum: 5 }] }, (v: number) => v > 5],
    [{ exclusiveMaximum: 3, anyOf: [{ maximum: 50 }, { exclusiveMaximum: 90 }] }, (v: number) => v < 3],
  ])("%j: exactly the integers of the stricter bounds are written", async (bounds, inRange) => {
    expect(await wrongIntegers({ type: "integer", ...bounds }, inRange)).toEqual([]);
  });

  it("reads draft 6's exclusive bounds without a type as a number, as minimum and maximum", async () => {
    for (const schema of [{ exclusiveMinimum: 0 }, { exclusiveMaximum: 10 }, { minimum: 0 }]) {
      const accepts = await schemaGrammarMatcher(schema);
      expect([accepts("5"), accepts('"x"'), accepts("null")], JSON.stringify(schema)).toEqual([
        true,
        false,
        false,
      ]);
    }
  });

  it("holds through a $ref branch and nested allOf", async () => {
    const schema = {
      type: "integer",
      $defs: { positive: { exclusiveMinimum: 0, maximum: 90 } },
      allOf: [{ $ref: "#/$defs/positive" }, { allOf: [{ exclusiveMinimum: 10 }, { exclusiveMaximum: 40 }] }],
    };
    expect(await wrongIntegers(schema, (v) => v > 10 && v < 40)).toEqual([]);
  });

  it("refuses branches whose numbers have nothing in common, and leaves such an alternative out", async () => {
    expect(refusal({ allOf: [{ type: "number", minimum: 5 }, { exclusiveMaximum: 5 }] })).toMatch(
      /the 'allOf' branches have no number in common \('minimum' 5 and 'exclusiveMaximum' 5\)/,
    );
    expect(
      refusal({ allOf: [{ type: "number", exclusiveMinimum: 1 }, { exclusiveMinimum: 8 }, { maximum: 8 }] }),
    ).toMatch(/no number in common \('exclusiveMinimum' 8 and 'maximum' 8\)/);
    expect(refusal({ allOf: [{ type: "number", minimum: 5 }, { maximum: 5 }] })).toBeUndefined();
    // Of several types, those left still hold.
    expect(convert({ type: ["number", "string"], allOf: [{ exclusiveMinimum: 2 }, { maximum: 2 }] })).toEqual(
      {
        type: "string",
      },
    );
    const accepts = await schemaGrammarMatcher({
      anyOf: [{ allOf: [{ type: "integer", minimum: 3 }, { exclusiveMaximum: 3 }] }, { type: "null" }],
    });
    expect(accepts("null")).toBe(true);
    expect(accepts("3")).toBe(false);
  });

  it("refuses a number with no value within its own exclusive bounds", () => {
    expect(refusal({ type: "number", exclusiveMinimum: 5, maximum: 5 })).toMatch(
      /no number is within its bounds \('exclusiveMinimum' 5 and 'maximum' 5\)/,
    );
    expect(refusal({ type: "number", minimum: 5, exclusiveMinimum: true, maximum: 5 })).toMatch(
      /no number is within its bounds/,
    );
    expect(refusal({ type: "number", exclusiveMinimum: 5, maximum: 5.5 })).toBeUndefined();
  });
});

describe("const and enum values beside number keywords", () => {
  it("writes only the enum values within the bounds (regression: 10 beside maximum 6)", async () => {
    expect(convert({ type: "integer", enum: [1, 5, 10], maximum: 6 })).toEqual({
      oneOf: [{ const: 1 }, { const: 5 }],
    });
    const accepts = await schemaGrammarMatcher({ type: "integer", enum: [1, 5, 10], maximum: 6 });
    expect(["1", "5", "10", "6"].filter(accepts)).toEqual(["1", "5"]);
  });

  it.each([
    [{ enum: [1, 5, 10], exclusiveMaximum: 5 }, [1]],
    [{ enum: [1, 5, 10], exclusiveMinimum: 1 }, [5, 10]],
    [{ enum: [1, 5, 10], minimum: 5, exclusiveMinimum: true }, [10]],
    [{ enum: [-2.5, 0.5, 2.5], type: "number", minimum: 0, maximum: 1 }, [0.5]],
    [{ enum: [1, 5, "a", null], maximum: 3 }, [1, "a", null]],
    [{ enum: [2, 3, 4, 6], multipleOf: 2 }, [2, 4, 6]],
    // As decimals: 0.3 / 0.1 is 2.9999999999999996 in floating point.
    [{ enum: [0.3, 0.35, 0.7], multipleOf: 0.1 }, [0.3, 0.7]],
    [{ enum: [[1], [9]], items: { maximum: 5 } }, [[1]]],
    [{ enum: [{ n: 1 }, { n: 9 }], properties: { n: { exclusiveMaximum: 9 } } }, [{ n: 1 }]],
  ])("%j keeps %j", (schema, kept: unknown[]) => {
    // The schemas of constants (see convert-schema-constant.ts), as written beside no keyword.
    const alone = convert({ enum: kept }) as { oneOf?: unknown[] };
    expect(convert(schema)).toEqual(kept.length === 1 ? alone : { oneOf: alone.oneOf });
  });

  it("keeps the values the keywords of every allOf branch allow", () => {
    expect(convert({ allOf: [{ type: "integer", enum: [1, 5, 10] }, { maximum: 6 }] })).toEqual({
      oneOf: [{ const: 1 }, { const: 5 }],
    });
    expect(
      convert({ allOf: [{ enum: [1, 5, 10] }, { exclusiveMinimum: 1 }, { exclusiveMaximum: 10 }] }),
    ).toEqual({ const: 5 });
    // Both divisors hold: 6 is the least multiple of 2 and 3.
    expect(convert({ enum: [2, 3, 6, 9, 12], allOf: [{ multipleOf: 2 }, { multipleOf: 3 }] })).toEqual({
      oneOf: [{ const: 6 }, { const: 12 }],
    });
    expect(
      convert({ enum: [0.25, 0.3, 0.5, 1.5], allOf: [{ multipleOf: 0.1 }, { multipleOf: 0.25 }] }),
    ).toEqual({ oneOf: [{ const: 0.5 }, { const: 1.5 }] });
    expect(convert({ enum: [1, 5, 10], anyOf: [{ maximum: 3 }, { minimum: 8 }] })).toEqual({
      oneOf: [{ const: 1 }, { const: 10 }],
    });
  });

  it("refuses an enum or const with no value within the bounds, naming the param", () => {
    expect(refusal({ type: "integer", enum: [10, 20], maximum: 6 })).toMatch(
      /^Invalid JSON Schema in 'response_format.json_schema.schema' at '#': no value of 'enum' meets the keywords beside it/,
    );
    expect(refusal({ const: 6, exclusiveMaximum: 6 })).toMatch(
      /'const' does not meet the keywords beside it/,
    );
    expect(refusal({ const: 7, multipleOf: 2 })).toMatch(/'const' does not meet the keywords beside it/);
    expect(refusal({ allOf: [{ enum: [10, 20] }, { maximum: 6 }] })).toMatch(
      /at '#': no value of 'enum' meets the keywords beside it/,
    );
    expect(refusal({ const: { n: 9 }, properties: { n: { maximum: 5 } } })).toMatch(/'const' does not meet/);
    // An alternative without such a value is left out.
    expect(convert({ anyOf: [{ enum: [10, 20], maximum: 6 }, { type: "null" }] })).toEqual({ type: "null" });
  });
});

describe("decimal multiples", () => {
  it("divide as the decimals the client wrote", () => {
    expect(isMultipleOf(0.3, 0.1)).toBe(true);
    expect(isMultipleOf(0.35, 0.1)).toBe(false);
    expect(isMultipleOf(-4.5, 1.5)).toBe(true);
    expect(isMultipleOf(1e300, 1e-300)).toBe(true);
    expect(isMultipleOf(3e-7, 1e-7)).toBe(true);
    expect(isMultipleOf(2 ** 60, 3)).toBe(false);
    expect(isMultipleOf(10, 4)).toBe(false);
  });

  it("have a least common multiple", () => {
    expect(leastCommonMultiple(2, 3)).toBe(6);
    expect(leastCommonMultiple(0.1, 0.25)).toBe(0.5);
    expect(leastCommonMultiple(4, 6)).toBe(12);
    expect(leastCommonMultiple(1e300, 7e300)).toBe(7e300);
    expect(leastCommonMultiple(1.1e308, 1.3e308)).toBeUndefined();
  });
});
