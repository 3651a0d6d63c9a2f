import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Config } from "../../src/catalog/catalog.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { getTestModelPath } from "../support/test-model.ts";
import {
  createTestConfig,
  createTinyModelEntry,
  startTestServer,
  TINY_MODEL,
} from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const server = useTestServer();

/** A configuration with these models (a reload reads only the catalogue from it). */
function configWith(models: Config["models"]): Config {
  return createTestConfig({
    database: "sqlite::memory:",
    models,
  });
}

async function listModels() {
  const response = await fetch(`${server().baseUrl}/models`, {
    headers: { authorization: `Bearer ${server().starterKey}` },
  });
  return (
    (await response.json()) as {
      data: { id: string; pricing: Record<string, string>; status: string; context_length?: number | null }[];
    }
  ).data;
}

describe("reloading the catalogue", () => {
  it("swaps models and prices while a stream in flight completes", async () => {
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "Go" }],
        stream: true,
        max_tokens: 60,
      }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);

    const tiny = createTinyModelEntry(await getTestModelPath());
    await server().server.reload(
      configWith([
        {
          ...tiny,
          contextLength: 1024,
          pricing: { kind: "chat", inputPerMillion: "0.20", outputPerMillion: "0.80" },
        },
        { ...tiny, id: "tiny-2", engine: { ...tiny.engine!, parallel: 1 } as typeof tiny.engine },
      ]),
    );

    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      text += new TextDecoder().decode(chunk.value);
    }
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(text).not.toContain('"error"');

    const models = await listModels();
    expect(models.map((model) => model.id)).toEqual([TINY_MODEL, "tiny-2"]);
    expect(models[0]?.pricing).toEqual({ input_per_million: "0.20", output_per_million: "0.80" });

    // The new price is what the next request is charged.
    const { accountId, key } = await server().createFundedKey("after-reload", "1");
    const completion = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 3 }),
    });
    const usage = (
      (await completion.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
    ).usage;
    const [row] = await server().store.listUsage({ accountId });
    expect(row?.costNano).toBe(BigInt(usage.prompt_tokens) * 200n + BigInt(usage.completion_tokens) * 800n);
  });

  it("counts a request on a model that a reload removed under that model's id", async () => {
    const tiny = createTinyModelEntry(await getTestModelPath());
    await server().server.reload(configWith([tiny, { ...tiny, id: "going" }]));
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "going",
        messages: [{ role: "user", content: "Go" }],
        stream: true,
        max_tokens: 40,
      }),
    });
    const reader = response.body!.getReader();
    await reader.read();
    await server().server.reload(configWith([tiny]));
    while (!(await reader.read()).done) {}

    const metrics = await (await fetch(`${server().origin}/metrics`)).text();
    expect(metrics).toMatch(
      /tollgate_requests_total\{route="\/v1\/chat\/completions",model="going",status="200"\} 1/,
    );
    expect(metrics).toMatch(/tollgate_cost_total\{model="going"\} \d/);
    expect(metrics).not.toMatch(/tollgate_cost_total\{model=""\}/);
  });

  it("applies a changed context_length of a model whose engine block is unchanged", async () => {
    const tiny = createTinyModelEntry(await getTestModelPath());
    await server().server.reload(configWith([{ ...tiny, contextLength: 256 }]));

    // The engine serving the model goes on until the new one has loaded, then hands over.
    let [listed] = await listModels();
    while (listed?.context_length !== 256) {
      expect(listed).toMatchObject({ status: "available", context_length: 1024 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      [listed] = await listModels();
    }
    // 300 completion tokens fit the 1024 the model had, not the 256 it has now.
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 300,
      }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("context_length_exceeded");
    expect(body.error.message).toContain("maximum context length is 256 tokens");
    expect((await listModels())[0]?.context_length).toBe(256);
  });
});

describe("readiness after a reload", () => {
  it("stays ready while a model the reload added is still downloading", async () => {
    // A file server that takes the request and never answers: the new model stays loading.
    const asked = Promise.withResolvers<void>();
    const held: ServerResponse[] = [];
    const files = createServer((_request, response) => {
      held.push(response);
      asked.resolve();
    });
    files.listen(0, "127.0.0.1");
    await once(files, "listening");
    const { port } = files.address() as AddressInfo;
    const modelsFolder = mkdtempSync(join(tmpdir(), "tollgate-ready-"));
    const previousFolder = process.env.TOLLGATE_MODELS_DIR;
    process.env.TOLLGATE_MODELS_DIR = modelsFolder;
    const tiny = createTinyModelEntry(await getTestModelPath());
    try {
      let ready = await fetch(`${server().origin}/ready`);
      for (let attempt = 0; attempt < 100 && ready.status !== 200; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        ready = await fetch(`${server().origin}/ready`);
      }
      expect(ready.status).toBe(200);
      const added = {
        ...tiny,
        id: "downloading",
        engine: { ...tiny.engine, model: `http://127.0.0.1:${port}/big.gguf` },
      } as typeof tiny;
      await server().server.reload(configWith([tiny, added]));
      await asked.promise;
      expect((await listModels()).find((model) => model.id === "downloading")?.status).toBe("loading");
      ready = await fetch(`${server().origin}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: "ready", reasons: [] });
    } finally {
      await server().server.reload(configWith([tiny]));
      for (const response of held) response.destroy();
      files.closeAllConnections();
      files.close();
      if (previousFolder === undefined) delete process.env.TOLLGATE_MODELS_DIR;
      else process.env.TOLLGATE_MODELS_DIR = previousFolder;
      rmSync(modelsFolder, { recursive: true, force: true });
    }
  });
});

describe("a reload after the shutdown began", () => {
  it("is ignored: it starts no engine that nothing would close", async () => {
    const logged: { msg: string }[] = [];
    const { destination } = collectLogLines(logged);
    const stopping = await startTestServer({ logDestination: destination });
    // A changed engine block: a reload would build a new engine for it.
    const changed = createTinyModelEntry(await getTestModelPath(), { parallel: 1 });
    const stopped = stopping.server.shutdown({ graceMs: 0 });
    await stopping.server.reload(configWith([changed]));
    await stopped;
    await stopping.close();
    const messages = logged.map((line) => line.msg);
    expect(messages).toContain("not reloading the catalogue: the server is shutting down");
    expect(messages).not.toContain("catalogue reloaded");
  });
});
