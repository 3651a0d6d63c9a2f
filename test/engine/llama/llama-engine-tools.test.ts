import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, LlamaChat } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ChatEngine, ChatRequest, StreamPart, ToolDefinition } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { isAppError } from "../../../src/errors/app-error.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import {
  collectParts,
  createTestCatalogModel,
  createTestRequest,
  readEnd,
  readText,
  readToolCalls,
} from "./llama-test-support.ts";

const weather: ToolDefinition = {
  name: "get_weather",
  description: "Current weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city"],
  },
};
const time: ToolDefinition = {
  name: "get_time",
  parameters: {
    type: "object",
    properties: { zone: { type: "string" }, utc: { type: "boolean" } },
    required: ["zone"],
  },
};
const ping: ToolDefinition = { name: "ping" };
const answerSchema = {
  type: "object",
  properties: { verdict: { enum: ["yes", "no"] }, score: { type: "integer", minimum: 0, maximum: 10 } },
  required: ["verdict", "score"],
  additionalProperties: false,
};

/** The random-weight test model closes JSON soon when it samples; greedy, it fills strings forever. */
const seeds = [1, 2, 3];

let folder: string;
let engine: ChatEngine;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-llama-tools-"));
  const model = await writeTestModel({ path: join(folder, "tiny.gguf"), seed: 1 });
  const llama = await getLlama({ gpu: false, build: "never" });
  // No catalogue context length: the file's trained one (2048) applies.
  engine = createLlamaEngine({
    model: createTestCatalogModel({ path: model.path, parallel: 2 }),
    llama: async () => llama,
  });
});

afterAll(async () => {
  await engine?.close();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

async function run(request: ChatRequest) {
  const prepared = await engine.prepare(request);
  const parts = await collectParts(prepared);
  return { prepared, parts, end: readEnd(parts), calls: readToolCalls(parts), text: readText(parts) };
}

function parseObject(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error(`not an object: ${text}`);
  return value as Record<string, unknown>;
}

/**
 * Every number literal in a JSON text, strings left out: each must be what strict parsers take,
 * a finite double with an exponent of at most two digits (and a safe integer where `integers`).
 */
function checkNumbers(text: string, options: { integers?: boolean } = {}): void {
  const literals = text.replace(/"(?:[^"\\]|\\.)*"/g, '""').match(/-?[0-9][0-9.eE+-]*/g) ?? [];
  for (const literal of literals) {
    expect(literal).toMatch(/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]{1,2})?$/);
    expect(Number.isFinite(Number(literal)), literal).toBe(true);
    if (options.integers) expect(Number.isSafeInteger(Number(literal)), literal).toBe(true);
  }
}

/** The first delta of each call must carry its id and name and no arguments yet (SPEC §4). */
function expectFirstDeltasEmpty(parts: readonly StreamPart[]): void {
  const firsts = parts.filter((part) => part.type === "tool-call-delta" && part.id !== undefined);
  expect(firsts.length).toBeGreaterThan(0);
  for (const first of firsts) expect(first).toMatchObject({ argumentsDelta: "" });
}

describe("llama engine: context length", () => {
  it("uses the model file's trained context when the catalogue gives none", async () => {
    await engine.prepare(createTestRequest());
    expect(engine.contextLength).toBe(2048);
  });
});

describe("llama engine: forced tool calls", () => {
  it.each(seeds)("streams the named function's arguments as tool-call deltas (seed %i)", async (seed) => {
    const { parts, end, calls } = await run(
      createTestRequest({
        tools: [weather, time],
        toolChoice: { type: "function", name: "get_weather" },
        temperature: 1,
        seed,
        maxTokens: 300,
      }),
    );
    expect(parts.some((part) => part.type === "text-delta")).toBe(false);
    expect(end).toMatchObject({ type: "finish", reason: "tool_calls" });
    expectFirstDeltasEmpty(parts);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.name).toBe("get_weather");
    expect(calls[0]?.id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(parseObject(calls[0]?.arguments ?? "")).toHaveProperty("city");
  });

  it.each(seeds)(
    "calls one of several tools with matching arguments when required (seed %i)",
    async (seed) => {
      const { parts, end, calls } = await run(
        createTestRequest({
          tools: [weather, time],
          toolChoice: { type: "required" },
          temperature: 1,
          seed,
          maxTokens: 300,
        }),
      );
      expect(end).toMatchObject({ type: "finish", reason: "tool_calls" });
      expectFirstDeltasEmpty(parts);
      expect(calls).toHaveLength(1);
      const call = calls[0];
      expect(["get_weather", "get_time"]).toContain(call?.name);
      expect(parseObject(call?.arguments ?? "")).toHaveProperty(
        call?.name === "get_weather" ? "city" : "zone",
      );
    },
  );

  it("calls the only tool when required, with {} for a function without parameters", async () => {
    const { parts, end, calls } = await run(
      createTestRequest({ tools: [ping], toolChoice: { type: "required" } }),
    );
    expect(end).toMatchObject({ type: "finish", reason: "tool_calls" });
    expectFirstDeltasEmpty(parts);
    expect(calls.map((call) => [call.name, parseObject(call.arguments)])).toEqual([["ping", {}]]);
  });

  // Regression: `parameters: {}` was "any JSON value", and arguments came out as "9", a string...
  it.each(seeds)(
    "writes a JSON object for parameters that declare no type, in every forced plan (seed %i)",
    async (seed) => {
      const anything: ToolDefinition = { name: "anything", parameters: {} };
      const untyped: ToolDefinition = {
        name: "untyped",
        parameters: { properties: { n: { type: "number" } } },
      };
      const toolChoices = [
        [[anything, untyped], { type: "function", name: "anything" }],
        [[anything], { type: "required" }],
        [[anything, untyped], { type: "required" }],
      ] as const;
      for (const [tools, toolChoice] of toolChoices) {
        const { parts, calls } = await run(
          createTestRequest({ tools: [...tools], toolChoice, temperature: 1, seed, maxTokens: 200 }),
        );
        expectFirstDeltasEmpty(parts);
        expect(calls).toHaveLength(1);
        parseObject(calls[0]?.arguments ?? "");
        checkNumbers(calls[0]?.arguments ?? "");
      }
    },
  );

  it("refuses a named function that is not among the tools", async () => {
    const refusal = await engine
      .prepare(createTestRequest({ tools: [weather], toolChoice: { type: "function", name: "nope" } }))
      .catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.code).toBe("invalid_value");
    expect(isAppError(refusal) && refusal.param).toBe("tool_choice");
  });
});

describe("llama engine: JSON output", () => {
  it.each(seeds)("returns a JSON object for json_object (seed %i)", async (seed) => {
    const { end, text } = await run(
      createTestRequest({ responseFormat: { type: "json_object" }, temperature: 1, seed, maxTokens: 300 }),
    );
    expect(end).toMatchObject({ type: "finish", reason: "stop" });
    parseObject(text);
  });

  it.each(seeds)("returns JSON that follows a json_schema (seed %i)", async (seed) => {
    const schema = {
      type: "object",
      properties: {
        title: { type: "string", maxLength: 20 },
        tags: { type: "array", items: { type: "string" }, maxItems: 2 },
        rating: { anyOf: [{ type: "integer" }, { type: "null" }] },
        node: { $ref: "#/$defs/node" },
      },
      required: ["title", "tags"],
      additionalProperties: false,
      $defs: {
        node: { type: "object", properties: { name: { type: "string", maxLength: 5 } }, required: ["name"] },
      },
    };
    const { end, text } = await run(
      createTestRequest({
        responseFormat: { type: "json_schema", name: "review", schema, strict: true },
        temperature: 1,
        seed,
        maxTokens: 300,
      }),
    );
    expect(end).toMatchObject({ type: "finish", reason: "stop" });
    const value = parseObject(text);
    expect(typeof value.title).toBe("string");
    expect(Array.isArray(value.tags)).toBe(true);
    // `rating` is not required; an integer is written without fraction or exponent.
    const rating = /"rating":\s*([^,}\s]+)/.exec(text)?.[1];
    expect(rating === undefined || /^(null|-?(0|[1-9][0-9]*))$/.test(rating)).toBe(true);
    expect(typeof (value.node as { name?: unknown }).name).toBe("string");
  });

  // Regression: numbers had exponents of up to 16 digits ("74786006.86E2378147571108908" is Infinity).
  it.each(seeds)("writes finite numbers and safe integers (seed %i)", async (seed) => {
    const format = (schema: Record<string, unknown>) => ({ type: "json_schema", name: "x", schema }) as const;
    const outputs = [
      [format({ type: "number" }), false],
      [format({ type: "object", properties: { n: { type: "number" } } }), false],
      [format({ type: "array", items: { type: "number" }, maxItems: 4 }), false],
      [format({ type: "integer" }), true],
      [format({ type: "array", items: { type: "integer" }, maxItems: 4 }), true],
      [{ type: "json_object" }, false],
    ] as const;
    for (const [responseFormat, integers] of outputs) {
      const { text } = await run(createTestRequest({ responseFormat, temperature: 1, seed, maxTokens: 100 }));
      checkNumbers(text, { integers });
    }
    const measure: ToolDefinition = {
      name: "measure",
      parameters: { type: "object", properties: { n: { type: "number" }, count: { type: "integer" } } },
    };
    const { calls } = await run(
      createTestRequest({
        tools: [measure],
        toolChoice: { type: "required" },
        temperature: 1,
        seed,
        maxTokens: 100,
      }),
    );
    checkNumbers(calls[0]?.arguments ?? "");
  });

  it("refuses invalid schemas while preparing, before anything runs", async () => {
    const refusals = [
      [
        createTestRequest({ responseFormat: { type: "json_schema", name: "x", schema: { type: "banana" } } }),
        "response_format.json_schema.schema",
      ],
      [
        createTestRequest({ tools: [weather, { name: "bad", parameters: { type: "string" } }] }),
        "tools[1].function.parameters",
      ],
    ] as const;
    for (const [request, param] of refusals) {
      const refusal = await engine.prepare(request).catch((error: unknown) => error);
      expect(isAppError(refusal) && [refusal.code, refusal.param]).toEqual(["invalid_value", param]);
    }
  });

  // Regression: lengths from 1001 to 2000 passed the converter, then llama.cpp refused the grammar
  // with a parse error blamed on '$ref' cycles.
  it("builds the grammar of every length and count it accepts, and names the bound past it", async () => {
    const schema = (bound: number) => ({
      type: "object",
      properties: {
        text: { type: "string", minLength: bound, maxLength: bound },
        list: {
          type: "array",
          items: { type: "object", properties: { a: { type: "string" } } },
          maxItems: bound,
        },
      },
    });
    const request = (bound: number) =>
      createTestRequest({ responseFormat: { type: "json_schema", name: "x", schema: schema(bound) } });
    await expect(engine.prepare(request(1000))).resolves.toMatchObject({
      maxCompletionTokens: expect.any(Number),
    });
    const refusal = await engine.prepare(request(1001)).catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.message).toMatch(/'minLength' is 1001, above 1000/);
    expect(isAppError(refusal) && refusal.message).not.toMatch(/\$ref/);
  });

  // Regression: these were rendered and tokenized whole, on the event loop, before being refused:
  // empty messages by the tens of thousands render to a run of special tokens that the tokenizer
  // takes in quadratic time (minutes), and tool descriptions were not counted beforehand at all.
  it("refuses, before rendering, more messages or tool text than the context holds", async () => {
    const refusalOf = (request: ChatRequest) => engine.prepare(request).catch((error: unknown) => error);
    const manyMessages = createTestRequest({
      messages: Array.from({ length: 3000 }, (_, index) => ({
        role: index % 2 === 0 ? ("user" as const) : ("assistant" as const),
        content: "",
      })),
    });
    const tools: ToolDefinition[] = Array.from({ length: 100 }, (_, index) => ({
      name: `tool_${index}`,
      description: "Looks things up in a very long catalogue of things. ".repeat(20),
      parameters: {
        type: "object",
        properties: { query: { type: "string", description: "What to look up." } },
      },
    }));
    const manyTools = createTestRequest({ tools, toolChoice: { type: "auto" } });
    for (const request of [manyMessages, manyTools]) {
      const refusal = await refusalOf(request);
      expect(isAppError(refusal) && refusal.code).toBe("context_length_exceeded");
      // "more than": the lower bound counted before rendering, not the rendered prompt's count.
      expect(isAppError(refusal) && refusal.message).toMatch(/resulted in more than \d+ tokens/);
    }
    // Tools offered beside a JSON format are in the prompt's instruction, and count.
    const withFormat = await refusalOf({
      ...manyTools,
      responseFormat: { type: "json_object" },
      maxTokens: 4,
    });
    expect(isAppError(withFormat) && withFormat.code).toBe("context_length_exceeded");
    // Tools left out of the prompt (`tool_choice: none`) do not count.
    const leftOut = await engine.prepare({
      ...manyTools,
      toolChoice: { type: "none" },
      responseFormat: { type: "json_object" },
      maxTokens: 4,
    });
    expect(leftOut.promptTokens).toBeLessThan(100);
  });

  // Regression: LlamaChat wanted one free token beyond the prompt and failed with a 500.
  it("offers tools to a prompt that leaves one token of context", async () => {
    const request = (length: number) =>
      createTestRequest({
        tools: [weather],
        temperature: 1,
        seed: 1,
        messages: [{ role: "user", content: "x".repeat(length) }],
      });
    const measured = await engine.prepare(request(1000));
    const length = 1000 + (2048 - 1 - measured.promptTokens);
    const prepared = await engine.prepare(request(length));
    expect(prepared.promptTokens).toBe(2047);
    const end = readEnd(await collectParts(prepared));
    expect(end).toMatchObject({ type: "finish", usage: { promptTokens: 2047, completionTokens: 1 } });
  });

  // Regression: these were blamed on `tools` whichever tool held them, and not checked for auto.
  it("blames a schema llama.cpp cannot parse on its field, in every plan", async () => {
    const looping = { name: "looping", parameters: { $ref: "#" } };
    const cycle = {
      name: "cycle",
      parameters: {
        type: "object",
        properties: { a: { $ref: "#/$defs/a" } },
        $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } },
      },
    };
    const cases = [
      [
        createTestRequest({ tools: [weather, looping], toolChoice: { type: "required" } }),
        "tools[1].function.parameters",
      ],
      [
        createTestRequest({ tools: [cycle], toolChoice: { type: "function", name: "cycle" } }),
        "tools[0].function.parameters",
      ],
      [
        createTestRequest({ tools: [weather, time, cycle], toolChoice: { type: "auto" } }),
        "tools[2].function.parameters",
      ],
      [
        createTestRequest({ responseFormat: { type: "json_schema", name: "x", schema: { $ref: "#" } } }),
        "response_format.json_schema.schema",
      ],
      // Tools offered beside a JSON format: the tool, or the format, whichever fails alone.
      [
        createTestRequest({
          tools: [weather, cycle],
          responseFormat: { type: "json_schema", name: "x", schema: { type: "object" } },
        }),
        "tools[1].function.parameters",
      ],
      [
        createTestRequest({
          tools: [weather],
          responseFormat: { type: "json_schema", name: "x", schema: { $ref: "#" } },
        }),
        "response_format.json_schema.schema",
      ],
    ] as const;
    for (const [request, param] of cases) {
      const refusal = await engine.prepare(request).catch((error: unknown) => error);
      expect(isAppError(refusal) && [refusal.code, refusal.param]).toEqual(["invalid_value", param]);
      expect(isAppError(refusal) && refusal.message).toMatch(
        /cannot be turned into a grammar .* make every such cycle pass through/,
      );
    }
  });

  it.each([
    ["json_object", { type: "json_object" }],
    ["json_schema", { type: "json_schema", name: "answer", schema: answerSchema, strict: true }],
  ] as const)(
    "offers tools with auto beside a %s format: a call, or JSON content",
    async (_, responseFormat) => {
      const kinds = new Set<string>();
      for (const seed of [1, 2, 3, 4, 5, 6]) {
        const { parts, end, text, calls } = await run(
          createTestRequest({
            tools: [weather, time],
            toolChoice: { type: "auto" },
            responseFormat,
            temperature: 1,
            seed,
            maxTokens: 300,
          }),
        );
        if (end.type !== "finish") throw new Error(`seed ${seed} ended with an error: ${end.error.message}`);
        if (calls.length > 0) {
          kinds.add("call");
          expect(end.reason).toBe("tool_calls");
          expect(text).toBe("");
          expectFirstDeltasEmpty(parts);
          expect(calls).toHaveLength(1);
          const [call] = calls;
          expect(["get_weather", "get_time"]).toContain(call?.name);
          expect(parseObject(call?.arguments ?? "")).toHaveProperty(
            call?.name === "get_weather" ? "city" : "zone",
          );
        } else {
          kinds.add("answer");
          expect(end.reason).toBe("stop");
          // The content is the answer itself, not the envelope around it.
          const answer = parseObject(text);
          expect(answer).not.toHaveProperty("response");
          if (responseFormat.type === "json_schema") {
            expect(Object.keys(answer)).toEqual(["verdict", "score"]);
            expect(["yes", "no"]).toContain(answer.verdict);
            expect(Number.isInteger(answer.score)).toBe(true);
          }
        }
      }
      // What the random-weight test model does with these seeds: with the schema it calls (seeds 2
      // and 3) and answers, so both paths run; with json_object (another prompt) it answers.
      expect([...kinds].sort()).toEqual(
        responseFormat.type === "json_schema" ? ["answer", "call"] : ["answer"],
      );
    },
  );

  it("returns the same JSON for the same seed", async () => {
    const request = createTestRequest({
      responseFormat: { type: "json_object" },
      temperature: 1,
      seed: 9,
      maxTokens: 300,
    });
    expect((await run(request)).text).toBe((await run(request)).text);
  });
});

describe("llama engine: tools with auto", () => {
  it("documents the tools in the prompt and ends with text or well-formed calls, never both", async () => {
    const plain = await engine.prepare(createTestRequest());
    const reasons: string[] = [];
    for (const seed of seeds) {
      const { prepared, end, calls, text } = await run(
        createTestRequest({ tools: [weather, time], temperature: 1, seed, maxTokens: 100 }),
      );
      expect(prepared.promptTokens).toBeGreaterThan(plain.promptTokens + 50);
      if (end.type !== "finish") throw new Error(`seed ${seed} ended with an error: ${end.error.message}`);
      reasons.push(end.reason);
      if (end.reason === "tool_calls") {
        expect(calls.length).toBeGreaterThan(0);
        for (const call of calls) {
          expect(["get_weather", "get_time"]).toContain(call.name);
          parseObject(call.arguments);
        }
      } else {
        expect(["stop", "length"]).toContain(end.reason);
        expect(calls).toEqual([]);
        expect(text).not.toBe("");
      }
    }
    // What the random-weight test model does with these seeds: it answers in text and ends itself.
    expect(reasons).toEqual(seeds.map(() => "stop"));
  });

  it("asks LlamaChat for one call at most when parallel_tool_calls is false", async () => {
    const generate = vi.spyOn(LlamaChat.prototype, "generateResponse");
    try {
      for (const parallelToolCalls of [false, true, undefined]) {
        generate.mockClear();
        await run(
          createTestRequest({
            tools: [weather, time],
            temperature: 1,
            seed: 1,
            maxTokens: 8,
            parallelToolCalls,
          }),
        );
        const options = generate.mock.calls[0]?.[1] as { maxParallelFunctionCalls?: number } | undefined;
        expect(options?.maxParallelFunctionCalls, String(parallelToolCalls)).toBe(
          parallelToolCalls === false ? 1 : undefined,
        );
      }
    } finally {
      generate.mockRestore();
    }
  });

  it.each([
    ["text", { type: "text" }],
    ["json_schema", { type: "json_schema", name: "answer", schema: answerSchema }],
  ] as const)(
    "renders a history with tool calls and results and answers after them (%s)",
    async (_, responseFormat) => {
      const { prepared, end, text } = await run(
        createTestRequest({
          tools: [weather],
          responseFormat,
          messages: [
            { role: "system", content: "You are terse." },
            { role: "user", content: "Weather in Paris?" },
            {
              role: "assistant",
              content: null,
              toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
            },
            { role: "tool", toolCallId: "call_1", content: '{"celsius":21}' },
          ],
          temperature: 1,
          seed: 1,
          maxTokens: 50,
        }),
      );
      expect(prepared.promptTokens).toBeGreaterThan(0);
      expect(end.type).toBe("finish");
      // An agent's last turn: the answer in its format (what the test model does with this seed).
      if (responseFormat.type === "json_schema") expect(parseObject(text)).toHaveProperty("verdict");
    },
  );
});

describe("llama engine: parallel sequences", () => {
  it("runs two requests at once and both finish", async () => {
    const requests = [1, 2].map((seed) => createTestRequest({ temperature: 1, seed, maxTokens: 30 }));
    const results = await Promise.all(requests.map((request) => run(request)));
    for (const { end } of results) expect(end.type).toBe("finish");
  });
});
