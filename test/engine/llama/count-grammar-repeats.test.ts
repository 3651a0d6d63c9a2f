import type { GbnfJsonSchema } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { countGrammarRepeats } from "../../../src/engine/llama/count-grammar-repeats.ts";
import { buildJsonGrammarText } from "../../../src/engine/llama/create-json-grammar.ts";

/** A client's schema as planning converts it for a grammar. */
function converted(schema: unknown): GbnfJsonSchema {
  return convertJsonSchemaToGbnf(schema, { param: "response_format.json_schema.schema" });
}

/**
 * What the grammar text's repeated groups make llama.cpp build: for `(x){m,n}` `n` (m copies,
 * n - m rules), for `(x){m}` and `(x){m,}` `m`. Repeated terminals (indentation, a number's
 * digits, a `\u` escape's four) are the same few in every grammar.
 */
function repeatsInGrammarText(text: string): number {
  let repeats = 0;
  for (const [, minimum, comma, maximum] of text.matchAll(/\)\{(\d+)(,?)(\d*)\}/g))
    repeats += comma === "" || maximum === "" ? Number(minimum) : Number(maximum);
  return repeats;
}

const objectOf = (properties: Record<string, unknown>) => ({ type: "object", properties });

describe("countGrammarRepeats", () => {
  it("counts a range's maximum, or its minimum without one, and nothing for a range without bounds", () => {
    expect(countGrammarRepeats(converted({ type: "string", minLength: 3, maxLength: 40 }))).toBe(40);
    expect(countGrammarRepeats(converted({ type: "string", minLength: 7 }))).toBe(7);
    expect(countGrammarRepeats(converted({ type: "string" }))).toBe(0);
    expect(countGrammarRepeats(converted({ type: "array", items: { type: "integer" }, maxItems: 30 }))).toBe(
      30,
    );
    expect(
      countGrammarRepeats(
        converted({ type: "object", additionalProperties: { type: "integer" }, maxProperties: 9 }),
      ),
    ).toBe(9);
    // Items beyond the tuple's repeat; the tuple's are written once each.
    expect(
      countGrammarRepeats(
        converted({ type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], maxItems: 12 }),
      ),
    ).toBe(10);
  });

  it("counts a string range once however many strings share it, an array's each time", () => {
    const strings = objectOf(
      Object.fromEntries(
        Array.from({ length: 500 }, (_, index) => [`s${index}`, { type: "string", maxLength: 1000 }]),
      ),
    );
    expect(countGrammarRepeats(converted(strings))).toBe(1000);
    const arrays = objectOf(
      Object.fromEntries(
        Array.from({ length: 5 }, (_, index) => [
          `a${index}`,
          { type: "array", items: { type: "string" }, maxItems: 100 },
        ]),
      ),
    );
    expect(countGrammarRepeats(converted(arrays))).toBe(500);
  });

  it("counts definitions once, however often they are referred to", () => {
    const schema = {
      type: "object",
      $defs: { code: { type: "string", minLength: 2, maxLength: 8 }, list: { type: "array", maxItems: 50 } },
      properties: {
        a: { $ref: "#/$defs/list" },
        b: { $ref: "#/$defs/list" },
        c: { type: "array", items: { $ref: "#/$defs/code" } },
      },
    };
    expect(countGrammarRepeats(converted(schema))).toBe(8 + 50);
  });

  it("counts at least what node-llama-cpp's grammar text makes llama.cpp repeat (pins its grammar writer)", async () => {
    const schemas = [
      objectOf({
        name: { type: "string", minLength: 1, maxLength: 200 },
        code: { type: "string", minLength: 4, maxLength: 4 },
        prefix: { type: "string", minLength: 12 },
        tags: { type: "array", items: { type: "string", maxLength: 30 }, minItems: 1, maxItems: 20 },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "boolean" }], maxItems: 6 },
        map: {
          type: "object",
          additionalProperties: { type: "string" },
          minProperties: 2,
          maxProperties: 40,
        },
        nested: {
          anyOf: [
            {
              type: "array",
              items: { type: "array", items: { type: "string", maxLength: 5 }, maxItems: 7 },
              maxItems: 9,
            },
            { type: "null" },
          ],
        },
      }),
      objectOf({ a: { type: "array", items: { type: "integer" }, minItems: 3 } }),
    ];
    for (const schema of schemas) {
      const text = await buildJsonGrammarText(converted(schema));
      expect(text).toBeDefined();
      const repeats = repeatsInGrammarText(text ?? "");
      expect(repeats).toBeGreaterThan(0);
      expect(repeats).toBeLessThanOrEqual(countGrammarRepeats(converted(schema)));
    }
  });
});
