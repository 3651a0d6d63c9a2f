/**
 * Regression: a reload that changed a local model's `engine` block retired the engine serving it
 * at once, for a new one that had yet to load. A typo in the new `engine.model` (a missing file)
 * took the model down (503 `model_unavailable`) though a working engine had served it a moment
 * before; a good new file made requests wait for its load (`/v1/models` said `loading`). The
 * engine serving the model now goes on until the new one has loaded, and stays when it fails.
 */

import { mkdtempSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { createTestConfig, createTinyModelEntry, postTinyChat, TINY_MODEL } from "../support/test-server.ts";
import { until } from "../support/until.ts";
import { useTestServer } from "../support/use-test-server.ts";
import { type ModelFileServer, startModelFileServer } from "./model-file-server.ts";

interface LogLine {
  level: number;
  msg: string;
  model?: string;
  changed?: string[];
}

let files: ModelFileServer;
let tiny: CatalogModel;
const logged: LogLine[] = [];
const modelsFolder = mkdtempSync(join(tmpdir(), "tollgate-reload-keeps-"));
const previousModelsFolder = process.env.TOLLGATE_MODELS_DIR;

beforeAll(() => {
  // A model given by URL downloads into this folder (the download is what a test holds back).
  process.env.TOLLGATE_MODELS_DIR = modelsFolder;
});

// Registered before the server's: vitest runs afterAll hooks last registered first.
afterAll(async () => {
  await files?.close();
  if (previousModelsFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
  else process.env.TOLLGATE_MODELS_DIR = previousModelsFolder;
  await rm(modelsFolder, { recursive: true, force: true });
});

const server = useTestServer(() => {
  const { destination } = collectLogLines(logged);
  return { logDestination: destination };
});

beforeAll(async () => {
  files = await startModelFileServer();
  tiny = createTinyModelEntry(await getTestModelPath());
});

// Each test starts from the model served from its first file, whatever the one before left.
beforeEach(async () => {
  await server().server.reload(configWith([tiny]));
  await until(async () => {
    const listed = await describeTiny();
    return listed?.status === "available" && listed.context_length === 1024;
  });
  logged.length = 0;
});

function configWith(models: CatalogModel[]): Config {
  return createTestConfig({ database: "sqlite::memory:", models });
}

/** The tiny model's entry with another `engine.model` and `context_length`. */
function pointedAt(model: string, contextLength: number): CatalogModel {
  return { ...tiny, contextLength, engine: { ...tiny.engine, model } as CatalogModel["engine"] };
}

async function describeTiny(): Promise<{ status: string; context_length?: number | null } | undefined> {
  const response = await fetch(`${server().baseUrl}/models`, {
    headers: { authorization: `Bearer ${server().starterKey}` },
  });
  const body = (await response.json()) as {
    data: { id: string; status: string; context_length?: number | null }[];
  };
  return body.data.find((model) => model.id === TINY_MODEL);
}

/** Polls until `condition` holds (no time limit of its own: the test's applies). */
async function expectServed(): Promise<void> {
  const response = await postTinyChat(server(), {}, 2);
  expect(response.status).toBe(200);
  await response.json();
}

describe("a reload that changes a local model's engine", () => {
  it("keeps the model served by its engine when the new engine.model is missing", async () => {
    const missing = join(modelsFolder, "no-such-model.gguf");
    await server().server.reload(configWith([pointedAt(missing, 2048)]));

    await expectServed();
    const failed = () =>
      logged.find(
        (line) => line.level === 50 && line.model === TINY_MODEL && line.msg.includes("keeps serving"),
      );
    await until(() => failed() !== undefined);
    expect(failed()).toMatchObject({ changed: ["context_length", "engine.model"] });
    expect(failed()?.msg).toContain("engine.model");

    // After the failure too: the engine that served the model goes on, as /v1/models says.
    await expectServed();
    expect(await describeTiny()).toMatchObject({ status: "available", context_length: 1024 });
    const ready = await fetch(`${server().origin}/ready`);
    expect(ready.status).toBe(200);

    // A later reload with the setting corrected serves the new settings once they have loaded.
    await server().server.reload(configWith([pointedAt(await getTestModelPath({ seed: 2 }), 512)]));
    await until(async () => (await describeTiny())?.context_length === 512);
    await expectServed();
  });

  it("serves the model with its engine until the new file has loaded, then with the new one", async () => {
    const gate = Promise.withResolvers<void>();
    files.files.set("/next.gguf", {
      bytes: await readFile(await getTestModelPath({ seed: 3, size: "small" })),
      gate: gate.promise,
    });
    await server().server.reload(configWith([pointedAt(`${files.baseUrl}/next.gguf`, 2048)]));
    await until(() => files.requests.some((request) => request.path === "/next.gguf"));

    // The new file is still on its way: the engine the model had serves it, at its own context.
    expect(await describeTiny()).toMatchObject({ status: "available", context_length: 1024 });
    await expectServed();
    const tooLongForOld = await postTinyChat(server(), {}, 1500);
    expect(tooLongForOld.status).toBe(400);

    gate.resolve();
    await until(async () => (await describeTiny())?.context_length === 2048);
    expect((await describeTiny())?.status).toBe("available");
    const fitsNew = await postTinyChat(server(), {}, 1500);
    expect(fitsNew.status).toBe(200);
    await fitsNew.json();
    expect(
      logged.some((line) => line.model === TINY_MODEL && line.msg.includes("has loaded and serves it now")),
    ).toBe(true);
  });
});
