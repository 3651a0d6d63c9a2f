import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorHeaders } from "../../../src/api/errors.ts";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { type AppError, isAppError } from "../../../src/errors/app-error.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import { createTestCatalogModel, createTestRequest } from "./llama-test-support.ts";

let folder: string;
const engines: ChatEngine[] = [];

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-llama-loading-"));
});

afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close()));
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

/** Engines here use the default binding: the process-wide one for `gpu: false`. */
function createEngine(path: string): ChatEngine {
  const engine = createLlamaEngine({ model: createTestCatalogModel({ path }) });
  engines.push(engine);
  return engine;
}

async function expectUnavailable(engine: ChatEngine, messagePattern: RegExp): Promise<void> {
  const refusal = await engine.prepare(createTestRequest()).catch((error: unknown) => error);
  expect(isAppError(refusal) && refusal.code).toBe("model_unavailable");
  expect((refusal as Error).message).toMatch(messagePattern);
  // No retry in a moment can help: the SDKs are told not to (x-should-retry: false).
  expect(errorHeaders(refusal as AppError)).toMatchObject({ "x-should-retry": "false" });
  expect(engine.status()).toBe("unavailable");
  expect(engine.contextLength).toBeUndefined();
}

describe("getSharedLlama", () => {
  it("loads the binding once per GPU setting", async () => {
    const first = getSharedLlama({ gpu: false });
    expect(getSharedLlama({ gpu: false })).toBe(first);
    expect((await first).gpu).toBe(false);
  });
});

describe("llama engine: loading with the shared binding", () => {
  it("loads a valid model and generates", async () => {
    const model = await writeTestModel({ path: join(folder, "valid.gguf"), seed: 3 });
    const engine = createEngine(model.path);
    expect(engine.status()).toBe("loading");
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
    const preparing = engine.prepare(createTestRequest({ maxTokens: 1 }));
    // A request waiting for the model to load counts: a reload does not close the engine under it.
    expect(engine.load?.()).toEqual({ running: 0, waiting: 1 });
    const prepared = await preparing;
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
    expect(engine.status()).toBe("available");
    const parts = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) parts.push(part);
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "length", usage: { completionTokens: 1 } });
  });
});

describe("llama engine: unusable model files", () => {
  it("is unavailable for a missing file and says how to get one", async () => {
    const path = join(folder, "missing.gguf");
    const engine = createEngine(path);
    await expectUnavailable(engine, /does not exist.*models pull.*models make-test/);
    await expect(engine.prepare(createTestRequest())).rejects.toThrow(path);
  });

  it("is unavailable for a file that is not a GGUF model", async () => {
    const path = join(folder, "notes.gguf");
    await writeFile(path, "just some text, not a model\n".repeat(100));
    await expectUnavailable(createEngine(path), /cannot be loaded/);
  });

  it("is unavailable for a truncated model, without bringing the process down", async () => {
    const model = await writeTestModel({ path: join(folder, "whole.gguf"), seed: 2 });
    const bytes = await readFile(model.path);
    const path = join(folder, "truncated.gguf");
    await writeFile(path, bytes.subarray(0, Math.floor(bytes.length / 2)));
    await expectUnavailable(createEngine(path), /model_unavailable|unavailable/);
  });

  it("is unavailable for a model that has not been downloaded", async () => {
    await expectUnavailable(createEngine("hf:org/repo:Q4_K_M"), /models pull hf:org\/repo:Q4_K_M/);
  });
});
