import type { GbnfJsonSchema } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patchGrammarTerminals } from "../../../src/engine/llama/patch-grammar-terminals.ts";
import {
  schemaGrammarMatcher,
  schemaRefusal,
  wrongIntegers as wrongIntegersWithin,
} from "./schema-grammar-matcher.ts";

/** The integers of -2000 to 2000 that the grammar of `schema` takes and `inRange` does not, or the reverse. */
function wrongIntegers(schema: unknown, inRange: (value: number) => boolean): Promise<number[]> {
  return wrongIntegersWithin(schema, inRange, 2000);
}

const refusal = schemaRefusal;

describe("format uuid", () => {
  const uuids = [
    "123e4567-e89b-12d3-a456-426614174000",
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "01890a5d-ac96-774b-bcce-b302099a8057",
    "ffffffff-ffff-8fff-bfff-ffffffffffff",
  ];
  // Besides the malformed: what zod 4's z.uuid() refuses (regression: written 6 times in 6).
  const others = [
    "00000000-0000-0000-0000-000000000000",
    "FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF",
    "6Ba7b810-9dAD-11d1-80b4-00c04fd430c8",
    "123e4567-e89b-02d3-a456-426614174000",
    "123e4567-e89b-92d3-a456-426614174000",
    "123e4567-e89b-12d3-c456-426614174000",
    "123e4567e89b12d3a456426614174000",
    "123e4567-e89b-12d3-a456-42661417400",
    "123e4567-e89b-12d3-a456-4266141740000",
    "g23e4567-e89b-12d3-a456-426614174000",
    "123e4567-e89b-12d3-a456_426614174000",
    "{123e4567-e89b-12d3-a456-426614174000}",
    "",
    "hello",
  ];

  it("is written as 8-4-4-4-12 lowercase hex digits of a version 1-8 and the RFC variant (regression: any string)", async () => {
    const accepts = await schemaGrammarMatcher({ type: "string", format: "uuid" });
    for (const uuid of uuids) expect(accepts(JSON.stringify(uuid)), uuid).toBe(true);
    for (const other of others) expect(accepts(JSON.stringify(other)), other).toBe(false);
  });

  it("holds inside objects, arrays, alternatives and beside a length of 36", async () => {
    const accepts = await schemaGrammarMatcher({
      type: "object",
      properties: {
        id: { type: "string", format: "uuid", minLength: 36, maxLength: 36 },
        refs: { type: "array", items: { type: "string", format: "uuid" } },
        parent: { anyOf: [{ type: "string", format: "uuid" }, { type: "null" }] },
      },
      required: ["id", "refs", "parent"],
    });
    const [a, b] = uuids as [string, string];
    expect(accepts(JSON.stringify({ id: a, refs: [a, b], parent: null }))).toBe(true);
    expect(accepts(JSON.stringify({ id: a, refs: [], parent: b }))).toBe(true);
    expect(accepts(JSON.stringify({ id: "x", refs: [], parent: null }))).toBe(false);
    expect(accepts(JSON.stringify({ id: a, refs: ["x"], parent: null }))).toBe(false);
    expect(accepts(JSON.stringify({ id: a, refs: [], parent: "x" }))).toBe(false);
  });

  it("refuses lengths that leave out 36 characters, as for the other formats", () => {
    expect(refusal({ type: "string", format: "uuid", maxLength: 10 })).toMatch(
      /'format' 'uuid' is written in 36 characters/,
    );
    expect(refusal({ type: "string", format: "uuid", minLength: 36 })).toBeUndefined();
  });
});

describe("integer ranges", () => {
  it.each([
    [{ minimum: 1, maximum: 10 }, (v: number) => v >= 1 && v <= 10],
    [{ minimum: 0, maximum: 100 }, (v: number) => v >= 0 && v <= 100],
    [{ minimum: -50, maximum: 50 }, (v: number) => v >= -50 && v <= 50],
    [{ minimum: 1, maximum: 1000000 }, (v: number) => v >= 1],
    [{ minimum: -1500 }, (v: number) => v >= -1500],
    [{ maximum: -7 }, (v: number) => v <= -7],
    [{ exclusiveMinimum: 0 }, (v: number) => v > 0],
    [{ exclusiveMinimum: -3, exclusiveMaximum: 1200 }, (v: number) => v > -3 && v < 1200],
    [{ minimum: 5, exclusiveMinimum: 9, maximum: 20, exclusiveMaximum: 15 }, (v: number) => v > 9 && v < 15],
    [{ minimum: 1.5, maximum: 9.5 }, (v: number) => v >= 2 && v <= 9],
    [{ exclusiveMinimum: 1.5, exclusiveMaximum: 4 }, (v: number) => v >= 2 && v <= 3],
    // Draft 4: booleans that make `minimum`/`maximum` exclusive.
    [
      { minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: true },
      (v: number) => v > 0 && v < 10,
    ],
    [{ minimum: 0, exclusiveMinimum: false, maximum: 10 }, (v: number) => v >= 0 && v <= 10],
    [{ minimum: -1e300, maximum: 1e300 }, () => true],
  ])(
    "%j: exactly its integers are written (all of -2000 to 2000 tried; regression: any integer)",
    async (bounds, inRange) => {
      expect(await wrongIntegers({ type: "integer", ...bounds }, inRange)).toEqual([]);
    },
  );

  it("hold beside null, in anyOf branches, allOf and zod's usual shapes", async () => {
    expect(
      await wrongIntegers({ type: ["integer", "null"], minimum: 1, maximum: 10 }, (v) => v >= 1 && v <= 10),
    ).toEqual([]);
    expect(
      await wrongIntegers(
        { anyOf: [{ type: "integer", exclusiveMinimum: 0 }, { type: "null" }], maximum: 99 },
        (v) => v > 0 && v <= 99,
      ),
    ).toEqual([]);
    expect(
      await wrongIntegers(
        { allOf: [{ type: "integer", minimum: -20 }, { maximum: 30 }, { minimum: -10 }] },
        (v) => v >= -10 && v <= 30,
      ),
    ).toEqual([]);
    const accepts = await schemaGrammarMatcher({ type: "integer", nullable: true, minimum: 3 });
    expect(accepts("null")).toBe(true);
    expect(accepts("2")).toBe(false);
    expect(accepts("3")).toBe(true);
  });

  it("reach 15 digits, as every integer the grammar writes", async () => {
    const accepts = await schemaGrammarMatcher({ type: "integer", minimum: 2 ** 40, maximum: 2 ** 53 });
    expect(accepts(String(2 ** 40))).toBe(true);
    expect(accepts("999999999999999")).toBe(true);
    expect(accepts(String(2 ** 40 - 1))).toBe(false);
    expect(accepts("1000000000000000")).toBe(false);
  });

  it("are refused where no integer is in them, or none of at most 15 digits", () => {
    expect(refusal({ type: "integer", minimum: 1.2, maximum: 1.8 })).toMatch(
      /no integer is within its bounds/,
    );
    expect(refusal({ type: "integer", exclusiveMinimum: 3, exclusiveMaximum: 4 })).toMatch(
      /no integer is within its bounds/,
    );
    expect(refusal({ type: "integer", minimum: 5, maximum: 5 })).toBeUndefined();
    expect(refusal({ type: "integer", minimum: 1e16 })).toMatch(/at most 15 digits/);
    // For an upstream model the schema is valid as it is.
    expect(refusal({ type: "integer", minimum: 1e16 }, false)).toBeUndefined();
    // In an alternative, such a branch is left out.
    expect(
      refusal({ anyOf: [{ type: "integer", minimum: 1.2, maximum: 1.8 }, { type: "string" }] }),
    ).toBeUndefined();
  });
});

describe("the grammars of uuid and integer ranges", () => {
  const zodLike = {
    type: "object",
    properties: {
      id: { type: "string", format: "uuid" },
      rating: { type: "integer", minimum: 1, maximum: 10 },
      percent: { type: "integer", minimum: 0, maximum: 100 },
      offset: { type: "integer", minimum: -50, maximum: 50 },
      count: { type: "integer", minimum: 1, maximum: 1000000 },
      positive: { type: "integer", exclusiveMinimum: 0 },
    },
    required: ["id", "rating", "percent", "offset", "count", "positive"],
    additionalProperties: false,
  };
  const answer = {
    id: "123e4567-e89b-12d3-a456-426614174000",
    rating: 10,
    percent: 0,
    offset: -50,
    count: 1000000,
    positive: 1,
  };

  it("pass node-llama-cpp's own check of the value (which LlamaChat runs on tool-call arguments)", async () => {
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const converted = convertJsonSchemaToGbnf(zodLike, { param: "schema" });
    const grammar = await llama.createGrammarForJsonSchema<GbnfJsonSchema>(converted);
    expect(grammar.parse(JSON.stringify(answer))).toEqual(answer);
    // The patched `$ref` rule holds in node-llama-cpp's own grammars too (LlamaChat's for functions).
    const accepts = (text: string) =>
      (grammar as unknown as { _testText(text: string): boolean })._testText(`${text}\n\n\n\n`);
    expect(accepts(JSON.stringify(answer))).toBe(true);
    expect(accepts(JSON.stringify({ ...answer, rating: 11 }))).toBe(false);
    expect(accepts(JSON.stringify({ ...answer, id: "x" }))).toBe(false);
  });

  it("share one definition per range, and keep ordinary schemas within the stack and budget checks", () => {
    const converted = convertJsonSchemaToGbnf(
      {
        type: "array",
        items: {
          ...zodLike,
          properties: { ...zodLike.properties, again: { type: "integer", minimum: 1, maximum: 10 } },
        },
      },
      { param: "schema" },
    ) as { $defs: Record<string, unknown> };
    expect(Object.keys(converted.$defs).sort()).toEqual(
      [
        "integer_0_100",
        "integer_1_10",
        "integer_1_1000000",
        "integer_1_999999999999999",
        "integer_minus50_50",
        "uuid",
      ].sort(),
    );
    // Alternatives of objects that begin alike, each with its ranges: as before, within 2000 stacks.
    const branches = Array.from({ length: 40 }, (_, index) => ({
      type: "object",
      properties: {
        kind: { const: `k${index}` },
        value: { type: "integer", minimum: index, maximum: index * 1000 + 5 },
      },
      required: ["kind", "value"],
    }));
    expect(refusal({ type: "array", items: { anyOf: branches } })).toBeUndefined();
  });

  it("are named in the converted schema's JSON, which the grammar cache keys by, and only the conversion names them", () => {
    const bounded = convertJsonSchemaToGbnf(
      { type: "object", properties: { a: { type: "integer", minimum: 1, maximum: 10 } } },
      { param: "schema" },
    );
    // A client's definition of the same name and type, with a marker of its own that is dropped.
    const plain = convertJsonSchemaToGbnf(
      {
        type: "object",
        properties: { a: { $ref: "#/$defs/integer_1_10" } },
        $defs: { integer_1_10: { type: "integer", "x-tollgate-grammar": "uuid" } },
      },
      { param: "schema" },
    );
    expect(JSON.stringify(bounded)).toContain('"x-tollgate-grammar":"integer 1 10"');
    expect(JSON.stringify(plain)).not.toContain("x-tollgate-grammar");
  });

  it("count their text in the conversion's budget of characters", () => {
    // 900 distinct ranges of 15 digits: about 680 characters of grammar each, 600,000 in all.
    const properties = Object.fromEntries(
      Array.from({ length: 900 }, (_, index) => [
        `p${index}`,
        { type: "integer", minimum: -123456789012345 - index, maximum: 987654321098765 },
      ]),
    );
    expect(refusal({ type: "object", properties })).toMatch(
      /more than 500000 characters .*grammars of integer ranges/,
    );
  });
});
