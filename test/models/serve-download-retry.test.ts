import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { downloadRetrySettings } from "../../src/engine/llama/retry-model-download.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { findFreePort } from "../support/free-port.ts";
import { startTestServer, type TestServer } from "../support/test-server.ts";
import { createModelBytes, type ModelFileServer, startModelFileServer } from "./model-file-server.ts";

/**
 * A server whose model's host cannot be reached at boot tries the download again by itself
 * (retry-model-download.ts) and serves the model once the host answers, without a reload; a
 * 404 is not tried again. Retries are every 20 ms here (30 s, 1 min, 2 min, then 5 min at serve).
 */
const modelsFolder = makeTemporaryDirectory();
const logs: { level: number; model?: string; msg?: string; nextAttemptAt?: string; attempt?: number }[] = [];
let previousModelsFolder: string | undefined;
let previousDelays: readonly number[];
let test: TestServer;
let files: ModelFileServer;
let latePort: number;
let lateHost: Server | undefined;
let lateRequests = 0;
let stalledPort: number;
let stalledHost: Server | undefined;
let stalledRequests = 0;

function createEntry(id: string, source: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: 256,
    created: 0,
    engine: { type: "llama", model: source, parallel: 1, maxQueue: 4, threads: 1, gpu: false },
  };
}

beforeAll(async () => {
  previousModelsFolder = process.env.TOLLGATE_MODELS_DIR;
  process.env.TOLLGATE_MODELS_DIR = modelsFolder;
  previousDelays = downloadRetrySettings.delays;
  downloadRetrySettings.delays = [20];
  files = await startModelFileServer();
  latePort = await findFreePort();
  const neverPort = await findFreePort();
  stalledPort = await findFreePort();
  const { destination } = collectLogLines(logs);
  test = await startTestServer({
    logDestination: destination,
    extraModels: [
      createEntry("late", `http://127.0.0.1:${latePort}/models/late.gguf`),
      createEntry("never", `http://127.0.0.1:${neverPort}/models/never.gguf`),
      createEntry("missing", `${files.baseUrl}/models/missing.gguf`),
      createEntry("stalled", `http://127.0.0.1:${stalledPort}/models/stalled.gguf`),
    ],
  });
});

afterAll(async () => {
  await test?.close();
  await files?.close();
  if (lateHost !== undefined) await new Promise((resolve) => lateHost?.close(resolve));
  stalledHost?.closeAllConnections();
  if (stalledHost !== undefined) await new Promise((resolve) => stalledHost?.close(resolve));
  downloadRetrySettings.delays = previousDelays;
  if (previousModelsFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
  else process.env.TOLLGATE_MODELS_DIR = previousModelsFolder;
});

async function statusOf(id: string): Promise<string | undefined> {
  const answer = await fetch(`${test.baseUrl}/models`, {
    headers: { authorization: `Bearer ${test.starterKey}` },
  });
  const body = (await answer.json()) as { data: { id: string; status?: string }[] };
  return body.data.find((model) => model.id === id)?.status;
}

function complete(model: string): Promise<Response> {
  return fetch(`${test.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${test.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model, max_tokens: 1, messages: [{ role: "user", content: "hi" }] }),
  });
}

const warningsFor = (model: string) => logs.filter((line) => line.model === model && line.level === 40);

describe("serve: a model download that failed for a passing cause is tried again", () => {
  it("loads the model once its host answers, with no reload, and answers 200", async () => {
    // The host refuses connections at boot: unavailable, with the next attempt's time logged.
    await vi.waitFor(() => expect(warningsFor("late").length).toBeGreaterThan(0), { timeout: 10_000 });
    expect(["unavailable", "loading"]).toContain(await statusOf("late"));
    const refused = await complete("late");
    expect(refused.status).toBe(503);
    const refusal = (await refused.json()) as { error: { code: string; message: string } };
    expect(refusal.error.code).toBe("model_unavailable");
    // The client is told to retry later; the host and the models folder are for the log only.
    expect(refusal.error.message).toMatch(/its file is not downloaded yet.*please retry later\.$/);
    for (const detail of [`127.0.0.1:${latePort}`, modelsFolder]) {
      expect(refusal.error.message).not.toContain(detail);
      expect(JSON.stringify(warningsFor("late")[0])).toContain(detail);
    }
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(refused.headers.get("x-should-retry")).not.toBe("false");

    // The host comes up: the next attempt downloads the file and the model loads.
    const model = await createModelBytes(8);
    lateHost = createServer((_request, response) => {
      lateRequests++;
      response.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": model.bytes.length,
      });
      response.end(model.bytes);
    });
    await new Promise<void>((resolve) => lateHost?.listen(latePort, "127.0.0.1", resolve));
    await vi.waitFor(async () => expect(await statusOf("late")).toBe("available"), {
      timeout: 30_000,
      interval: 50,
    });
    expect(lateRequests).toBeGreaterThan(0);
    const answer = await complete("late");
    expect(answer.status).toBe(200);
    // One warning per failed attempt, with the next attempt's time; no error.
    expect(warningsFor("late")[0]).toMatchObject({ msg: "local model unavailable", attempt: 1 });
    for (const warning of warningsFor("late")) expect(Date.parse(warning.nextAttemptAt ?? "")).not.toBeNaN();
    expect(logs.some((line) => line.model === "late" && line.level >= 50)).toBe(false);
  });

  it("does not try a 404 again", async () => {
    await vi.waitFor(() => expect(warningsFor("missing")).toHaveLength(1), { timeout: 10_000 });
    const asked = files.requests.filter((seen) => seen.path === "/models/missing.gguf").length;
    // Meanwhile the model whose host never answers is tried again and again.
    const triedBefore = warningsFor("never").length;
    await vi.waitFor(() => expect(warningsFor("never").length).toBeGreaterThan(triedBefore + 2), {
      timeout: 10_000,
    });
    expect(warningsFor("missing")).toHaveLength(1);
    expect(warningsFor("missing")[0]?.nextAttemptAt).toBeUndefined();
    expect(files.requests.filter((seen) => seen.path === "/models/missing.gguf")).toHaveLength(asked);
    expect(await statusOf("missing")).toBe("unavailable");
    const refused = await complete("missing");
    expect(refused.status).toBe(503);
    const message = ((await refused.json()) as { error: { message: string } }).error.message;
    expect(message).toMatch(/its file could not be downloaded\. The server's log says why/);
    expect(message).not.toContain(files.baseUrl.replace("http://", ""));
    expect(JSON.stringify(warningsFor("missing")[0])).toContain(files.baseUrl.replace("http://", ""));
    expect(refused.headers.get("x-should-retry")).toBe("false");
  });

  it("stays ready while a failed download is tried again (regression: 503 'is loading' for each attempt, minutes each)", async () => {
    // The first attempt finds no host; the host then takes the retry's request and never answers.
    await vi.waitFor(() => expect(warningsFor("stalled").length).toBeGreaterThan(0), { timeout: 10_000 });
    stalledHost = createServer(() => {
      stalledRequests++;
    });
    await new Promise<void>((resolve) => stalledHost?.listen(stalledPort, "127.0.0.1", resolve));
    await vi.waitFor(() => expect(stalledRequests).toBeGreaterThan(0), { timeout: 10_000, interval: 20 });
    expect(await statusOf("stalled")).toBe("loading");
    const ready = await fetch(`${test.origin}/ready`);
    expect(await ready.json()).toEqual({ status: "ready", reasons: [] });
    expect(ready.status).toBe(200);
  });
});
