import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type Llama, LlamaContextSequence, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatEngine, ModelStatus, StreamPart } from "../../../src/engine/engine.ts";
import { countTokensAfterAbort } from "../../../src/engine/llama/count-tokens-after-abort.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { isAppError } from "../../../src/errors/app-error.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import { generateGreedily } from "../../support/generate-greedily.ts";
import {
  collectParts,
  createTestCatalogModel,
  createTestRequest,
  readEnd,
  readText,
} from "./llama-test-support.ts";

let folder: string;
let llama: Llama;
/** Generations end after a few tokens (the test model's end bias). */
let engine: ChatEngine;
let statusAtCreation: ModelStatus;
let contextLengthAtCreation: number | undefined;
/** Generations never end by themselves (no end bias): for aborts, queues and closing. */
let endlessEngine: ChatEngine;
/** The same model file loaded apart from the engine, to count and generate independently of it. */
let tokenizer: LlamaModel;
let directSequence: LlamaContextSequence;

/** Greedy generation on the test's own sequence, from an empty history (see generateGreedily). */
async function generateDirectly(
  prompt: string,
  maxTokens: number,
): Promise<{ text: string; tokens: number }> {
  await directSequence.clearHistory();
  return await generateGreedily(directSequence, tokenizer, prompt, maxTokens);
}

const helloPrompt = "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n";

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-llama-generation-"));
  const ending = await writeTestModel({ path: join(folder, "tiny.gguf"), seed: 1 });
  const endless = await writeTestModel({ path: join(folder, "endless.gguf"), seed: 1, endBias: 0 });
  llama = await getLlama({ gpu: false, build: "never" });
  engine = createLlamaEngine({
    model: createTestCatalogModel({ path: ending.path, contextLength: 512, parallel: 1, maxQueue: 1 }),
    llama: async () => llama,
  });
  statusAtCreation = engine.status();
  contextLengthAtCreation = engine.contextLength;
  endlessEngine = createLlamaEngine({
    model: createTestCatalogModel({ path: endless.path, contextLength: 512, parallel: 1, maxQueue: 1 }),
    llama: async () => llama,
  });
  tokenizer = await llama.loadModel({ modelPath: ending.path });
  const directContext = await tokenizer.createContext({ contextSize: 512, threads: 1 });
  directSequence = directContext.getSequence();
});

afterAll(async () => {
  await engine?.close();
  await endlessEngine?.close();
  await tokenizer?.dispose();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

describe("llama engine: loading", () => {
  it("is loading at first and available with the catalogue's context length once loaded", async () => {
    expect(statusAtCreation).toBe("loading");
    expect(contextLengthAtCreation).toBeUndefined();
    await engine.prepare(createTestRequest());
    expect(engine.status()).toBe("available");
    expect(engine.contextLength).toBe(512);
    expect(engine.supportsMultipleChoices).toBe(false);
  });
});

describe("llama engine: generation", () => {
  it("streams text deltas, then one finish with exact usage", async () => {
    const prepared = await engine.prepare(createTestRequest());
    expect(prepared.promptTokens).toBe(tokenizer.tokenize(helloPrompt, true).length);
    expect(prepared.maxCompletionTokens).toBe(512 - prepared.promptTokens);

    const parts = await collectParts(prepared);
    expect(parts.slice(0, -1).every((part) => part.type === "text-delta")).toBe(true);
    const direct = await generateDirectly(helloPrompt, 512);
    expect(readText(parts)).toBe(direct.text);
    // The completion tokens are every sampled token, the end-of-turn token that ended it included.
    expect(readEnd(parts)).toEqual({
      type: "finish",
      reason: "stop",
      rawReason: "eogToken",
      usage: { promptTokens: prepared.promptTokens, completionTokens: direct.tokens },
      queueMs: expect.any(Number),
    });
  });

  it("ends with length after max_tokens tokens", async () => {
    const prepared = await engine.prepare(createTestRequest({ maxTokens: 2 }));
    expect(prepared.maxCompletionTokens).toBe(2);
    const parts = await collectParts(prepared);
    expect(readEnd(parts)).toMatchObject({
      type: "finish",
      reason: "length",
      rawReason: "maxTokens",
      usage: { completionTokens: 2 },
    });
    expect(readText(parts)).toBe((await generateDirectly(helloPrompt, 2)).text);
  });

  it("stops before a stop string, which is not returned", async () => {
    const full = readText(await collectParts(await engine.prepare(createTestRequest())));
    const stop = full.slice(1, 3);
    const parts = await collectParts(
      await engine.prepare(createTestRequest({ stop: ["never-generated", stop] })),
    );
    expect(readText(parts)).toBe(full.slice(0, full.indexOf(stop)));
    expect(readEnd(parts)).toMatchObject({ type: "finish", reason: "stop", rawReason: "customStopTrigger" });
  });

  it("returns the same text at temperature 0, also after the sequence served another request", async () => {
    const first = readText(await collectParts(await engine.prepare(createTestRequest())));
    const other = createTestRequest({
      messages: [{ role: "user", content: "Something else entirely, please." }],
    });
    await collectParts(await engine.prepare(other));
    const again = readText(await collectParts(await engine.prepare(createTestRequest())));
    expect(again).toBe(first);
  });

  it("returns the same text for the same seed at temperature 1", async () => {
    const request = createTestRequest({ temperature: 1, seed: 42, maxTokens: 40 });
    const runs: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      runs.push(readText(await collectParts(await engine.prepare(request))));
      // Something else in between, with another seed.
      await collectParts(await engine.prepare(createTestRequest({ temperature: 1, seed: index })));
    }
    expect(new Set(runs).size).toBe(1);
  });

  // Regression: both wrapped to 0xFFFFFFFF, which llama.cpp takes for "pick a random seed".
  it.each([-1, 4294967295])("returns the same text for seed %i", async (seed) => {
    const request = createTestRequest({ temperature: 1, seed, maxTokens: 40 });
    const runs: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      runs.push(readText(await collectParts(await endlessEngine.prepare(request))));
    }
    expect(runs[0]).not.toBe("");
    expect(new Set(runs).size).toBe(1);
  });

  it("accepts frequency and presence penalties, and a negative seed", async () => {
    const parts = await collectParts(
      await engine.prepare(
        createTestRequest({
          frequencyPenalty: 1.5,
          presencePenalty: -0.5,
          temperature: 0.7,
          seed: -5,
          maxTokens: 20,
        }),
      ),
    );
    expect(readEnd(parts)).toMatchObject({ type: "finish" });
  });

  it("refuses a prompt plus max_tokens over the context before running", async () => {
    const refusal = await engine
      .prepare(createTestRequest({ maxTokens: 600 }))
      .catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.code).toBe("context_length_exceeded");
    expect(isAppError(refusal) && refusal.param).toBe("messages");
    expect(String((refusal as Error).message)).toMatch(
      /^This model's maximum context length is 512 tokens\. However, you requested 611 tokens \(11 in the messages, 600 in the completion\)\. Please reduce/,
    );

    const long = createTestRequest({ messages: [{ role: "user", content: "hello world ".repeat(400) }] });
    const tooLong = await engine.prepare(long).catch((error: unknown) => error);
    expect(isAppError(tooLong) && tooLong.code).toBe("context_length_exceeded");

    // Megabytes of messages are refused from their first pieces, never rendered whole.
    const huge = createTestRequest({ messages: [{ role: "user", content: "hello world ".repeat(400_000) }] });
    const hugeRefusal = await engine.prepare(huge).catch((error: unknown) => error);
    expect(isAppError(hugeRefusal) && hugeRefusal.code).toBe("context_length_exceeded");
    expect(String((hugeRefusal as Error).message)).toMatch(/your messages resulted in more than \d+ tokens/);
  });
});

describe("llama engine: queue and abort", () => {
  it("refuses with model_overloaded beyond parallel plus max_queue", async () => {
    const prepared = await Promise.all(
      [0, 1, 2].map(() => endlessEngine.prepare(createTestRequest({ maxTokens: 20 }))),
    );
    const iterators = prepared.map((chat) => chat.run(new AbortController().signal)[Symbol.asyncIterator]());
    const firsts = await Promise.allSettled(iterators.map((iterator) => iterator.next()));
    const refused = firsts.filter((result) => result.status === "rejected");
    expect(refused).toHaveLength(1);
    const reason = (refused[0] as PromiseRejectedResult).reason;
    expect(isAppError(reason) && reason.code).toBe("model_overloaded");
    expect(isAppError(reason) && reason.retryAfterSeconds).toBe(1);
    // The two admitted requests run one after the other and both finish; the second says how
    // long it waited for the first.
    const queued: number[] = [];
    for (const [index, iterator] of iterators.entries()) {
      if (firsts[index]?.status !== "fulfilled") continue;
      let result = await iterator.next();
      while (!result.done && result.value.at(-1)?.type !== "finish") result = await iterator.next();
      const finish = result.done ? undefined : result.value.at(-1);
      expect(finish).toMatchObject({ reason: "length", usage: { completionTokens: 20 } });
      if (finish?.type === "finish") queued.push(finish.queueMs ?? -1);
    }
    expect(queued).toHaveLength(2);
    expect(Math.min(...queued)).toBeGreaterThanOrEqual(0);
    // 20 tokens of the first request at least: never under a millisecond.
    expect(Math.max(...queued)).toBeGreaterThan(0);
  });

  it("ends an aborted generation at once with partial usage and reuses its sequence", async () => {
    const prepared = await endlessEngine.prepare(createTestRequest({ maxTokens: 400 }));
    const controller = new AbortController();
    const sampledAfterAbort = countTokensAfterAbort(LlamaContextSequence.prototype, controller.signal);
    const parts: StreamPart[] = [];
    const afterAbort: StreamPart[] = [];
    try {
      for await (const batch of prepared.run(controller.signal)) {
        if (controller.signal.aborted) afterAbort.push(...batch);
        for (const part of batch) {
          parts.push(part);
          if (part.type === "text-delta" && !controller.signal.aborted) controller.abort();
        }
      }
    } finally {
      sampledAfterAbort.restore();
    }
    // At once: at most the token under way when the client left is sampled, and none is streamed.
    expect(sampledAfterAbort.count).toBeLessThanOrEqual(1);
    expect(afterAbort.map((part) => part.type)).toEqual(["finish"]);
    const end = readEnd(parts);
    expect(end).toMatchObject({ type: "finish", reason: "stop", rawReason: "abort" });
    const completionTokens = end.usage.completionTokens ?? 0;
    expect(completionTokens).toBeGreaterThanOrEqual(1);
    expect(completionTokens).toBeLessThan(400);

    const next = await collectParts(await endlessEngine.prepare(createTestRequest({ maxTokens: 3 })));
    expect(readEnd(next)).toMatchObject({ type: "finish", reason: "length", usage: { completionTokens: 3 } });
  });

  it("takes a request whose signal aborts while it waits out of the queue", async () => {
    const running = (await endlessEngine.prepare(createTestRequest({ maxTokens: 400 }))).run(
      new AbortController().signal,
    );
    const runningIterator = running[Symbol.asyncIterator]();
    await runningIterator.next();
    const controller = new AbortController();
    const waiting = (await endlessEngine.prepare(createTestRequest()))
      .run(controller.signal)
      [Symbol.asyncIterator]();
    const waitingFirst = waiting.next();
    controller.abort();
    expect((await waitingFirst).value).toMatchObject([
      { type: "finish", rawReason: "abort", usage: { completionTokens: 0 } },
    ]);
    // The reader of the running request stops early: its sequence still goes back to the pool.
    await runningIterator.return?.(undefined);
    const next = await collectParts(await endlessEngine.prepare(createTestRequest({ maxTokens: 2 })));
    expect(readEnd(next)).toMatchObject({ reason: "length", usage: { completionTokens: 2 } });
  });

  it("aborts requests in flight on close and becomes unavailable", async () => {
    const iterator = (await endlessEngine.prepare(createTestRequest({ maxTokens: 400 })))
      .run(new AbortController().signal)
      [Symbol.asyncIterator]();
    await iterator.next();
    const closing = endlessEngine.close();
    const rest: StreamPart[] = [];
    for (let result = await iterator.next(); !result.done; result = await iterator.next())
      rest.push(...result.value);
    await closing;
    const end = readEnd(rest);
    expect(end.type === "error" && end.error.code).toBe("model_unavailable");
    expect(endlessEngine.status()).toBe("unavailable");
    const refusal = await endlessEngine.prepare(createTestRequest()).catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.code).toBe("model_unavailable");
  });
});
