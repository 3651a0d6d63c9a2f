import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatEngine, ChatRequest, ToolDefinition } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import {
  collectParts,
  createTestCatalogModel,
  createTestRequest,
  readEnd,
  readText,
  readToolCalls,
} from "./llama-test-support.ts";

/** Values with control characters: raw, each of them makes the JSON string invalid (NUL the grammar too). */
const separators = ["\u0001", "a\u0000b", "\b\f", "tab\there"];
const schema = {
  type: "object",
  properties: { sep: { enum: separators }, mark: { const: "\u001f" } },
  required: ["sep", "mark"],
  additionalProperties: false,
};
const split: ToolDefinition = { name: "split", parameters: schema };
/** The random-weight test model picks among the values when it samples. */
const seeds = [1, 2, 3, 4];

let folder: string;
let engine: ChatEngine;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-llama-literals-"));
  const model = await writeTestModel({ path: join(folder, "tiny.gguf"), seed: 1 });
  const llama = await getLlama({ gpu: false, build: "never" });
  engine = createLlamaEngine({
    model: createTestCatalogModel({ path: model.path, contextLength: 512, parallel: 1 }),
    llama: async () => llama,
  });
});

afterAll(async () => {
  await engine?.close();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

async function run(request: ChatRequest) {
  const parts = await collectParts(await engine.prepare(request));
  return { end: readEnd(parts), text: readText(parts), calls: readToolCalls(parts) };
}

/** The output parses, back to one of the values exactly. */
function expectValues(text: string): void {
  const value = JSON.parse(text) as { sep?: unknown; mark?: unknown };
  expect(separators).toContain(value.sep);
  expect(value.mark).toBe("\u001f");
}

// Regression: "\u0001" came out raw inside the JSON string ("Bad control character in string
// literal"), and "a\u0000b" cut the grammar text short, so the schema was refused.
describe("llama engine: enum and const strings with control characters", () => {
  it.each(seeds)("writes them JSON-escaped in json_schema output (seed %i)", async (seed) => {
    const { end, text } = await run(
      createTestRequest({
        responseFormat: { type: "json_schema", name: "x", schema, strict: true },
        temperature: 1,
        seed,
        maxTokens: 100,
      }),
    );
    expect(end).toMatchObject({ type: "finish", reason: "stop" });
    expectValues(text);
  });

  it.each(seeds)("writes them JSON-escaped in forced tool-call arguments (seed %i)", async (seed) => {
    const { end, calls } = await run(
      createTestRequest({
        tools: [split],
        toolChoice: { type: "function", name: "split" },
        temperature: 1,
        seed,
        maxTokens: 100,
      }),
    );
    expect(end).toMatchObject({ type: "finish", reason: "tool_calls" });
    expect(calls).toHaveLength(1);
    expectValues(calls[0]?.arguments ?? "");
  });
});
