import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";

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
    expect(convertJsonSchemaToGbnf(schema)).toEqual({
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
    expect(convertJsonSchemaToGbnf({})).toEqual(anyValue);
    expect(convertJsonSchemaToGbnf(true)).toEqual(anyValue);
    expect(convertJsonSchemaToGbnf({ type: "object" })).toEqual({
      type: "object",
      additionalProperties: true,
    });
    expect(convertJsonSchemaToGbnf({ type: "object", additionalProperties: { type: "number" } })).toEqual({
      type: "object",
      additionalProperties: { type: "number" },
    });
  });

  it("emits exactly the declared properties, none for an empty properties object", () => {
    expect(convertJsonSchemaToGbnf({ type: "object", properties: {} })).toEqual({
      type: "object",
      properties: {},
    });
    expect(
      convertJsonSchemaToGbnf({
        type: "object",
        properties: { a: { type: "null" } },
        additionalProperties: true,
      }),
    ).toEqual({ type: "object", properties: { a: { type: "null" } } });
  });

  it("degrades anyOf, type lists, nullable, allOf and unsupported keywords", () => {
    expect(
      convertJsonSchemaToGbnf({
        anyOf: [
          { type: "string", pattern: "^a" },
          { type: "number", minimum: 3 },
        ],
      }),
    ).toEqual({
      oneOf: [{ type: "string" }, { type: "number" }],
    });
    expect(convertJsonSchemaToGbnf({ type: ["string", "null"] })).toEqual({
      oneOf: [{ type: "string" }, { type: "null" }],
    });
    expect(convertJsonSchemaToGbnf({ type: "integer", nullable: true })).toEqual({
      oneOf: [{ type: "integer" }, { type: "null" }],
    });
    expect(
      convertJsonSchemaToGbnf({
        allOf: [
          { type: "object", properties: { a: { type: "string" } } },
          { properties: { b: { type: "boolean" } }, required: ["c"] },
        ],
      }),
    ).toEqual({ type: "object", properties: { a: { type: "string" }, b: { type: "boolean" }, c: anyValue } });
  });

  it("rewrites definitions references and keeps recursive ones finite", () => {
    const converted = convertJsonSchemaToGbnf({
      type: "object",
      properties: { root: { $ref: "#/definitions/node" }, other: { $ref: "https://example.com/x.json" } },
      definitions: {
        node: {
          type: "object",
          properties: { children: { type: "array", items: { $ref: "#/definitions/node" } } },
        },
      },
    });
    expect(converted).toEqual({
      type: "object",
      properties: { root: { $ref: "#/$defs/node" }, other: anyValue },
      $defs: {
        node: {
          type: "object",
          properties: { children: { type: "array", items: { $ref: "#/$defs/node" } } },
        },
      },
    });
  });

  it("makes exact schemas for object and array constants", () => {
    expect(convertJsonSchemaToGbnf({ const: { a: [1, "x"] } })).toEqual({
      type: "object",
      properties: {
        a: { type: "array", prefixItems: [{ const: 1 }, { const: "x" }], minItems: 2, maxItems: 2 },
      },
    });
  });

  it("converts tuples of both drafts", () => {
    expect(
      convertJsonSchemaToGbnf({ type: "array", items: [{ type: "string" }], additionalItems: false }),
    ).toEqual({
      type: "array",
      prefixItems: [{ type: "string" }],
      minItems: 1,
      maxItems: 1,
    });
    expect(convertJsonSchemaToGbnf({ prefixItems: [{ type: "null" }], items: { type: "boolean" } })).toEqual({
      type: "array",
      prefixItems: [{ type: "null" }],
      items: { type: "boolean" },
      minItems: 1,
    });
  });
});
