/**
 * Regression: a reload kept the engine of a local model whose configuration had not changed even
 * when its file had been replaced at the same path (`mv new.gguf model.gguf`, then SIGHUP), so the
 * server served the old weights until it restarted.
 */

import { renameSync, unlinkSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CatalogModel } from "../../../src/catalog/catalog.ts";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import { ModelRegistry } from "../../../src/models/model-registry.ts";
import { collectParts, createTestCatalogModel, createTestRequest, readEnd } from "./llama-test-support.ts";

let folder: string;
const engines: ChatEngine[] = [];

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-model-file-swap-"));
});

afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close()));
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

/** A registry of real llama engines, each kept for closing at the end. */
function createRegistry(model: CatalogModel): ModelRegistry {
  return new ModelRegistry([model], (entry) => {
    const engine = createLlamaEngine({ model: entry });
    engines.push(engine);
    return engine;
  });
}

function engineOf(registry: ModelRegistry, model: CatalogModel): ChatEngine {
  const engine = registry.get(model.id)?.engine;
  if (engine === undefined) throw new Error(`no engine for ${model.id}`);
  return engine;
}

/** The engine a reload made for the model, once it has taken over from the one serving it. */
async function takeOver(registry: ModelRegistry, model: CatalogModel): Promise<ChatEngine> {
  const replacement = registry.getReplacement(model.id);
  if (replacement === undefined) throw new Error(`no new engine loads for ${model.id}`);
  while (engineOf(registry, model) !== replacement) await new Promise((resolve) => setTimeout(resolve, 20));
  return replacement;
}

/** Waits for the engine's model and runs a one-token request on it. */
async function generateOneToken(engine: ChatEngine): Promise<void> {
  const parts = await collectParts(await engine.prepare(createTestRequest({ maxTokens: 1 })));
  expect(readEnd(parts)).toMatchObject({ type: "finish", usage: { completionTokens: 1 } });
}

describe("reloading a local model whose file was replaced at the same path", () => {
  it("serves the new file after `mv` and a reload; a request under way finishes on the old weights", async () => {
    const path = join(folder, "moved-over.gguf");
    await writeTestModel({ path, seed: 1, size: "tiny" });
    const model = createTestCatalogModel({ path });
    const registry = createRegistry(model);
    const first = engineOf(registry, model);
    await generateOneToken(first);
    expect(first.contextLength).toBe(2048);

    // The same file and configuration: the engine and its loaded weights stay.
    expect(registry.replace([model])).toEqual([]);
    expect(engineOf(registry, model)).toBe(first);
    expect(engines).toHaveLength(1);

    const underWay = await first.prepare(createTestRequest({ maxTokens: 2 }));
    const next = join(folder, "next.gguf");
    // A different model: the small one was trained for a context of 4096 tokens.
    await writeTestModel({ path: next, seed: 2, size: "small" });
    renameSync(next, path);

    // The old engine serves until the new file has loaded (ModelRegistry.replace).
    expect(registry.replace([model])).toEqual([]);
    const second = await takeOver(registry, model);
    expect(second).not.toBe(first);
    expect(readEnd(await collectParts(underWay))).toMatchObject({
      type: "finish",
      usage: { completionTokens: 2 },
    });
    await generateOneToken(second);
    expect(second.contextLength).toBe(4096);

    // The new engine knows its own file: the next reload keeps it.
    expect(registry.replace([model])).toEqual([]);
    expect(engineOf(registry, model)).toBe(second);
    expect(engines).toHaveLength(2);
  });

  it("keeps the engine while the file is removed, and loads the one put back on the next reload", async () => {
    const path = join(folder, "removed.gguf");
    await writeTestModel({ path, seed: 3, size: "tiny" });
    const model = createTestCatalogModel({ path });
    const registry = createRegistry(model);
    const loaded = engineOf(registry, model);
    await generateOneToken(loaded);

    // The loaded weights outlive the file's name; a new engine would find nothing to load.
    unlinkSync(path);
    expect(registry.replace([model])).toEqual([]);
    expect(engineOf(registry, model)).toBe(loaded);
    await generateOneToken(loaded);

    const next = join(folder, "put-back.gguf");
    await writeTestModel({ path: next, seed: 4, size: "tiny" });
    renameSync(next, path);
    expect(registry.replace([model])).toEqual([]);
    const reloaded = await takeOver(registry, model);
    expect(reloaded).not.toBe(loaded);
    await generateOneToken(reloaded);
    expect(reloaded.status()).toBe("available");
  });
});
