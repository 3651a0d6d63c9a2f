import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { AppError } from "../../../src/errors/app-error.ts";

const param = "response_format.json_schema.schema";

function convert(schema: unknown, grammarLimits = true) {
  return convertJsonSchemaToGbnf(schema, { param, grammarLimits });
}

/** The error converting `schema` throws, or `undefined`. */
function refusal(schema: unknown, grammarLimits = true): AppError | undefined {
  try {
    convert(schema, grammarLimits);
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

describe("convertJsonSchemaToGbnf: anyOf and oneOf beside other keywords", () => {
  // Regression: `{...siblings, ...branch}` let a branch's keywords replace those beside it.
  it("makes each branch meet the keywords beside it too", () => {
    const object = { type: "object", properties: { id: { type: "integer" } }, required: ["id"] };
    // The branch's properties are added to those beside it (`id` was dropped).
    expect(
      convert({ ...object, anyOf: [{ properties: { a: { type: "string" } }, required: ["a"] }] }),
    ).toEqual({
      type: "object",
      properties: { id: { type: "integer" }, a: { type: "string" } },
    });
    // The types both allow (`null` was written under `type: "object"`).
    expect(convert({ ...object, oneOf: [{ type: ["object", "null"] }, { type: "null" }] })).toEqual({
      type: "object",
      properties: { id: { type: "integer" } },
    });
    // A property both declare meets both schemas; the tighter bounds hold.
    expect(
      convert({
        type: "object",
        properties: { a: { type: "string", maxLength: 8 } },
        anyOf: [{ properties: { a: { minLength: 2, maxLength: 20 } } }],
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string", minLength: 2, maxLength: 8 } } });
    expect(
      convert({ type: "string", maxLength: 3, anyOf: [{ maxLength: 10 }, { type: "integer" }] }),
    ).toEqual({
      type: "string",
      maxLength: 3,
    });
    // Constants both allow, in the branch's order.
    expect(convert({ enum: ["a", "b", { x: [1] }], anyOf: [{ enum: [{ x: [1] }, "c", "a"] }] })).toEqual({
      oneOf: [
        {
          type: "object",
          properties: { x: { type: "array", prefixItems: [{ const: 1 }], minItems: 1, maxItems: 1 } },
        },
        { const: "a" },
      ],
    });
    // `nullable` is the null type beside the type, intersected like one.
    expect(
      convert({
        type: "string",
        nullable: true,
        anyOf: [{ type: "integer", nullable: true }, { maxLength: 2 }],
      }),
    ).toEqual({
      oneOf: [{ type: "null" }, { oneOf: [{ type: "string", maxLength: 2 }, { type: "null" }] }],
    });
  });

  it("keeps additionalProperties' meaning: a name one side does not declare meets its additionalProperties", () => {
    const closed = { type: "object", properties: { a: { type: "string" } }, additionalProperties: false };
    // An optional `b` the keywords beside do not allow is left out; a required one leaves the branch no value.
    expect(
      convert({
        ...closed,
        anyOf: [{ properties: { b: { type: "string" } } }, { properties: { b: {} }, required: ["b"] }],
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string" } } });
    expect(
      convert({
        type: "object",
        properties: { a: { type: "string" } },
        anyOf: [
          { properties: { b: { type: "null" } }, additionalProperties: { type: "string", maxLength: 1 } },
        ],
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string", maxLength: 1 }, b: { type: "null" } } });
  });

  it("merges tuples and items position by position", () => {
    expect(
      convert({
        type: "array",
        prefixItems: [{ type: "string" }],
        items: { type: "integer" },
        anyOf: [
          { items: [{ maxLength: 2 }, { minimum: 1 }], additionalItems: false },
          { prefixItems: [false] },
        ],
      }),
    ).toEqual({
      oneOf: [
        {
          type: "array",
          // The branch's `minimum` holds for the integer (see convert-uuid-and-integer-ranges.test.ts).
          prefixItems: [{ type: "string", maxLength: 2 }, { $ref: "#/$defs/integer_1_999999999999999" }],
          minItems: 2,
          maxItems: 2,
        },
        { type: "array", maxItems: 0 },
      ],
      $defs: {
        integer_1_999999999999999: {
          type: "integer",
          minimum: 1,
          maximum: 999999999999999,
          "x-tollgate-grammar": "integer 1 999999999999999",
        },
      },
    });
  });

  it("converts anyOf beside oneOf as both (oneOf was dropped)", () => {
    expect(
      convert({
        anyOf: [{ type: "string" }, { type: "null" }],
        oneOf: [{ type: "null" }, { type: "integer" }],
      }),
    ).toEqual({
      type: "null",
    });
  });

  it("merges a $ref branch with the keywords beside it, and stops where it recurses", () => {
    expect(
      convert({
        type: "object",
        required: ["kind"],
        anyOf: [{ $ref: "#/$defs/A" }, { $ref: "#/$defs/N" }],
        $defs: { A: { properties: { kind: { const: "a" } } }, N: { type: "null" } },
      }),
    ).toEqual({ type: "object", properties: { kind: { const: "a" } } });
    // A branch that leads back into itself beside keywords is a reference, not merged again and again.
    const nested = convert({
      type: "object",
      properties: { child: { type: "object", anyOf: [{ $ref: "#/$defs/Node" }] } },
      $defs: {
        Node: {
          properties: {
            child: { type: ["object", "null"], anyOf: [{ $ref: "#/$defs/Node" }, { type: "null" }] },
          },
          required: ["child"],
        },
      },
    });
    expect(nested).toMatchObject({
      properties: {
        child: { properties: { child: { oneOf: [{ $ref: "#/$defs/Node" }, { type: "null" }] } } },
      },
    });
  });

  it("leaves out a branch that no value meets beside the rest, and refuses the schema when every one is", () => {
    expect(convert({ type: "integer", anyOf: [false, { type: "string" }, { minimum: 2 }] })).toEqual({
      oneOf: [{ $ref: "#/$defs/integer_2_999999999999999" }],
      $defs: {
        integer_2_999999999999999: {
          type: "integer",
          minimum: 2,
          maximum: 999999999999999,
          "x-tollgate-grammar": "integer 2 999999999999999",
        },
      },
    });
    // Within a branch too: here an allOf with no type in common.
    expect(
      convert({
        type: "object",
        properties: { v: {} },
        anyOf: [
          { properties: { v: { allOf: [{ type: "string" }, { type: "null" }] } }, required: ["v"] },
          { properties: { w: { type: "null" } } },
        ],
      }),
    ).toEqual({
      type: "object",
      properties: {
        v: {
          oneOf: [
            { type: ["string", "number", "boolean", "null"] },
            { type: "array" },
            { type: "object", additionalProperties: true },
          ],
        },
        w: { type: "null" },
      },
    });
    for (const grammarLimits of [true, false]) {
      const error = refusal(
        {
          type: "object",
          properties: { p: { type: "integer", oneOf: [{ type: "string" }, { const: "x" }] } },
        },
        grammarLimits,
      );
      expect(error).toMatchObject({ code: "invalid_value", param, status: 400 });
      expect(error?.message).toMatch(
        /at '#\/properties\/p': no branch of 'oneOf' can match beside the keywords next to it \(0: no 'type' in common \(integer and string\); 1: no 'const' or 'enum' value of the 'type' \(integer\)\)/,
      );
    }
    expect(refusal({ anyOf: [false] })?.message).toMatch(
      /at '#': no branch of 'anyOf' can match \(0: one that is false/,
    );
    // An invalid branch is refused as before, not left out.
    expect(refusal({ type: "object", anyOf: [{ type: "banana" }, {}] })?.message).toMatch(
      /at '#\/anyOf\/0': 'type' has "banana"/,
    );
    expect(
      refusal({ anyOf: [{ type: "string", minLength: 2, maxLength: 1 }, { type: "null" }] }),
    ).toBeUndefined();
  });

  it("intersects the properties of allOf branches that both declare (the later replaced the earlier)", () => {
    expect(
      convert({
        allOf: [{ properties: { a: { type: "integer" } } }, { properties: { a: { enum: [1, "x"] } } }],
      }),
    ).toEqual({ type: "object", properties: { a: { const: 1 } } });
    expect(refusal({ allOf: [{ type: "string" }, false] })?.message).toMatch(
      /the 'allOf' branches have one that is false/,
    );
  });
});

describe("convertJsonSchemaToGbnf: lengths beside a format", () => {
  it("keeps an enum's times with or without a zone beside format time (it writes them without)", () => {
    expect(convert({ type: "string", format: "time", enum: ["18:00:00", "18:00:00Z", "x"] })).toEqual({
      oneOf: [{ const: "18:00:00" }, { const: "18:00:00Z" }],
    });
  });

  // Regression: `maxLength` 5 beside `format: "date"` was dropped, and a 10-character date written.
  it("refuses lengths that leave out a form of the format, which the grammar writes whole", () => {
    expect(refusal({ type: "string", format: "date", maxLength: 5 })?.message).toMatch(
      /at '#': 'format' 'date' is written in 10 characters, which 'minLength' and 'maxLength' \(0 to 5\) do not allow, so no value can match/,
    );
    expect(refusal({ type: "string", format: "date-time", minLength: 30 })?.message).toMatch(
      /'date-time' is written in 20, 24 characters, which/,
    );
    // "12:00:00" fits, "12:00:00.000" does not, and the grammar cannot tell them apart.
    expect(refusal({ type: "string", format: "time", maxLength: 10 })?.message).toMatch(
      /'format' 'time' is written in 8, 12 characters, some of which .* do not allow: the output grammar can only write the format whole. Allow 8 to 12 characters/,
    );
    expect(convert({ type: "string", format: "date", minLength: 10, maxLength: 10 })).toEqual({
      type: "string",
      format: "date",
    });
    // A time is a grammar of ours (no zone, which node-llama-cpp's own format would want).
    expect(convert({ type: "string", format: "time", minLength: 8, maxLength: 12 })).toEqual({
      $defs: { time: { type: "string", minLength: 8, maxLength: 12, "x-tollgate-grammar": "time" } },
      oneOf: [{ $ref: "#/$defs/time" }],
    });
    // The length is not written into the grammar: above what a grammar takes is no matter.
    expect(convert({ type: "string", format: "date-time", maxLength: 5000 })).toEqual({
      type: "string",
      format: "date-time",
    });
    // Invalid and contradictory lengths are refused as they are without a format.
    expect(refusal({ type: "string", format: "date", maxLength: -1 })?.message).toMatch(/'maxLength' is -1/);
    expect(refusal({ type: "string", format: "date", minLength: 20, maxLength: 12 })?.message).toMatch(
      /is greater than/,
    );
    // An upstream model takes them (a format is only an annotation to JSON Schema).
    expect(refusal({ type: "string", format: "date", maxLength: 5 }, false)).toBeUndefined();
    expect(refusal({ type: "string", format: "time", maxLength: 10 }, false)).toBeUndefined();
    // In an anyOf, a branch whose format no length allows is left out.
    expect(
      convert({ type: "string", maxLength: 19, anyOf: [{ format: "date-time" }, { format: "time" }] }),
    ).toEqual({
      $defs: { time: { type: "string", minLength: 8, maxLength: 12, "x-tollgate-grammar": "time" } },
      oneOf: [{ $ref: "#/$defs/time" }],
    });
  });
});

describe("convertJsonSchemaToGbnf: tuples and alternatives that end", () => {
  // Regression: two prefixItems beside maxItems 1 wrote two items.
  it("writes no more tuple items than maxItems", () => {
    expect(
      convert({ type: "array", prefixItems: [{ type: "string" }, { type: "null" }], maxItems: 1 }),
    ).toEqual({
      type: "array",
      prefixItems: [{ type: "string" }],
      minItems: 1,
      maxItems: 1,
    });
  });

  // Regression: the branch that can only nest was kept, and the model could nest it until the context was full.
  it("leaves out an alternative without a finite value beside one with, and refuses when none has", () => {
    const deep = { type: "array", minItems: 1, items: { $ref: "#/$defs/deep" } };
    expect(
      convert({
        type: "object",
        properties: { a: { anyOf: [{ $ref: "#/$defs/deep" }, { type: "null" }] } },
        required: ["a"],
        $defs: { deep },
      }),
    ).toEqual({ type: "object", properties: { a: { oneOf: [{ type: "null" }] } } });
    expect(
      refusal({
        type: "object",
        properties: { a: { anyOf: [{ $ref: "#/$defs/deep" }, { $ref: "#/$defs/deep" }] } },
        required: ["a"],
        $defs: { deep },
      })?.message,
    ).toMatch(/at '#\/properties\/a': the required property 'a' has no finite value/);
  });
});

describe("convertJsonSchemaToGbnf: constants beside other keywords", () => {
  // Regression: a constant was written as it is, whatever the keywords beside it said.
  it("keeps the const and enum values that meet the keywords beside them", () => {
    expect(convert({ enum: ["a", "abcd", null], minLength: 3 })).toEqual({
      oneOf: [{ const: "abcd" }, { const: null }],
    });
    expect(convert({ enum: [[1], [1, 2, 3]], maxItems: 2 })).toEqual({
      type: "array",
      prefixItems: [{ const: 1 }],
      minItems: 1,
      maxItems: 1,
    });
    expect(convert({ enum: ["2024-02-03", "soon"], format: "date" })).toEqual({ const: "2024-02-03" });
    // An upstream model may take the format for an annotation, as JSON Schema does.
    expect(refusal({ const: "soon", format: "date" }, false)).toBeUndefined();
    expect(refusal({ const: "soon", format: "date" })?.message).toMatch(
      /'const' does not meet the keywords beside it/,
    );
    // Members meet their schemas: properties, additionalProperties, items, and their allOf and anyOf.
    expect(
      convert({
        enum: [{ a: 1 }, { a: "x" }, { b: true }, { a: 2, c: 1 }],
        properties: { a: { allOf: [{ type: "integer" }, { anyOf: [{ const: 1 }, { const: 2 }] }] } },
        required: ["a"],
        additionalProperties: false,
      }),
    ).toEqual({ type: "object", properties: { a: { const: 1 } } });
    // A const and an enum beside each other: the const must be one of the values.
    expect(refusal({ const: "a", enum: ["b"] })?.message).toMatch(
      /'const' is not one of the 'enum' values beside it/,
    );
    expect(refusal({ const: "a", minLength: 2 })?.message).toMatch(
      /'const' does not meet the keywords beside it/,
    );
    expect(refusal({ enum: [[]], minItems: 1 })?.message).toMatch(
      /no value of 'enum' meets the keywords beside it/,
    );
    expect(convert({ type: "string", nullable: true, enum: ["a", null, 1] })).toEqual({
      oneOf: [{ const: "a" }, { const: null }],
    });
  });

  // Regression: `{"minItems": 2}` was any value, an array of one item among them.
  it("takes counts of items or properties to mean an array or an object, as lengths mean a string", () => {
    expect(convert({ minItems: 2 })).toEqual({ type: "array", minItems: 2 });
    expect(convert({ maxProperties: 1 })).toEqual({
      type: "object",
      additionalProperties: true,
      maxProperties: 1,
    });
  });
});

describe("convertJsonSchemaToGbnf: patternProperties beside additionalProperties: false", () => {
  // Names a pattern matches are allowed though `additionalProperties` is false: the conversion
  // does not run patterns, so it takes an undeclared name for allowed rather than refuse a schema
  // values meet (regression: refused with 400, for upstream models too, after merges learned to
  // hold undeclared names to `additionalProperties`).
  const patterned = {
    type: "object",
    patternProperties: { "^x_": { type: "string" } },
    additionalProperties: false,
  };
  it.each([
    ["required", { ...patterned, required: ["x_id"] }],
    ["allOf", { ...patterned, allOf: [{ properties: { x_id: { minLength: 1 } }, required: ["x_id"] }] }],
    ["anyOf", { ...patterned, anyOf: [{ properties: { x_id: { type: "string" } }, required: ["x_id"] }] }],
    ["const", { type: "object", properties: { a: { ...patterned, const: { x_1: "one" } } } }],
  ])("accepts a %s that names a property only a pattern allows", (_name, schema) => {
    expect(refusal(schema, false)).toBeUndefined();
    expect(refusal(schema, true)).toBeUndefined();
  });

  it("still refuses a required name where no pattern can allow it", () => {
    const closed = { type: "object", additionalProperties: false, required: ["x_id"] };
    expect(refusal(closed, false)?.message).toContain("'required' names 'x_id'");
  });
});
