/**
 * Stop strings on the LlamaChat path (functions, templates with thoughts, or an engine without the
 * direct path): text held back because it might begin a stop string is released when generation
 * ends without one, as on the direct path (generate-directly.ts).
 */
import { getLlama, type Llama, LlamaContextSequence } from "node-llama-cpp";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { ChatEngine, ChatRequest, StreamPart, ToolDefinition } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { getTestModelPath } from "../../support/test-model.ts";
import {
  collectParts,
  createTestCatalogModel,
  createTestRequest,
  readEnd,
  readText,
  readToolCalls,
} from "./llama-test-support.ts";

let llama: Llama;
/** Both engines generate until a limit (the endless test model); only `direct` takes the direct path. */
let direct: ChatEngine;
let llamaChat: ChatEngine;

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never" });
  const path = await getTestModelPath({ endless: true });
  const create = (directGeneration: boolean) =>
    createLlamaEngine({
      model: createTestCatalogModel({ path, contextLength: 512 }),
      llama: async () => llama,
      directGeneration,
    });
  direct = create(true);
  llamaChat = create(false);
});

afterAll(async () => {
  await direct?.close();
  await llamaChat?.close();
});

afterEach(() => {
  vi.restoreAllMocks();
});

interface Outcome {
  parts: StreamPart[];
  text: string;
  /** The `finish` or `error` part, without its `queueMs`. */
  end: WithoutQueueMs<Extract<StreamPart, { type: "finish" | "error" }>>;
}

type WithoutQueueMs<Part> = Part extends unknown ? Omit<Part, "queueMs"> : never;

async function run(engine: ChatEngine, request: ChatRequest, signal?: AbortSignal): Promise<Outcome> {
  const parts = await collectParts(await engine.prepare(request), signal);
  // The time spent waiting for a sequence differs from run to run.
  const { queueMs: _queueMs, ...end } = readEnd(parts);
  return { parts, text: readText(parts), end };
}

/** A stop string that begins with the last character of `text` and never completes. */
function stopAtEnd(text: string): string {
  const last = [...text].at(-1);
  expect(last).toBeDefined();
  return `${last}\u0000never`;
}

/** Aborts `controller` once the model has sampled `tokens` tokens, on either path. */
function abortAfterTokens(controller: AbortController, tokens: number): void {
  const evaluate = LlamaContextSequence.prototype.evaluate;
  let sampled = 0;
  vi.spyOn(LlamaContextSequence.prototype, "evaluate").mockImplementation(function (
    this: LlamaContextSequence,
    ...args: Parameters<typeof evaluate>
  ) {
    const iterator = evaluate.apply(this, args);
    return {
      next: async (...nextArgs: Parameters<typeof iterator.next>) => {
        const result = await iterator.next(...nextArgs);
        sampled += result.done === true ? 0 : 1;
        if (sampled === tokens) controller.abort();
        return result;
      },
      return: (value) => iterator.return(value),
      throw: (error) => iterator.throw(error),
      [Symbol.asyncIterator]() {
        return this;
      },
      [Symbol.asyncDispose]: () => iterator[Symbol.asyncDispose](),
    } satisfies ReturnType<typeof evaluate>;
  });
}

describe("stop strings on the LlamaChat path", () => {
  // Regression: LlamaChat dropped the held text at max_tokens, though it was generated and billed.
  it("releases text held for a possible stop string when max_tokens cuts, as the direct path", async () => {
    const request = createTestRequest({ temperature: 1, seed: 5, maxTokens: 12 });
    const full = await run(llamaChat, request);
    expect(full.end).toMatchObject({ reason: "length", usage: { completionTokens: 12 } });
    const stopped = { ...request, stop: [stopAtEnd(full.text)] };
    const held = await run(llamaChat, stopped);
    expect(held.text).toBe(full.text);
    expect(held.end).toEqual(full.end);
    const onDirectPath = await run(direct, stopped);
    expect(onDirectPath.text).toBe(held.text);
    expect(onDirectPath.end).toEqual(held.end);
  });

  it("releases it when tools are offered (tool_choice auto) and max_tokens cuts", async () => {
    const weather: ToolDefinition = {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    };
    const request = createTestRequest({ tools: [weather], temperature: 1, seed: 5, maxTokens: 12 });
    const full = await run(llamaChat, request);
    expect(readToolCalls(full.parts)).toEqual([]);
    expect(full.end).toMatchObject({ reason: "length" });
    const held = await run(llamaChat, { ...request, stop: [stopAtEnd(full.text)] });
    expect(held.text).toBe(full.text);
    expect(held.end).toEqual(full.end);
  });

  it("releases it when the client aborts", async () => {
    const request = createTestRequest({ temperature: 1, seed: 7, maxTokens: 40 });
    const fullAbort = new AbortController();
    abortAfterTokens(fullAbort, 10);
    const full = await run(llamaChat, request, fullAbort.signal);
    vi.restoreAllMocks();
    expect(full.end).toMatchObject({ reason: "stop", rawReason: "abort" });
    expect(full.text).not.toBe("");

    const heldAbort = new AbortController();
    abortAfterTokens(heldAbort, 10);
    const held = await run(llamaChat, { ...request, stop: [stopAtEnd(full.text)] }, heldAbort.signal);
    expect(held.text).toBe(full.text);
    expect(held.end).toEqual(full.end);
  });

  it("still stops before a stop string that completes, which is not returned", async () => {
    const request = createTestRequest({ temperature: 1, seed: 5, maxTokens: 12 });
    const full = await run(llamaChat, request);
    const characters = [...full.text];
    const start = characters.length - 4;
    // The first occurrence, so that the text before it is what comes back.
    const stop = characters.slice(start, start + 2).join("");
    const before = full.text.slice(0, full.text.indexOf(stop));
    const stopped = await run(llamaChat, { ...request, stop: ["never generated", stop] });
    expect(stopped.text).toBe(before);
    expect(stopped.end).toMatchObject({ reason: "stop", rawReason: "customStopTrigger" });
    const onDirectPath = await run(direct, { ...request, stop: ["never generated", stop] });
    expect(onDirectPath.text).toBe(stopped.text);
    expect(onDirectPath.end).toEqual(stopped.end);

    // At the very first character, before LlamaChat has released anything else.
    const first = await run(llamaChat, { ...request, stop: [characters[0] ?? ""] });
    expect(first.text).toBe("");
    expect(first.end).toMatchObject({ reason: "stop", rawReason: "customStopTrigger" });
    expect(first.end).toEqual((await run(direct, { ...request, stop: [characters[0] ?? ""] })).end);
  });

  // Held tokens are not penalized until released, on either path (LlamaChat penalizes what it released).
  it("samples with penalties as the direct path while text is held", async () => {
    const request = createTestRequest({
      frequencyPenalty: 1.5,
      presencePenalty: 0.5,
      temperature: 0.7,
      seed: 3,
      maxTokens: 40,
    });
    const full = await run(direct, request);
    // Held from the start for as long as the text follows the text generated without a stop.
    const stop = [`${full.text}\u0000never`];
    const onDirectPath = await run(direct, { ...request, stop });
    const onLlamaChat = await run(llamaChat, { ...request, stop });
    expect(onLlamaChat.text).toBe(onDirectPath.text);
    expect(onLlamaChat.end).toEqual(onDirectPath.end);
  });
});
