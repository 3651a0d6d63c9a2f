import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ChatMLChatWrapper,
  type ChatWrapper,
  getLlama,
  type Llama,
  type LlamaModel,
  resolveChatWrapper,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatEngine, ChatMessage, ToolDefinition } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { measureChatTemplate } from "../../../src/engine/llama/measure-chat-template.ts";
import { isAppError } from "../../../src/errors/app-error.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import { createTestCatalogModel, createTestRequest } from "./llama-test-support.ts";

// Requests whose prompts are far longer than the context, refused before their prompt is rendered:
// the refusal says "more than" a count (check-prompt-size.ts), where a rendered prompt's refusal
// gives the exact count (check-context-length.ts) after the whole prompt was tokenized at once.

let folder: string;
let llama: Llama;
let model: LlamaModel;
let engine: ChatEngine;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-llama-prompt-size-"));
  const file = await writeTestModel({ path: join(folder, "tiny.gguf"), seed: 1 });
  llama = await getLlama({ gpu: false, build: "never" });
  model = await llama.loadModel({ modelPath: file.path });
  // The file's trained context: 2048 tokens.
  engine = createLlamaEngine({
    model: createTestCatalogModel({ path: file.path }),
    llama: async () => llama,
  });
});

afterAll(async () => {
  await engine?.close();
  await model?.dispose();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

async function refusalOf(request: Parameters<ChatEngine["prepare"]>[0]): Promise<string> {
  const refusal = await engine.prepare(request).catch((error: unknown) => error);
  expect(isAppError(refusal) && refusal.code).toBe("context_length_exceeded");
  return (refusal as Error).message;
}

describe("the local engine's prompt size check", () => {
  // Regression: the calls of one assistant message counted as one history item, their empty names
  // and arguments as no text, so 126,000 of them were rendered and tokenized whole (14 s of the
  // event loop) only to be refused.
  it("refuses thousands of empty tool calls by their template tokens alone, without rendering them", async () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        toolCalls: Array.from({ length: 5000 }, () => ({ id: "", name: "", arguments: "" })),
      },
    ];
    const message = await refusalOf(createTestRequest({ messages, maxTokens: 4 }));
    expect(message).toMatch(
      /you requested more than \d+ tokens \(more than \d+ in the messages, 4 in the completion\)/,
    );
    const atLeast = Number(/more than (\d+) in the messages/.exec(message)?.[1]);
    // 5000 calls of at least 20 template tokens each (24 measured for this template).
    expect(atLeast).toBeGreaterThan(5000 * 20);
  });

  it("still answers an invalid tool before the length of thousands of tool calls", async () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        toolCalls: Array.from({ length: 5000 }, () => ({ id: "", name: "", arguments: "" })),
      },
    ];
    const refusal = await engine
      .prepare(createTestRequest({ messages, tools: [{ name: "t", parameters: { type: "nothing" } }] }))
      .catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.code).toBe("invalid_value");
  });

  // Regression: only the tools' names counted, not the parameter schemas the template writes as
  // JSON: 128 tools of nested type unions rendered to 1.9 million tokens in one piece (3 to 4 s).
  it("refuses tools whose parameter schemas the template writes as JSON a piece at a time, without rendering them", async () => {
    const types = ["string", "number", "integer", "boolean", "null", "array", "object"];
    let nested: Record<string, unknown> = { type: "integer" };
    for (let depth = 0; depth < 60; depth++) nested = { type: types, items: nested };
    const tools: ToolDefinition[] = Array.from({ length: 16 }, (_, index) => ({
      name: `t${index}`,
      parameters: { type: "object", properties: { p: nested } },
    }));
    const message = await refusalOf(
      createTestRequest({ messages: [{ role: "user", content: "hi" }], tools, toolChoice: { type: "auto" } }),
    );
    expect(message).toMatch(
      /your messages resulted in more than \d+ tokens \(the tools' names, descriptions and parameter schemas count as part of them\)/,
    );
  });

  // Regression: a prompt short enough to be rendered and counted exactly said only "your
  // messages resulted in N tokens" when a tool's long description had filled the context.
  it.each([
    ["documented by the functions plan", { type: "auto" }],
    ["in a forced call's instruction", { type: "required" }],
  ] as const)("counted exactly, says the tools count when they are %s", async (_, toolChoice) => {
    const description = "Looks a code up in the catalogue of the warehouse. ".repeat(250);
    const message = await refusalOf(
      createTestRequest({
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "lookup", description, parameters: { type: "object", properties: {} } }],
        toolChoice,
      }),
    );
    expect(message).toMatch(
      /your messages resulted in \d+ tokens \(the tools' names, descriptions and parameter schemas count as part of them\)\./,
    );
  });

  it("counted exactly, names only the messages where no tool is in the prompt", async () => {
    const message = await refusalOf(
      createTestRequest({ messages: [{ role: "user", content: "Look a code up. ".repeat(600) }] }),
    );
    expect(message).toMatch(
      /your messages resulted in \d+ tokens\. Please reduce the length of the messages\.$/,
    );
  });

  it("still prepares a prompt with a few tool calls and a documented tool", async () => {
    const prepared = await engine.prepare(
      createTestRequest({
        messages: [
          { role: "user", content: "Weather in Paris?" },
          {
            role: "assistant",
            content: null,
            toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
          },
          { role: "tool", toolCallId: "call_1", content: '{"celsius":21}' },
        ],
        tools: [
          { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
        ],
        toolChoice: { type: "auto" },
        maxTokens: 4,
      }),
    );
    expect(prepared.promptTokens).toBeGreaterThan(0);
  });
});

describe("measureChatTemplate", () => {
  it("finds the tokens a tool call adds and whether parameter schemas are written as JSON", () => {
    const render = (wrapper: ChatWrapper) =>
      measureChatTemplate({
        chatWrapper: wrapper,
        tokenizer: model.tokenizer,
        render: wrapper.generateContextState.bind(wrapper),
      });
    // The test model's Jinja template writes tools as JSON, as Qwen's does.
    const resolved = resolveChatWrapper(model);
    if (resolved === null) throw new Error("the test model has a chat template");
    const jinja = render(resolved);
    expect(jinja.documentsParametersAsJson).toBe(true);
    expect(jinja.tokensPerItem).toBeGreaterThan(0);
    expect(jinja.tokensPerCall).toBeGreaterThan(jinja.tokensPerItem);
    // node-llama-cpp's ChatML wrapper documents them as TypeScript-like types.
    const chatMl = render(new ChatMLChatWrapper());
    expect(chatMl.documentsParametersAsJson).toBe(false);
    expect(chatMl.tokensPerCall).toBeGreaterThan(0);
  });
});
