import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { ChatEngine } from "../../src/engine/engine.ts";
import { createLlamaEngine } from "../../src/engine/llama/create-llama-engine.ts";
import type { LlamaEngineLogger } from "../../src/engine/llama/llama-engine-logger.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { createChatRequest } from "../support/create-chat-request.ts";
import { createModelBytes, type ModelFileServer, startModelFileServer } from "./model-file-server.ts";

const modelsFolder = makeTemporaryDirectory();
const engines: ChatEngine[] = [];
let server: ModelFileServer;
let model: { bytes: Buffer; sha256: string };
let previousModelsFolder: string | undefined;

beforeAll(async () => {
  previousModelsFolder = process.env.TOLLGATE_MODELS_DIR;
  process.env.TOLLGATE_MODELS_DIR = modelsFolder;
  [server, model] = await Promise.all([startModelFileServer(), createModelBytes(8)]);
});

afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close()));
  await server?.close();
  if (previousModelsFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
  else process.env.TOLLGATE_MODELS_DIR = previousModelsFolder;
});

/** A catalogue chat model whose GGUF comes from `source`; CPU only, one thread. */
function createCatalogModel(source: string): CatalogModel {
  return {
    id: "tiny-download",
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: 256,
    created: 0,
    engine: { type: "llama", model: source, parallel: 1, maxQueue: 4, threads: 1, gpu: false },
  };
}

function createRecordingLogger() {
  const lines: { level: "info" | "warn" | "error"; object: object; message: string | undefined }[] = [];
  const logger: LlamaEngineLogger = {
    info: (object, message) => lines.push({ level: "info", object, message }),
    warn: (object, message) => lines.push({ level: "warn", object, message }),
    error: (object, message) => lines.push({ level: "error", object, message }),
  };
  return { logger, lines };
}

function createEngine(source: string, logger: LlamaEngineLogger): ChatEngine {
  const engine = createLlamaEngine({ model: createCatalogModel(source), logger });
  engines.push(engine);
  return engine;
}

const request = createChatRequest({ maxTokens: 1, temperature: 0 });

async function refusalOf(engine: ChatEngine): Promise<AppError> {
  const refusal = await engine.prepare(request).catch((error: unknown) => error);
  expect(refusal).toBeInstanceOf(AppError);
  return refusal as AppError;
}

describe("llama engine: a model URI downloaded on first use", () => {
  it("is loading while the file downloads, then available, and generates", async () => {
    let open: () => void = () => {};
    server.files.set("/models/tiny.gguf", {
      bytes: model.bytes,
      gate: new Promise<void>((resolve) => {
        open = resolve;
      }),
    });
    const { logger, lines } = createRecordingLogger();
    const engine = createEngine(`${server.baseUrl}/models/tiny.gguf`, logger);
    await vi.waitFor(() =>
      expect(server.requests.some((seen) => seen.path === "/models/tiny.gguf")).toBe(true),
    );
    expect(engine.status()).toBe("loading");
    open();
    const prepared = await engine.prepare(request);
    expect(engine.status()).toBe("available");
    const parts = [];
    for await (const batch of prepared.run(new AbortController().signal))
      for (const part of batch) parts.push(part);
    expect(parts.at(-1)).toMatchObject({ type: "finish", usage: { completionTokens: 1 } });
    const files = await readdir(modelsFolder);
    expect(files).toEqual([expect.stringMatching(/^127\.0\.0\.1_tiny-[0-9a-f]{8}\.gguf$/)]);
    const messages = lines.map((line) => line.message);
    expect(messages[0]).toMatch(/^Downloading http:\/\/127\.0\.0\.1:\d+\/models\/tiny\.gguf to /);
    expect(messages).toContain("model downloaded");
    expect(messages).toContain("local model loaded");
    expect(lines.some((line) => line.level !== "info")).toBe(false);
  });

  it("holds as many requests as could wait once loaded, and lets go of one whose client leaves", async () => {
    let open: () => void = () => {};
    server.files.set("/models/slow.gguf", {
      bytes: model.bytes,
      gate: new Promise<void>((resolve) => {
        open = resolve;
      }),
    });
    const engine = createEngine(`${server.baseUrl}/models/slow.gguf`, createRecordingLogger().logger);
    await vi.waitFor(() =>
      expect(server.requests.some((seen) => seen.path === "/models/slow.gguf")).toBe(true),
    );
    // parallel 1 + max_queue 4: five may wait.
    const leaving = new AbortController();
    const left = engine.prepare(request, { signal: leaving.signal }).catch((error: unknown) => error);
    const waiting = Array.from({ length: 4 }, () => engine.prepare(request));
    const refused = await refusalOf(engine);
    expect(refused.code).toBe("model_overloaded");
    expect(refused.status).toBe(503);
    expect(refused.message).toMatch(/still loading .* 5 requests already wait for it/);
    expect(engine.load?.()).toEqual({ running: 0, waiting: 5 });

    leaving.abort(new Error("client left"));
    expect(((await left) as Error).message).toBe("client left");
    expect(engine.load?.()).toEqual({ running: 0, waiting: 4 });
    // Its place is free again.
    waiting.push(engine.prepare(request));
    expect(engine.status()).toBe("loading");
    open();
    expect(await Promise.all(waiting)).toHaveLength(5);
    expect(engine.status()).toBe("available");
  });

  it("shares the places of requests waiting for the download between accounts (regression: one account's burst kept the others out)", async () => {
    let open: () => void = () => {};
    server.files.set("/models/shared.gguf", {
      bytes: model.bytes,
      gate: new Promise<void>((resolve) => {
        open = resolve;
      }),
    });
    const engine = createEngine(`${server.baseUrl}/models/shared.gguf`, createRecordingLogger().logger);
    await vi.waitFor(() =>
      expect(server.requests.some((seen) => seen.path === "/models/shared.gguf")).toBe(true),
    );
    const outcome = (prepared: Promise<unknown>) =>
      prepared.then(
        () => "prepared",
        (error: unknown) => (error instanceof AppError ? error.code : String(error)),
      );
    // parallel 1 + max_queue 4: one account's burst takes all five places.
    const burst = Array.from({ length: 5 }, () => outcome(engine.prepare(request, { tenant: "batch" })));
    const other = outcome(engine.prepare(request, { tenant: "interactive" }));
    open();
    expect(await other).toBe("prepared");
    expect(await Promise.all(burst)).toEqual([
      "prepared",
      "prepared",
      "prepared",
      "prepared",
      "model_overloaded",
    ]);
  });

  it("is unavailable, with a 503 that says to retry and a log line that says how to fix it, when the host cannot be reached", async () => {
    const closed = await startModelFileServer();
    await closed.close();
    const source = `${closed.baseUrl}/models/tiny.gguf`;
    const { logger, lines } = createRecordingLogger();
    const engine = createEngine(source, logger);
    const refusal = await refusalOf(engine);
    expect(refusal.code).toBe("model_unavailable");
    expect(refusal.status).toBe(503);
    // The client is told to retry; the host, the URI and the models folder are in the log only.
    expect(refusal.message).toBe(
      "The model 'tiny-download' is unavailable: its file is not downloaded yet. To fix it, an operator gives the server network access to the model's host, puts the file in place (`tollgate models pull tiny-download` on a machine with access; the server's log says where), or points the model at a local GGUF file. The server tries again by itself; please retry later.",
    );
    expect(refusal.retryAfterSeconds).toBeGreaterThan(0);
    const warning = lines.find((line) => line.level === "warn")?.object as { reason?: string } | undefined;
    expect(warning?.reason).toMatch(
      new RegExp(
        `^Its file could not be downloaded: Cannot reach ${closed.baseUrl.replace("http://", "").replace(/\./g, "\\.")} \\(.*\\)\\. To fix it, .*run \`tollgate models pull ${source.replace(/[./]/g, "\\$&")}\` on a machine with network access and put the file at ${modelsFolder.replace(/[./]/g, "\\$&")}/.*\\.gguf; or serve a local GGUF file instead: name it in engine\\.model in tollgate\\.yaml .*\\.$`,
      ),
    );
    expect(engine.status()).toBe("unavailable");
    // An expected failure: one warning with the reason, no error with a stack trace.
    expect(lines.filter((line) => line.level !== "info")).toEqual([
      {
        level: "warn",
        object: {
          model: "tiny-download",
          reason: warning?.reason,
          // Tried again later (retry-model-download.ts): the warning says when.
          attempt: 1,
          nextAttemptAt: expect.any(String),
        },
        message: "local model unavailable",
      },
    ]);
  });

  it("is unavailable, for good, with the server's answer in the log when the file does not exist", async () => {
    const { logger, lines } = createRecordingLogger();
    const engine = createEngine(`${server.baseUrl}/models/missing.gguf`, logger);
    const refusal = await refusalOf(engine);
    expect(refusal.message).toBe(
      "The model 'tiny-download' is unavailable: its file could not be downloaded. The server's log says why and how to fix it: an operator corrects the model's engine.model (its URI, or the token of a gated repository) or points it at a local GGUF file, then reloads the server.",
    );
    expect(refusal.retryable).toBe(false);
    expect(JSON.stringify(lines.map((line) => line.object))).toContain(
      `${server.baseUrl}/models/missing.gguf does not exist (HTTP 404 Not Found)`,
    );
    expect(existsSync(`${modelsFolder}/missing.gguf`)).toBe(false);
  });

  it("says why a downloaded file does not load, without the URL's user, password or query", async () => {
    // A GGUF header of version 3 with no tensors and no metadata: kept by the download, and no model.
    const header = Buffer.alloc(24);
    header.write("GGUF", 0, "latin1");
    header.writeUInt32LE(3, 4);
    server.files.set("/models/broken.gguf", { bytes: header });
    const source = `${server.baseUrl.replace("http://", "http://alice:hunter2@")}/models/broken.gguf?sig=TOPSECRET`;
    const { logger, lines } = createRecordingLogger();
    const engine = createEngine(source, logger);
    const refusal = await refusalOf(engine);
    expect(refusal.code).toBe("model_unavailable");
    // The log says why; the client, in general terms.
    expect(refusal.message).toMatch(
      /its file on the server is missing or cannot be used\. The server's log says why/,
    );
    const warned = lines.find((line) => line.message === "local model unavailable");
    expect((warned?.object as { reason?: string } | undefined)?.reason).toMatch(
      /cannot be loaded: GGUF metadata key general\.architecture is missing\. Replace it with a valid GGUF chat model/,
    );
    for (const text of [refusal.message, JSON.stringify(lines.map((line) => [line.message, line.object]))]) {
      expect(text).not.toContain("hunter2");
      expect(text).not.toContain("TOPSECRET");
    }
  });
});
