import { describe, expect, it } from "vitest";
import type { ChatRequest, JsonSchema, ToolDefinition } from "../../../src/engine/engine.ts";
import { type GenerationPlan, planGeneration } from "../../../src/engine/llama/plan-generation.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { createTestRequest } from "./llama-test-support.ts";

function plan(overrides: Partial<ChatRequest>): GenerationPlan {
  return planGeneration(createTestRequest(overrides)).plan;
}

/** The error planning `overrides` throws, or `undefined`. */
function refusal(overrides: Partial<ChatRequest>): AppError | undefined {
  try {
    plan(overrides);
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

const anyObject = { type: "object", additionalProperties: true };

/** Parameters schemas whose root says nothing about its type: arguments must still be an object. */
const untypedParameters: [string, JsonSchema, unknown][] = [
  ["{}", {}, anyObject],
  [
    "properties without a type",
    { properties: { a: { type: "string" } } },
    { type: "object", properties: { a: { type: "string" } } },
  ],
  ["a description only", { description: "anything" }, { ...anyObject, description: "anything" }],
  [
    "a $ref to an object",
    { $ref: "#/$defs/args", $defs: { args: { type: "object", properties: {} } } },
    { oneOf: [{ $ref: "#/$defs/args" }], $defs: { args: { type: "object", properties: {} } } },
  ],
];

describe("planGeneration: tool parameters always describe a JSON object", () => {
  it.each(untypedParameters)("gives %s an object root in every plan", (_name, parameters, expected) => {
    const tool: ToolDefinition = { name: "f", parameters };
    const other: ToolDefinition = { name: "g", parameters };
    const named = plan({ tools: [tool, other], toolChoice: { type: "function", name: "f" } });
    const requiredOne = plan({ tools: [tool], toolChoice: { type: "required" } });
    const requiredSeveral = plan({ tools: [tool, other], toolChoice: { type: "required" } });
    const auto = plan({ tools: [tool, other], toolChoice: { type: "auto" } });
    expect(named).toMatchObject({ kind: "tool-arguments", schema: expected });
    expect(requiredOne).toMatchObject({ kind: "tool-arguments", schema: expected });
    expect(requiredSeveral).toMatchObject({
      kind: "tool-envelope",
      schema: {
        oneOf: [
          { type: "object", properties: { name: { const: "f" }, arguments: expected } },
          { type: "object", properties: { name: { const: "g" }, arguments: expected } },
        ],
      },
    });
    expect(auto).toMatchObject({ kind: "functions", functions: { f: { params: expected } } });
  });

  it("gives a function without parameters an empty object when forced, and no parameters to LlamaChat", () => {
    const tool: ToolDefinition = { name: "f" };
    expect(plan({ tools: [tool], toolChoice: { type: "required" } })).toMatchObject({
      schema: { type: "object", properties: {} },
    });
    expect(plan({ tools: [tool] })).toEqual({ kind: "functions", functions: { f: { params: undefined } } });
  });

  it("refuses parameters whose root declares another type, naming the tool's field", () => {
    for (const type of ["string", "number", ["object", "null"]]) {
      const error = refusal({
        tools: [{ name: "f" }, { name: "g", parameters: { type } }],
        toolChoice: { type: "auto" },
      });
      expect(error?.code).toBe("invalid_value");
      expect(error?.param).toBe("tools[1].function.parameters");
      expect(error?.message).toContain(`the root must be of type "object"`);
      expect(error?.message).toContain(JSON.stringify(type));
    }
  });

  it("refuses a root whose alternatives allow values that are not objects", () => {
    // Beside the root's `type: "object"`, an alternative of another type is left out.
    expect(
      refusal({
        tools: [{ name: "f", parameters: { anyOf: [{ type: "object" }, { type: "null" }] } }],
        toolChoice: { type: "required" },
      }),
    ).toBeUndefined();
    // A `$ref` is all a converted schema is: the root's type is not kept beside it.
    const error = refusal({
      tools: [{ name: "f", parameters: { $ref: "#/$defs/n", $defs: { n: { type: "null" } } } }],
      toolChoice: { type: "required" },
    });
    expect(error?.code).toBe("invalid_value");
    expect(error?.param).toBe("tools[0].function.parameters");
    expect(error?.message).toMatch(/allows values that are not JSON objects/);
  });

  it("checks every tool's schema, even where the plan does not use it", () => {
    const tools: ToolDefinition[] = [
      { name: "f" },
      { name: "g", parameters: { type: "object", properties: { a: { type: "banana" } } } },
    ];
    for (const toolChoice of [{ type: "none" }, { type: "function", name: "f" }] as const) {
      const error = refusal({ tools, toolChoice });
      expect(error?.param).toBe("tools[1].function.parameters");
      expect(error?.message).toMatch(/at '#\/properties\/a': 'type' has "banana"/);
    }
  });
});

describe("planGeneration: the tools of one request share a budget", () => {
  // Regression: each schema within its own budget, 128 tools of 1000 properties each took 0.9 s
  // of the event loop to convert before the request was refused for its length.
  const toolWith = (index: number, count: number): ToolDefinition => ({
    name: `tool_${index}`,
    parameters: {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: count }, (_, at) => [`p${at}`, { type: "integer" }]),
      ),
    },
  });

  it("takes four schemas' worth of properties in all, and names the tool that passes it", () => {
    const tools = (count: number) => Array.from({ length: count }, (_, index) => toolWith(index, 900));
    expect(refusal({ tools: tools(4) })).toBeUndefined();
    const refused = refusal({ tools: tools(5) });
    expect(refused?.code).toBe("invalid_value");
    expect(refused?.param).toBe("tools[4].function.parameters");
    expect(refused?.message).toMatch(/the request's tools together declare more than 4000 properties/);
  });
});

describe("planGeneration: response formats", () => {
  it.each([
    [{ type: "banana" }, /'type' has "banana"/],
    [{ type: "object", required: "a" }, /'required' must be an array of property names/],
    [{ $ref: "#/nope" }, /'\$ref' "#\/nope" does not resolve/],
    [{ type: "object", properties: 5 }, /'properties' must be an object/],
    [{ enum: "a" }, /'enum' must be a non-empty array/],
  ])("refuses the invalid json_schema %j", (schema, message) => {
    const error = refusal({ responseFormat: { type: "json_schema", name: "x", schema } });
    expect(error?.code).toBe("invalid_value");
    expect(error?.status).toBe(400);
    expect(error?.param).toBe("response_format.json_schema.schema");
    expect(error?.message).toMatch(message);
  });

  it("keeps json_schema roots of any type (a number, a string)", () => {
    expect(plan({ responseFormat: { type: "json_schema", name: "x", schema: { type: "number" } } })).toEqual({
      kind: "json",
      schema: { type: "number" },
    });
  });
});

describe("planGeneration: tools with auto beside a JSON format", () => {
  const weather: ToolDefinition = {
    name: "get_weather",
    description: "Current weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  };
  const answer = { type: "object", properties: { verdict: { type: "string" } }, required: ["verdict"] };

  it("offers one call or the answer in the format, and says so in the system message", () => {
    const planned = planGeneration(
      createTestRequest({
        tools: [weather, { name: "ping" }],
        toolChoice: { type: "auto" },
        responseFormat: { type: "json_schema", name: "a", schema: answer },
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Hi" },
        ],
      }),
    );
    const converted = { type: "object", properties: { verdict: { type: "string" } } };
    expect(planned.plan).toEqual({
      kind: "call-or-json",
      answer: converted,
      schema: {
        oneOf: [
          { type: "object", properties: { response: converted } },
          {
            type: "object",
            properties: {
              name: { const: "get_weather" },
              arguments: { type: "object", properties: { city: { type: "string" } } },
            },
          },
          {
            type: "object",
            properties: { name: { const: "ping" }, arguments: { type: "object", properties: {} } },
          },
        ],
      },
    });
    const [system] = planned.history;
    expect(system?.type).toBe("system");
    const text = system?.type === "system" ? String(system.text) : "";
    expect(text.startsWith("Be brief.\n\nReply with only a JSON object")).toBe(true);
    expect(text).toContain(
      `{"response": <your answer>}, where your answer is JSON that follows this schema: ${JSON.stringify(answer)}`,
    );
    expect(text).toContain('Function "get_weather": Current weather');
    expect(text).toContain('Function "ping"');
    // The prompt's size check counts the instruction, tools and all.
    expect(planned.instruction).toBe(text.slice("Be brief.\n\n".length));
  });

  it("offers any JSON object as the answer for json_object", () => {
    const planned = plan({
      tools: [weather],
      toolChoice: { type: "auto" },
      responseFormat: { type: "json_object" },
    });
    expect(planned).toMatchObject({ kind: "call-or-json", answer: anyObject });
  });

  it("keeps the other plans: no tools offered, or a forced call", () => {
    const format = { type: "json_schema", name: "a", schema: answer } as const;
    expect(plan({ tools: [weather], toolChoice: { type: "none" }, responseFormat: format }).kind).toBe(
      "json",
    );
    expect(plan({ responseFormat: format }).kind).toBe("json");
    expect(plan({ tools: [weather], toolChoice: { type: "required" }, responseFormat: format }).kind).toBe(
      "tool-arguments",
    );
  });
});

describe("planGeneration: tool names", () => {
  // Regression: the functions were an object literal, so a tool named `__proto__` (a name the
  // schema allows) set its prototype and was never offered to the model.
  it("offers a tool named like a built-in object key as any other", () => {
    const tools: ToolDefinition[] = ["__proto__", "constructor", "g"].map((name) => ({
      name,
      parameters: { type: "object", properties: { a: { type: "string" } } },
    }));
    const planned = plan({ tools });
    expect(planned.kind).toBe("functions");
    const functions = planned.kind === "functions" ? planned.functions : {};
    expect(Object.keys(functions)).toEqual(["__proto__", "constructor", "g"]);
    expect(Object.hasOwn(functions, "__proto__")).toBe(true);
  });
});
