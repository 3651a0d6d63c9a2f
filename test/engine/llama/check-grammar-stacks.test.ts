import { describe, expect, it } from "vitest";
import { maxGrammarStacks } from "../../../src/engine/llama/check-grammar-stacks.ts";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { createJsonGrammar } from "../../../src/engine/llama/create-json-grammar.ts";
import { createPlanGrammar } from "../../../src/engine/llama/create-plan-grammar.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { createAlikeBranches, createReferenceChain, createTwoChains } from "./schema-bombs.ts";

const param = "response_format.json_schema.schema";

/** The error converting `schema` for a grammar throws, or `undefined`. */
function refusal(schema: unknown): AppError | undefined {
  try {
    convertJsonSchemaToGbnf(schema, { param });
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

const bombs: [string, unknown][] = [
  ["a chain of anyOf of two references, 30 levels", createReferenceChain(30)],
  ["the same, 12 levels (4096 ways)", createReferenceChain(12)],
  ["two chains taking turns, under a property, 30 levels", createTwoChains(30)],
  [
    "a chain nested under properties and array items",
    {
      type: "object",
      properties: {
        list: { type: "array", items: { type: "object", properties: { v: { $ref: "#/$defs/d20" } } } },
      },
      $defs: createReferenceChain(20).$defs,
    },
  ],
  ["objects that begin alike, 12 levels", createAlikeBranches(12)],
  [
    "objects that begin alike, recursively (each level doubles them, whatever the depth)",
    {
      $defs: {
        a: {
          anyOf: [
            { type: "object", properties: { x: { $ref: "#/$defs/a" } } },
            { type: "object", properties: { x: { $ref: "#/$defs/a" }, y: { type: "integer" } } },
            { type: "string" },
          ],
        },
      },
      $ref: "#/$defs/a",
    },
  ],
];

const expression = {
  $defs: {
    e: {
      anyOf: [
        ...["+", "-", "*", "/"].map((op) => ({
          type: "object",
          properties: { op: { const: op }, left: { $ref: "#/$defs/e" }, right: { $ref: "#/$defs/e" } },
          required: ["op", "left", "right"],
        })),
        { type: "number" },
      ],
    },
  },
  $ref: "#/$defs/e",
};

const ordinary: [string, unknown][] = [
  ["any value", {}],
  [
    "an enum of 999 strings with a common prefix",
    { enum: Array.from({ length: 999 }, (_, i) => `value${i}`) },
  ],
  [
    "a tool's parameters: nullable types, an anyOf of objects, a map, any value",
    {
      type: "object",
      properties: {
        location: { type: "string", description: "City" },
        unit: { type: ["string", "null"], enum: ["c", "f", null] },
        options: {
          anyOf: [
            { type: "object", properties: { a: { type: "integer" } } },
            { type: "object", properties: { a: { type: "integer" }, b: { type: "boolean" } } },
            { type: "null" },
          ],
        },
        extra: { type: "object", additionalProperties: { type: "number" } },
        anything: {},
      },
      required: ["location"],
    },
  ],
  [
    "a linked list",
    {
      $defs: {
        node: {
          type: "object",
          properties: {
            value: { type: "number" },
            next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] },
          },
        },
      },
      $ref: "#/$defs/node",
    },
  ],
  ["an expression tree, its operator first", expression],
  [
    "a recursive UI tree",
    {
      type: "object",
      properties: {
        type: { enum: ["div", "button", "header", "section", "field", "form"] },
        label: { type: "string" },
        children: { type: "array", items: { $ref: "#" } },
      },
      required: ["type", "label", "children"],
    },
  ],
  ["a chain of anyOf of two references, 10 levels (1024 ways)", createReferenceChain(10)],
  ["objects that begin alike, 10 levels", createAlikeBranches(10)],
];

describe("the parse stacks of a local grammar", () => {
  // Regression: these took llama.cpp 2^N steps to build (30 levels: for ever), on the event loop.
  it.each(bombs)("refuses %s before llama.cpp sees it", (_name, schema) => {
    const started = performance.now();
    const error = refusal(schema);
    expect(performance.now() - started).toBeLessThan(500);
    expect(error).toMatchObject({ code: "invalid_value", param });
    expect(error?.message).toMatch(
      new RegExp(
        `Invalid JSON Schema in '${param.replaceAll(".", "\\.")}': (its grammar would keep more than ${maxGrammarStacks} alternatives open at once|alternatives .* multiplies with every level of nesting)`,
      ),
    );
  });

  // A realistic thread of comments: few alternatives per level, but alike ones that recurse
  // before anything tells them apart multiply at every level. Said so, not "more than 2000".
  it("names a recursion of alike alternatives as such, with what to change", () => {
    const item = { anyOf: [{ $ref: "#/$defs/Comment" }, { $ref: "#/$defs/Deleted" }] };
    const replies = { type: "array", items: { $ref: "#/$defs/Item" } };
    const schema = {
      $defs: {
        Item: item,
        Comment: {
          type: "object",
          properties: {
            id: { type: "string" },
            replies,
            author: { type: "string" },
            body: { type: "string" },
          },
          required: ["id", "replies", "author", "body"],
        },
        Deleted: {
          type: "object",
          properties: { id: { type: "string" }, replies, deleted: { const: true } },
          required: ["id", "replies", "deleted"],
        },
      },
      $ref: "#/$defs/Item",
    };
    const error = refusal(schema);
    expect(error).toMatchObject({ code: "invalid_value", param });
    expect(error?.message).toMatch(/multiplies with every level of nesting/);
    expect(error?.message).toMatch(/before the property that recurses/);
    expect(error?.message).not.toMatch(/more than 2000/);
  });

  it.each(ordinary)("takes %s, and llama.cpp builds it quickly", async (_name, schema) => {
    const converted = convertJsonSchemaToGbnf(schema, { param });
    const llama = await getSharedLlama({ gpu: false });
    const started = performance.now();
    await createJsonGrammar(llama, converted);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("takes an upstream model's schema as sent", () => {
    expect(() =>
      convertJsonSchemaToGbnf(createReferenceChain(30), { param, grammarLimits: false }),
    ).not.toThrow();
  });

  // Regression: left to llama.cpp, which refused them with an error line in the server's log.
  it("refuses references that lead back to themselves with nothing in between", () => {
    for (const schema of [
      { $ref: "#" },
      { anyOf: [{ $ref: "#" }, { type: "null" }] },
      {
        type: "object",
        properties: { a: { $ref: "#/$defs/a" } },
        $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } },
      },
    ]) {
      const error = refusal(schema);
      expect(error).toMatchObject({ code: "invalid_value", param });
      expect(error?.message).toMatch(/cannot be turned into a grammar .* make every such cycle pass through/);
    }
  });

  // The forced call's envelope opens its tools together: counted too, before the grammar cache.
  it("refuses a forced call's envelope whose tools together open too many", async () => {
    const chain = convertJsonSchemaToGbnf(createReferenceChain(9), { param });
    const arguments_ = { type: "object", properties: { v: chain } };
    const schema = {
      oneOf: [0, 1, 2, 3].map(() => ({
        type: "object",
        properties: { name: { const: "f" }, arguments: arguments_ },
      })),
    };
    let built = 0;
    const grammars = {
      get: async () => {
        built += 1;
        throw new Error("built");
      },
    };
    const result = await createPlanGrammar({
      // biome-ignore lint/suspicious/noExplicitAny: a hand-made envelope, as plan-generation.ts makes it.
      plan: { kind: "tool-envelope", schema: schema as any },
      toolSchemas: [],
      grammars,
    }).catch((error: unknown) => error);
    expect(result).toMatchObject({ code: "invalid_value", param: "tools" });
    expect(built).toBe(0);
  });
});
