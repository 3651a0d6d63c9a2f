/**
 * Requests for a local model whose file still downloads wait for it, but not for ever and not
 * after their client has left: they used to be held until the download ended (276 s in a review,
 * with a 3 s client timeout), sockets and all. A client that leaves is logged as 499, without an
 * error; one too many is answered 503 `model_overloaded` with a retry-after.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createModelBytes, type ModelFileServer, startModelFileServer } from "../models/model-file-server.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig } from "../support/test-server.ts";

let folder: string;
let files: ModelFileServer;
let server: RunningServer;
let store: Store;
let open: () => void = () => {};
let previousModelsFolder: string | undefined;
const lines: { level: number; msg: string; status?: number; error?: string }[] = [];

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-request-while-download-"));
  previousModelsFolder = process.env.TOLLGATE_MODELS_DIR;
  process.env.TOLLGATE_MODELS_DIR = join(folder, "models");
  const [fileServer, model] = await Promise.all([startModelFileServer(), createModelBytes(8)]);
  files = fileServer;
  files.files.set("/models/late.gguf", {
    bytes: model.bytes,
    gate: new Promise<void>((resolve) => {
      open = resolve;
    }),
  });
  const { destination } = collectLogLines(lines);
  const database = `sqlite:${join(folder, "tollgate.db")}`;
  server = await startServer({
    config: createTestConfig({
      database,
      models: [
        {
          id: "late",
          kind: "chat",
          ownedBy: "tollgate",
          pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
          contextLength: 256,
          created: 0,
          engine: {
            type: "llama",
            model: `${files.baseUrl}/models/late.gguf`,
            parallel: 1,
            maxQueue: 0,
            threads: 1,
            gpu: false,
          },
        },
      ],
    }),
    logger: { destination },
  });
  store = await openStore(database);
});

afterAll(async () => {
  open();
  await server?.close();
  await store?.close();
  await files?.close();
  if (previousModelsFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
  else process.env.TOLLGATE_MODELS_DIR = previousModelsFolder;
  rmSync(folder, { recursive: true, force: true });
});

describe("a request for a model whose file still downloads", () => {
  it("stops waiting when its client leaves, and one beyond what could queue gets 503", async () => {
    const account = await createAccount(store, { name: "early", balanceNano: 1_000_000_000n });
    const { key } = await createKey(store, { role: "user", accountId: account.id });
    const chat = (signal?: AbortSignal) =>
      fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "x-request-id": "leaves",
        },
        body: JSON.stringify({ model: "late", messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }),
        ...(signal === undefined ? {} : { signal }),
      });
    const leaving = new AbortController();
    const left = chat(leaving.signal).catch((error: unknown) => error);
    await expect.poll(() => lines.length > 0 && server.app.server.listening).toBe(true);
    // parallel 1, max_queue 0: one waits; the next is refused.
    await expect.poll(async () => (await chat()).status).toBe(503);
    const refused = await chat();
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("model_overloaded");

    leaving.abort();
    await left;
    await expect
      .poll(() => lines.find((line) => line.msg === "request" && line.status === 499))
      .toBeDefined();
    expect(lines.filter((line) => line.level >= 50)).toEqual([]);
  });
});
