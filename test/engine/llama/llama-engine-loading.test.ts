import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorHeaders } from "../../../src/api/errors.ts";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { type AppError, isAppError } from "../../../src/errors/app-error.ts";
import { writeTestModel } from "../../../src/gguf/write-test-model.ts";
import { getContextLength } from "../../../src/models/model-registry.ts";
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

/** The reasons each engine logged with its warning `local model unavailable`. */
const loggedReasons = new Map<ChatEngine, string[]>();
/** The fields of each engine's error lines. */
const loggedErrors = new Map<ChatEngine, object[]>();

/** Engines here use the default binding: the process-wide one for `gpu: false`. */
function createEngine(path: string): ChatEngine {
  const reasons: string[] = [];
  const errors: object[] = [];
  const logger = {
    info: () => {},
    error: (fields: object) => errors.push(fields),
    warn: (fields: { reason?: string }, message?: string) => {
      if (message === "local model unavailable" && fields.reason !== undefined) reasons.push(fields.reason);
    },
  };
  const engine = createLlamaEngine({ model: createTestCatalogModel({ path }), logger });
  engines.push(engine);
  loggedReasons.set(engine, reasons);
  loggedErrors.set(engine, errors);
  return engine;
}

/** The reason the server's log gives for a model that did not load (the client's message is general). */
async function messageOf(engine: ChatEngine): Promise<string> {
  await engine.prepare(createTestRequest()).catch(() => undefined);
  return loggedReasons.get(engine)?.at(-1) ?? "";
}

/** Unavailable, the client told in general terms, the log's reason matching `messagePattern`. */
async function expectUnavailable(engine: ChatEngine, messagePattern: RegExp): Promise<void> {
  const refusal = await engine.prepare(createTestRequest()).catch((error: unknown) => error);
  expect(isAppError(refusal) && refusal.code).toBe("model_unavailable");
  const message = (refusal as Error).message;
  // Regression: the 503 gave every key holder the server's path and the commands to run there.
  expect(message).toMatch(/^The model '.*' is unavailable: its file .*\. The server's log says why/);
  expect(message).not.toContain(folder);
  // A failure the loader expects is logged as a warning with its reason (another, as an error).
  const reason = loggedReasons.get(engine)?.at(-1);
  expect(reason ?? message).toMatch(messagePattern);
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

describe("llama engine: the context length it reports", () => {
  it("is unknown while the model loads, then the catalogue's capped at the file's trained context", async () => {
    const model = await writeTestModel({ path: join(folder, "capped.gguf"), seed: 4 });
    const catalogued = createTestCatalogModel({ path: model.path, contextLength: 100_000 });
    const engine = createLlamaEngine({ model: catalogued });
    engines.push(engine);
    expect(engine.status()).toBe("loading");
    // Regression: /v1/models showed the catalogue's 100000 while the model loaded.
    expect(getContextLength({ model: catalogued, engine })).toBeUndefined();
    await engine.prepare(createTestRequest({ maxTokens: 1 }));
    expect(getContextLength({ model: catalogued, engine })).toBe(model.contextLength);
    expect(model.contextLength).toBeLessThan(100_000);
  });
});

describe("llama engine: unusable model files", () => {
  it("is unavailable for a missing file and says how to get one", async () => {
    const path = join(folder, "missing.gguf");
    const engine = createEngine(path);
    await expectUnavailable(engine, /does not exist.*hf:ORG\/REPO:QUANT.*models pull URI.*SIGHUP/);
    const message = await messageOf(engine);
    expect(message).toContain(`'${path}'`);
    // The test model is offered for a demo, where it overwrites nothing.
    expect(message).toContain(
      `(To try Tollgate without a real model, \`tollgate models make-test '${path}'\` writes a tiny random-weight test model there.)`,
    );
  });

  // Regression: the 503 told to run `models make-test` on the file, which replaced a checkpoint.
  it("is unavailable for a file that is not a GGUF model, says how to fix it, and suggests no make-test", async () => {
    const path = join(folder, "victim.safetensors");
    await writeFile(path, '{"__metadata__":{}}'.repeat(100));
    const engine = createEngine(path);
    await expectUnavailable(
      engine,
      /cannot be loaded: not a GGUF file.*Tollgate loads GGUF models only\. To fix it, set engine\.model to a GGUF file \(llama\.cpp's convert_hf_to_gguf\.py.*hf:ORG\/REPO:QUANT.*models pull URI/,
    );
    const message = await messageOf(engine);
    expect(message).not.toContain("make-test");
    expect(message).not.toContain("does not exist");
  });

  it("is unavailable for a broken GGUF, with no make-test over it", async () => {
    const path = join(folder, "short.gguf");
    await writeFile(path, "GGUF");
    const engine = createEngine(path);
    await expectUnavailable(
      engine,
      /cannot be loaded: .*Replace it with a valid GGUF chat model, or set engine\.model/,
    );
    expect(await messageOf(engine)).not.toContain("make-test");
  });

  // Regression: a folder was said not to exist.
  it("is unavailable for a folder and says to name the .gguf file in it, without listing it", async () => {
    const path = join(folder, "weights");
    await mkdir(path);
    await writeFile(join(path, "secret-name.gguf"), "");
    const engine = createEngine(path);
    await expectUnavailable(
      engine,
      /is a folder, not a GGUF file\. To fix it, set engine\.model to the \.gguf file in that folder/,
    );
    const message = await messageOf(engine);
    expect(message).toContain(`'${join(path, "model.gguf")}'`);
    expect(message).not.toContain("does not exist");
    expect(message).not.toContain("make-test");
    expect(message).not.toContain("secret-name");
  });

  it("is unavailable for a truncated model, without bringing the process down", async () => {
    const model = await writeTestModel({ path: join(folder, "whole.gguf"), seed: 2 });
    const bytes = await readFile(model.path);
    const path = join(folder, "truncated.gguf");
    await writeFile(path, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const engine = createEngine(path);
    await expectUnavailable(engine, /model_unavailable|unavailable/);
    // The log names the file, which the client's message does not.
    expect(loggedErrors.get(engine)).toContainEqual(expect.objectContaining({ engineModel: path }));
  });

  it("logs llama.cpp's own reason a model did not load as a log line, not as text on stderr", async () => {
    // An architecture llama.cpp does not know: the file passes Tollgate's own checks, and llama.cpp
    // alone says what is wrong with it.
    const model = await writeTestModel({ path: join(folder, "whole-logged.gguf"), seed: 3 });
    const bytes = Buffer.from(await readFile(model.path));
    const value = bytes.indexOf("llama", bytes.indexOf("general.architecture"));
    bytes.write("lla_x", value);
    const path = join(folder, "unknown-architecture.gguf");
    await writeFile(path, bytes);
    const errors: { fields: object; message: string | undefined }[] = [];
    const logger = {
      info: () => {},
      warn: () => {},
      error: (fields: object, message?: string) => errors.push({ fields, message }),
    };
    const engine = createLlamaEngine({ model: createTestCatalogModel({ path }), logger });
    engines.push(engine);
    await expectUnavailable(engine, /unavailable/);
    // node-llama-cpp hands llama.cpp's messages over on a later turn of the event loop.
    const fromLlamaCpp = () =>
      errors
        .filter((line) => (line.fields as { source?: string }).source === "llama.cpp")
        .map((line) => line.message)
        .join("\n");
    await expect.poll(fromLlamaCpp).toContain("unknown model architecture: 'lla_x'");
  });

  it("is unavailable for a model that has not been downloaded, and tries the download again later", async () => {
    const engine = createEngine("hf:org/repo:Q4_K_M");
    const refusal = await engine.prepare(createTestRequest()).catch((error: unknown) => error);
    expect(isAppError(refusal) && refusal.code).toBe("model_unavailable");
    // The client is told to retry later, no more: what to fix is in the server's log.
    expect((refusal as Error).message).toMatch(/its file is not downloaded yet.*please retry later\.$/);
    // A host that cannot be reached may be reached later (retry-model-download.ts): retry after.
    expect(errorHeaders(refusal as AppError)).toMatchObject({
      "retry-after": expect.stringMatching(/^\d+$/),
    });
    expect(engine.status()).toBe("unavailable");
  });
});
