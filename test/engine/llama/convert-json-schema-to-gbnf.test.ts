import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { AppError } from "../../../src/errors/app-error.ts";

const param = "response_format.json_schema.schema";

function convert(schema: unknown) {
  return convertJsonSchemaToGbnf(schema, { param });
}

/** The error converting `schema` throws, or `undefined`. */
function refusal(schema: unknown): AppError | undefined {
  try {
    convert(schema);
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

const anyValue = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "array" },
    { type: "object", additionalProperties: true },
  ],
};

describe("convertJsonSchemaToGbnf", () => {
  it("keeps what the grammar subset supports", () => {
    const schema = {
      type: "object",
      description: "weather query",
      properties: {
        city: { type: "string", minLength: 1, maxLength: 40 },
        unit: { enum: ["c", "f"] },
        days: { type: "array", items: { type: "integer" }, maxItems: 3 },
        when: { type: "string", format: "date" },
      },
      required: ["city"],
      additionalProperties: false,
    };
    expect(convert(schema)).toEqual({
      type: "object",
      description: "weather query",
      properties: {
        city: { type: "string", minLength: 1, maxLength: 40 },
        unit: { oneOf: [{ const: "c" }, { const: "f" }] },
        days: { type: "array", items: { type: "integer" }, maxItems: 3 },
        when: { type: "string", format: "date" },
      },
    });
  });

  it("turns empty and unknown schemas into any JSON value", () => {
    expect(convert({})).toEqual(anyValue);
    expect(convert(true)).toEqual(anyValue);
    expect(convert({ type: "object" })).toEqual({
      type: "object",
      additionalProperties: true,
    });
    expect(convert({ type: "object", additionalProperties: { type: "number" } })).toEqual({
      type: "object",
      additionalProperties: { type: "number" },
    });
  });

  it("emits exactly the declared properties, none for an empty properties object", () => {
    expect(convert({ type: "object", properties: {} })).toEqual({
      type: "object",
      properties: {},
    });
    expect(
      convert({
        type: "object",
        properties: { a: { type: "null" } },
        additionalProperties: true,
      }),
    ).toEqual({ type: "object", properties: { a: { type: "null" } } });
  });

  // Regression: beside `properties`, whose every one is written, `minProperties` and
  // `maxProperties` were ignored: `maxProperties: 1` beside two optional properties wrote both,
  // and counts no value can meet were answered with 200.
  it("holds the properties it writes to maxProperties, leaving out the last optional ones", () => {
    const properties = { a: { type: "integer" }, b: { type: "integer" }, c: { type: "null" } };
    expect(convert({ type: "object", properties, maxProperties: 1 })).toEqual({
      type: "object",
      properties: { a: { type: "integer" } },
    });
    expect(convert({ type: "object", properties, required: ["c"], maxProperties: 2 })).toEqual({
      type: "object",
      properties: { a: { type: "integer" }, c: { type: "null" } },
    });
    // A required property that is not declared counts too, and is kept.
    expect(convert({ type: "object", properties, required: ["z"], maxProperties: 1 })).toEqual({
      type: "object",
      properties: { z: anyValue },
    });
    expect(convert({ type: "object", properties, maxProperties: 3, minProperties: 3 })).toEqual({
      type: "object",
      properties,
    });
    // Not a repeat in the grammar: no grammar limit on it.
    expect(convert({ type: "object", properties, maxProperties: 100_000 })).toEqual({
      type: "object",
      properties,
    });
  });

  // Regression: the optional property that can only recurse was left out after the count was
  // checked: `{"a": 470}` answered a schema whose every object needs two properties.
  it("leaves out a property that can only recurse only as far as minProperties allows", () => {
    const integer = { type: "integer" };
    expect(
      refusal({
        type: "object",
        properties: { a: integer, next: { $ref: "#" } },
        additionalProperties: false,
        minProperties: 2,
      })?.message,
    ).toMatch(
      /at '#\/properties\/next': the property 'next', which 'minProperties' \(2\) needs written, has no finite value/,
    );
    const converted = convert({
      type: "object",
      properties: { a: integer, next: { $ref: "#" }, b: integer },
      additionalProperties: false,
      minProperties: 2,
    }) as { properties?: Record<string, unknown>; $defs?: unknown };
    expect(Object.keys(converted.properties ?? {})).toEqual(["a", "b"]);
    // Past maxProperties, what cannot end goes first: `{"a": 1, "b": true}` meets both counts
    // (regression: 400, `b` left out for the maximum before `r` for its recursion).
    const counted = convert({
      type: "object",
      properties: { a: integer, r: { $ref: "#" }, b: { type: "boolean" } },
      required: ["a"],
      additionalProperties: false,
      minProperties: 2,
      maxProperties: 2,
    }) as { properties?: Record<string, unknown> };
    expect(Object.keys(counted.properties ?? {})).toEqual(["a", "b"]);
    const first = convert({
      type: "object",
      properties: { r: { $ref: "#" }, a: integer },
      maxProperties: 1,
    }) as {
      properties?: Record<string, unknown>;
    };
    expect(Object.keys(first.properties ?? {})).toEqual(["a"]);
    // Where more names may be added, minProperties is not enforced: left out as before.
    const open = convert({
      type: "object",
      properties: { a: integer, next: { $ref: "#" } },
      minProperties: 2,
    }) as {
      properties?: Record<string, unknown>;
    };
    expect(Object.keys(open.properties ?? {})).toEqual(["a"]);
  });

  it("refuses number and format keywords whose value cannot mean anything (regression: ignored, any number written)", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ type: "number", minimum: "3" }, `'minimum' must be a number, not "3".`],
      [{ type: "integer", exclusiveMaximum: null }, "'exclusiveMaximum' must be a number, not null."],
      [{ type: "number", multipleOf: 0 }, "'multipleOf' must be a number greater than 0, not 0."],
      [{ type: "number", multipleOf: -2 }, "'multipleOf' must be a number greater than 0, not -2."],
      [{ type: "string", format: 5 }, "'format' must be a string, not 5."],
    ];
    for (const [schema, problem] of cases)
      expect(refusal(schema)?.message, JSON.stringify(schema)).toBe(
        `Invalid JSON Schema in '${param}' at '#': ${problem}`,
      );
    // Draft 4's boolean exclusive bounds are bounds.
    expect(refusal({ type: "integer", minimum: 1, exclusiveMinimum: true })).toBeUndefined();
    expect(refusal({ type: "number", minimum: 0.5, maximum: 2, multipleOf: 0.5 })).toBeUndefined();
  });

  it("refuses a minProperties that only patternProperties could meet, for a local model (regression: written empty, breaking it)", () => {
    const schema = {
      type: "object",
      patternProperties: { "^k[0-9]$": { type: "boolean" } },
      additionalProperties: false,
      minProperties: 1,
    };
    expect(refusal(schema)?.message).toMatch(
      /at '#': 'minProperties' is 1, but no property is declared and only 'patternProperties' allow other names, which a local model's grammar does not write/,
    );
    // An upstream model enforces it its own way; without the count, the empty object is a value.
    expect(convertJsonSchemaToGbnf(schema, { param, grammarLimits: false })).toBeDefined();
    expect(refusal({ ...schema, minProperties: 0 })).toBeUndefined();
  });

  it("refuses a minProperties above the declared properties that only patternProperties could meet, for a local model (regression: written with the declared ones, breaking it)", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "string" } },
      patternProperties: { "^x": { type: "integer" } },
      additionalProperties: false,
      minProperties: 2,
    };
    expect(refusal(schema)?.message).toMatch(
      /at '#': 'minProperties' is 2, but only 1 property is declared and only 'patternProperties' allow other names/,
    );
    expect(convertJsonSchemaToGbnf(schema, { param, grammarLimits: false })).toBeDefined();
    // The declared ones meet it.
    expect(refusal({ ...schema, minProperties: 1, required: ["a"] })).toBeUndefined();
  });

  it("refuses property counts no value can meet beside properties or additionalProperties: false", () => {
    const properties = { a: { type: "integer" }, b: { type: "integer" } };
    const cases: [unknown, RegExp][] = [
      [
        { type: "object", properties, required: ["a", "b"], maxProperties: 1 },
        /at '#': 'required' names 2 properties, but 'maxProperties' is 1, so no value can match/,
      ],
      [
        { type: "object", properties, additionalProperties: false, minProperties: 3 },
        /'minProperties' is 3, but 'additionalProperties' is false and only 2 properties are declared/,
      ],
      [
        { type: "object", additionalProperties: false, minProperties: 1 },
        /'minProperties' is 1, but 'additionalProperties' is false and no property is declared/,
      ],
      [
        { type: "object", properties, minProperties: 3, maxProperties: 2 },
        /'minProperties' \(3\) is greater/,
      ],
      [
        { type: "object", properties, maxProperties: "one" },
        /'maxProperties' is "one"; it must be a whole number/,
      ],
    ];
    for (const [schema, message] of cases) {
      const error = refusal(schema);
      expect(error?.code, JSON.stringify(schema)).toBe("invalid_value");
      expect(error?.message, JSON.stringify(schema)).toMatch(message);
    }
    // More properties may be added (not by the grammar, which writes no names of its own).
    expect(refusal({ type: "object", properties, minProperties: 3 })).toBeUndefined();
  });

  it("degrades anyOf, type lists, nullable, allOf and unsupported keywords", () => {
    expect(
      convert({
        anyOf: [
          { type: "string", pattern: "^(?=a)" },
          { type: "number", multipleOf: 3 },
        ],
      }),
    ).toEqual({
      oneOf: [{ type: "string" }, { type: "number" }],
    });
    expect(convert({ type: ["string", "null"] })).toEqual({
      oneOf: [{ type: "string" }, { type: "null" }],
    });
    expect(convert({ type: "integer", nullable: true })).toEqual({
      oneOf: [{ type: "integer" }, { type: "null" }],
    });
    expect(
      convert({
        allOf: [
          { type: "object", properties: { a: { type: "string" } } },
          { properties: { b: { type: "boolean" } }, required: ["c"] },
        ],
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string" }, b: { type: "boolean" }, c: anyValue } });
    // Regression: an undeclared required property took any value, whatever additionalProperties said.
    expect(
      convert({
        type: "object",
        properties: { a: { type: "string" } },
        required: ["a", "n"],
        additionalProperties: { type: "integer" },
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string" }, n: { type: "integer" } } });
  });

  it("rewrites definitions references and keeps recursive ones finite", () => {
    const converted = convert({
      type: "object",
      properties: { root: { $ref: "#/definitions/node" }, again: { $ref: "#/properties/root" } },
      definitions: {
        node: {
          type: "object",
          properties: { children: { type: "array", items: { $ref: "#/definitions/node" } } },
        },
      },
    });
    expect(converted).toEqual({
      type: "object",
      properties: { root: { $ref: "#/$defs/node" }, again: { $ref: "#/$defs/root" } },
      $defs: {
        node: {
          type: "object",
          properties: { children: { type: "array", items: { $ref: "#/$defs/node" } } },
        },
        root: { $ref: "#/$defs/node" },
      },
    });
  });

  // Regression: every property was written, so `next` had to nest forever (run to the end of the context).
  it("leaves out an optional property that can only recurse, refuses a required one", () => {
    const list = { type: "object", properties: { value: { type: "integer" }, next: { $ref: "#" } } };
    expect(convert(list)).toEqual({ type: "object", properties: { value: { type: "integer" } } });
    // Through a definition, whose own optional recursion is left out too.
    expect(
      convert({
        type: "object",
        properties: { head: { $ref: "#/$defs/node" } },
        required: ["head"],
        $defs: {
          node: { type: "object", properties: { tail: { $ref: "#/$defs/node" }, v: { type: "null" } } },
        },
      }),
    ).toEqual({
      type: "object",
      properties: { head: { $ref: "#/$defs/node" } },
      $defs: { node: { type: "object", properties: { v: { type: "null" } } } },
    });
    // Recursion with an end (an alternative, an array) is kept as it was.
    const nullable = {
      type: "object",
      properties: { next: { anyOf: [{ $ref: "#" }, { type: "null" }] } },
    };
    expect(convert(nullable)).toEqual({
      type: "object",
      properties: { next: { oneOf: [{ $ref: "#/$defs/tollgate_root" }, { type: "null" }] } },
      $defs: {
        tollgate_root: {
          type: "object",
          properties: { next: { oneOf: [{ $ref: "#/$defs/tollgate_root" }, { type: "null" }] } },
        },
      },
    });
    // Checked for validity alone (an upstream model), the schema is left as it is.
    expect(convertJsonSchemaToGbnf(list, { param, grammarLimits: false })).toMatchObject({
      properties: { next: { $ref: "#/$defs/tollgate_root" } },
    });

    const required = refusal({ ...list, required: ["next"] });
    expect(required).toMatchObject({ code: "invalid_value", param });
    expect(required?.message).toMatch(
      /at '#\/properties\/next': the required property 'next' has no finite value/,
    );
    expect(refusal({ type: "array", items: { $ref: "#" }, minItems: 1 })?.message).toMatch(
      /at '#': the schema has no finite value/,
    );
    // A cycle of references alone is refused before the grammar parser (see check-grammar-stacks.ts).
    expect(
      refusal({
        type: "object",
        properties: { a: { $ref: "#/$defs/a" } },
        $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } },
      })?.message,
    ).toMatch(/cannot be turned into a grammar .* make every such cycle pass through/);
  });

  // Regression: the `$ref` was copied into the merge and converted first, dropping `extra`.
  it("merges what an allOf branch's $ref points at with the other branches", () => {
    expect(
      convert({
        allOf: [
          { $ref: "#/$defs/Base" },
          { type: "object", properties: { extra: { type: "string", maxLength: 5 } }, required: ["extra"] },
        ],
        $defs: { Base: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] } },
      }),
    ).toEqual({
      type: "object",
      properties: { id: { type: "integer" }, extra: { type: "string", maxLength: 5 } },
    });
    // Through a reference to a reference, and the target's own allOf.
    expect(
      convert({
        allOf: [{ $ref: "#/$defs/Alias" }, { properties: { b: { type: "boolean" } } }],
        $defs: {
          Alias: { $ref: "#/$defs/Base" },
          Base: { allOf: [{ properties: { a: { type: "null" } } }, { $ref: "#/$defs/Base" }] },
        },
      }),
    ).toEqual({ type: "object", properties: { a: { type: "null" }, b: { type: "boolean" } } });
    // A cycle stays a reference, refused for a grammar (see check-grammar-stacks.ts).
    const cycle = {
      $defs: { A: { allOf: [{ $ref: "#/$defs/B" }] }, B: { allOf: [{ $ref: "#/$defs/A" }] } },
      $ref: "#/$defs/A",
    };
    expect(convertJsonSchemaToGbnf(cycle, { param, grammarLimits: false })).toEqual({
      oneOf: [{ $ref: "#/$defs/A" }],
      $defs: { A: { $ref: "#/$defs/A" } },
    });
    expect(refusal(cycle)?.message).toMatch(/cannot be turned into a grammar/);
    // What the target holds is checked as a converted schema is.
    expect(
      refusal({ allOf: [{ $ref: "#/$defs/Bad" }, { type: "object" }], $defs: { Bad: { type: "banana" } } })
        ?.message,
    ).toMatch(/at '#\/\$defs\/Bad': 'type' has "banana"/);
  });

  it("gives two definitions of one name in $defs and definitions a $defs entry each", () => {
    expect(
      convert({
        type: "array",
        prefixItems: [{ $ref: "#/$defs/a" }, { $ref: "#/definitions/a" }],
        $defs: { a: { type: "string" } },
        definitions: { a: { type: "null" } },
      }),
    ).toEqual({
      type: "array",
      prefixItems: [{ $ref: "#/$defs/a" }, { $ref: "#/$defs/a_2" }],
      minItems: 2,
      $defs: { a: { type: "string" }, a_2: { type: "null" } },
    });
  });

  it("makes exact schemas for object and array constants", () => {
    expect(convert({ const: { a: [1, "x"] } })).toEqual({
      type: "object",
      properties: {
        a: { type: "array", prefixItems: [{ const: 1 }, { const: "x" }], minItems: 2, maxItems: 2 },
      },
    });
  });

  it("converts tuples of both drafts", () => {
    expect(convert({ type: "array", items: [{ type: "string" }], additionalItems: false })).toEqual({
      type: "array",
      prefixItems: [{ type: "string" }],
      minItems: 1,
      maxItems: 1,
    });
    expect(convert({ prefixItems: [{ type: "null" }], items: { type: "boolean" } })).toEqual({
      type: "array",
      prefixItems: [{ type: "null" }],
      items: { type: "boolean" },
      minItems: 1,
    });
  });

  it("holds an array with items: false to its tuple's items, none without one (regression: ignored)", () => {
    expect(convert({ type: "array", items: false })).toEqual({ type: "array", maxItems: 0 });
    expect(convert({ type: "array", prefixItems: [{ type: "string" }], items: false, maxItems: 5 })).toEqual({
      type: "array",
      prefixItems: [{ type: "string" }],
      minItems: 1,
      maxItems: 1,
    });
    expect(refusal({ type: "array", items: false, minItems: 1 })?.message).toMatch(
      /'minItems' is 1, but 'items' is false: an array may hold no items, so no value can match/,
    );
    expect(refusal({ type: "array", prefixItems: [{}], items: false, minItems: 3 })?.message).toMatch(
      /'minItems' is 3, but 'items' is false: an array may hold only the 1 of 'prefixItems'/,
    );
  });

  it("refuses clearly invalid schemas with invalid_value, naming the field, the place and the problem", () => {
    const cases: [unknown, RegExp][] = [
      [{ type: "banana" }, /at '#': 'type' has "banana", which is not a JSON Schema type \(string, number/],
      [{ type: ["string", 5] }, /'type' has 5, which is not a JSON Schema type/],
      [{ type: [] }, /'type' is an empty array/],
      [
        { type: "object", required: "a" },
        /at '#': 'required' must be an array of property names \(strings\), not "a"/,
      ],
      [{ type: "object", required: ["a", 1] }, /'required' must be an array of property names/],
      [{ $ref: "#/nope" }, /at '#': '\$ref' "#\/nope" does not resolve/],
      [{ $ref: "https://example.com/x.json" }, /'\$ref' "https:\/\/example.com\/x.json" does not resolve/],
      [{ $ref: 5 }, /'\$ref' must be a string, not 5/],
      [{ type: "object", properties: [] }, /'properties' must be an object of schemas by name, not \[\]/],
      [
        { type: "object", properties: { a: "string" } },
        /at '#\/properties\/a': a schema must be an object or a boolean, not "string"/,
      ],
      [{ enum: "a" }, /'enum' must be a non-empty array, not "a"/],
      [{ enum: [] }, /'enum' must be a non-empty array, not \[\]/],
      [{ anyOf: {} }, /'anyOf' must be a non-empty array/],
      [{ oneOf: [{ type: "string" }, { type: "nope" }] }, /at '#\/oneOf\/1': 'type' has "nope"/],
      [
        { allOf: [{ type: "string" }, 3] },
        /at '#\/allOf\/1': a schema must be an object or a boolean, not 3/,
      ],
      [{ type: "array", items: "string" }, /'items' must be a schema/],
      [{ type: "object", additionalProperties: "no" }, /'additionalProperties' must be a schema/],
      [{ $defs: [] }, /'\$defs' must be an object/],
      [
        { type: "object", properties: { "a/b": { type: "array", items: { type: "strng" } } } },
        /at '#\/properties\/a~1b\/items': 'type' has "strng"/,
      ],
      [{ $ref: "#/$defs/x", $defs: { x: { type: "banana" } } }, /at '#\/\$defs\/x': 'type' has "banana"/],
    ];
    for (const [schema, message] of cases) {
      const error = refusal(schema);
      expect(error?.code, JSON.stringify(schema)).toBe("invalid_value");
      expect(error?.status).toBe(400);
      expect(error?.param).toBe(param);
      expect(error?.message).toMatch(new RegExp(`^Invalid JSON Schema in '${param}' `));
      expect(error?.message, JSON.stringify(schema)).toMatch(message);
    }
  });

  // Regression: the value cut at 40 code units and the pointer cut at 100 from each end split
  // emoji, and the client got lone surrogates ("\ud83d") in the message.
  it("shortens the value and the pointer it names without cutting an emoji in half", () => {
    // The JSON text of the type is a quote, 38 letters, then the emoji at units 39 and 40.
    const type = refusal({ type: `${"x".repeat(38)}😀 more` });
    expect(type?.message).toContain(`'type' has "${"x".repeat(38)}..., which is not`);
    // '#/properties/' and 86 letters are 99 units; 99 units follow the second emoji.
    const name = `${"p".repeat(86)}😀${"q".repeat(20)}😀${"r".repeat(99)}`;
    const pointer = refusal({ type: "object", properties: { [name]: { type: "banana" } } });
    expect(pointer?.message).toContain(
      `at '#/properties/${"p".repeat(86)}...${"r".repeat(99)}': 'type' has "banana"`,
    );
    expect(pointer?.message.isWellFormed()).toBe(true);
  });

  // Regression: minItems 3 with maxItems 1 gave 3 items, minLength 5 with maxLength 2 five characters.
  it("refuses a minimum above its maximum, which no value meets", () => {
    const cases: [unknown, RegExp][] = [
      [
        { type: "array", minItems: 3, maxItems: 1 },
        /at '#': 'minItems' \(3\) is greater than 'maxItems' \(1\), so no value can match/,
      ],
      [
        { type: "object", properties: { a: { type: "string", minLength: 5, maxLength: 2 } } },
        /at '#\/properties\/a': 'minLength' \(5\) is greater than 'maxLength' \(2\)/,
      ],
      [{ type: "object", minProperties: 2, maxProperties: 1 }, /'minProperties' \(2\) is greater/],
      // Not enforced, but refused where no number is in the range (regression: 200, found by fuzzing).
      [{ type: "integer", minimum: 10, maximum: 1 }, /'minimum' \(10\) is greater than 'maximum' \(1\)/],
    ];
    for (const [schema, message] of cases) {
      const error = refusal(schema);
      expect(error?.code, JSON.stringify(schema)).toBe("invalid_value");
      expect(error?.param).toBe(param);
      expect(error?.message, JSON.stringify(schema)).toMatch(message);
    }
    expect(refusal({ type: "string", minLength: 2, maxLength: 2 })).toBeUndefined();
  });

  it("refuses what no value of the declared type can meet: a constant of another type, conflicting allOf types, an undeclarable required property", () => {
    const cases: [unknown, RegExp][] = [
      [{ type: "string", const: 5 }, /at '#': 'const' is not of the 'type' \(string\)/],
      [{ type: "integer", enum: ["a", 1.5] }, /no value of 'enum' is of the 'type' \(integer\)/],
      [{ allOf: [{ type: "string" }, { type: "integer" }] }, /no 'type' in common \(string and integer\)/],
      [
        { type: "object", properties: { a: {} }, required: ["a", "zz"], additionalProperties: false },
        /'required' names 'zz', which 'properties' does not declare while 'additionalProperties' is false/,
      ],
      // Regression: without a `properties` keyword at all it was accepted (and 'a' written).
      [
        { type: "object", required: ["a"], additionalProperties: false },
        /'required' names 'a', which 'properties' does not declare while 'additionalProperties' is false/,
      ],
      [{ type: "array", minItems: -1 }, /'minItems' is -1; it must be a whole number, 0 or more/],
      [{ type: "string", maxLength: 1.5 }, /'maxLength' is 1\.5/],
    ];
    for (const [schema, message] of cases) {
      const error = refusal(schema);
      expect(error?.code, JSON.stringify(schema)).toBe("invalid_value");
      expect(error?.message, JSON.stringify(schema)).toMatch(message);
    }
    // What the type allows stays: the other constants are dropped, an integer is a number.
    expect(convert({ type: "integer", enum: ["a", 1] })).toEqual({ const: 1 });
    expect(convert({ type: ["string", "null"], enum: ["a", null, 3] })).toEqual({
      oneOf: [{ const: "a" }, { const: null }],
    });
    expect(convert({ allOf: [{ type: "number" }, { type: "integer" }] })).toEqual({ type: "integer" });
    expect(convert({ type: "number", const: 2 })).toEqual({ const: 2 });
  });

  it("refuses lengths and counts above what the grammar parser takes, saying what to change", () => {
    for (const schema of [
      { type: "string", minLength: 1_000_000 },
      { type: "array", minItems: 100_000 },
      { type: "string", maxLength: 1001 },
    ]) {
      const error = refusal(schema);
      expect(error?.code, JSON.stringify(schema)).toBe("invalid_value");
      expect(error?.param).toBe(param);
      expect(error?.message).toMatch(/above 1000, the largest length or count .* Lower it to 1000 or less/);
    }
    expect(refusal({ type: "string", maxLength: 1000 })).toBeUndefined();
  });

  it("checks validity alone without grammarLimits: what only a grammar cannot enforce passes", () => {
    const check = (schema: unknown) => convertJsonSchemaToGbnf(schema, { param, grammarLimits: false });
    expect(() => check({ type: "string", maxLength: 100_000 })).not.toThrow();
    expect(() => check({ type: "array", minItems: 5000 })).not.toThrow();
    expect(() => check({ $ref: "https://example.com/schemas/p.json#/$defs/P" })).not.toThrow();
    expect(() => check({ $ref: "#anchor" })).not.toThrow();
    // Invalid for everyone, whoever enforces the schema.
    expect(() => check({ $ref: "#/$defs/Missing" })).toThrow(/does not resolve/);
    expect(() => check({ type: "string", minLength: 5, maxLength: 2 })).toThrow(/is greater than/);
    expect(() => check({ type: "strng" })).toThrow(AppError);
    // The local engine's conversion still refuses what its grammar cannot do.
    expect(refusal({ type: "string", maxLength: 100_000 })?.code).toBe("invalid_value");
    expect(refusal({ $ref: "https://example.com/schemas/p.json" })?.code).toBe("invalid_value");
  });

  it("bounds the properties and enum values of a schema, a local grammar's more tightly", () => {
    const withProperties = (count: number) => ({
      type: "object",
      properties: Object.fromEntries(Array.from({ length: count }, (_, index) => [`p${index}`, {}])),
    });
    const check = (schema: unknown) => convertJsonSchemaToGbnf(schema, { param, grammarLimits: false });
    expect(refusal(withProperties(1000))).toBeUndefined();
    expect(refusal(withProperties(1001))?.message).toMatch(
      /more than 1000 properties and enum values in all/,
    );
    expect(refusal({ enum: Array.from({ length: 1001 }, (_, index) => index) })?.code).toBe("invalid_value");
    expect(() => check(withProperties(5000))).not.toThrow();
    expect(() => check(withProperties(5001))).toThrow(/more than 5000 properties and enum values in all/);
  });

  it("keeps accepting valid schemas with keywords it does not enforce", () => {
    const schema = {
      type: "object",
      properties: {
        code: { type: "string", pattern: "^(?<!x)[A-Z]{3}$", format: "iata-code" },
        price: { type: "number", multipleOf: 0.25 },
        tags: { type: "array", items: { type: "string" }, uniqueItems: true },
        note: { not: { type: "null" } },
        first: { $ref: "#/properties/tags/items" },
        flag: true,
        never: false,
      },
      required: ["code"],
      $schema: "https://json-schema.org/draft/2020-12/schema",
    };
    expect(refusal(schema)).toBeUndefined();
    expect(convert(schema)).toMatchObject({
      type: "object",
      properties: {
        code: { type: "string" },
        price: { type: "number" },
        tags: { type: "array", items: { type: "string" } },
        note: anyValue,
        first: { $ref: "#/$defs/items" },
        flag: anyValue,
        never: { type: "null" },
      },
      $defs: { items: { type: "string" } },
    });
  });
});
