/**
 * An upstream model the catalogue gives no context length takes it from its server's model list
 * (vLLM's `max_model_len`, OpenRouter's `context_length`, Groq's `context_window`): checked and
 * reserved for as a catalogue one, and a request without max_tokens is not cut at the default
 * 4096 tokens. Regression: such a model always sent `max_tokens: 4096` upstream when the client
 * set none, cutting long answers ("length") that the contract lets run to their natural end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import { readContextLengthFromModelList } from "../../../src/engine/openai/read-upstream-context-length.ts";
import { startServer } from "../../../src/server.ts";
import { createTestConfig, createUpstreamModelEntry } from "../../support/test-server.ts";
import { until } from "../../support/until.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError, answerJson, type MockUpstream } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** A vLLM-shaped model list naming `upstream-model` (engine-helpers' upstream name). */
function vllmList(maxModelLen: number) {
  return {
    object: "list",
    data: [
      { id: "other-model", object: "model", max_model_len: 999 },
      { id: "upstream-model", object: "model", owned_by: "vllm", max_model_len: maxModelLen },
    ],
  };
}

/** The `max_tokens` of the chat request the upstream received last. */
function lastMaxTokens(upstream: MockUpstream): unknown {
  return upstream.requests.at(-1)?.body.max_tokens;
}

describe("an upstream model without a catalogue context length", () => {
  it("learns it from the upstream's model list: checked, reserved for, and no max_tokens sent", async () => {
    const upstream = await startTestMock();
    upstream.handleModelList(answerJson(vllmList(300)));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { apiKey: "sk-list-key" }) });
    await until(() => engine.contextLength !== undefined, "the context length");
    expect(engine.contextLength).toBe(300);
    // Asked with the endpoint's key, at the base URL's /models.
    expect(upstream.modelListRequests[0]).toMatchObject({
      method: "GET",
      url: "/v1/models",
      headers: { authorization: "Bearer sk-list-key" },
    });

    const prepared = await engine.prepare(chatRequest());
    expect(prepared.maxCompletionTokens).toBe(300 - prepared.promptTokens);
    await collectParts(engine);
    expect(lastMaxTokens(upstream)).toBeUndefined();
    // The client's own bound still goes upstream.
    await collectParts(engine, chatRequest({ maxTokens: 20 }));
    expect(lastMaxTokens(upstream)).toBe(20);
    const long = chatRequest({ messages: [{ role: "user", content: "word ".repeat(400) }] });
    await expect(engine.prepare(long)).rejects.toMatchObject({
      code: "context_length_exceeded",
      status: 400,
    });
  });

  it("reserves no more than the default bound for a learned context, however long, and runs to the natural end", async () => {
    // A hosted model's list (OpenRouter's shape): a million tokens. Reserved in full, a request
    // without max_tokens held 8 of a 10 balance, and a key's tpm below a million refused them all.
    const upstream = await startTestMock();
    upstream.handleModelList(
      answerJson({ data: [{ id: "upstream-model", context_length: 1_047_576, top_provider: {} }] }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    await until(() => engine.contextLength !== undefined, "the context length");
    expect(engine.contextLength).toBe(1_047_576);
    expect((await engine.prepare(chatRequest())).maxCompletionTokens).toBe(4096);
    await collectParts(engine);
    expect(lastMaxTokens(upstream)).toBeUndefined();
    // A client's own bound is reserved as given.
    expect((await engine.prepare(chatRequest({ maxTokens: 100_000 }))).maxCompletionTokens).toBe(100_000);
  });

  it("reads the list again every so often, with no request, and takes a changed length", async () => {
    const upstream = await startTestMock();
    upstream.handleModelList(answerJson(vllmList(1000)));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      contextLengthLearning: { refreshMs: 100 },
    });
    await until(() => engine.contextLength === 1000, "the first length");
    upstream.handleModelList(answerJson(vllmList(3000)));
    await until(() => engine.contextLength === 3000, "the changed length");
    expect(upstream.requests).toHaveLength(0);
    const readings = upstream.modelListRequests.length;
    expect(readings).toBeGreaterThanOrEqual(2);
    // Closed: no reading after.
    await closeEnginesAndMocks();
    await sleep(250);
    expect(upstream.modelListRequests).toHaveLength(readings);
  });

  it("keeps the default bound where the list gives the model no context length, or cannot be read", async () => {
    for (const answer of [
      answerJson({ object: "list", data: [{ id: "upstream-model", object: "model", owned_by: "ollama" }] }),
      answerError(404, { error: { message: "not found" } }),
      answerError(500, { error: { message: "broken" } }),
    ]) {
      const upstream = await startTestMock();
      upstream.handleModelList(answer);
      const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
      await until(() => upstream.modelListRequests.length === 1, "the model list request");
      await sleep(50);
      expect(engine.contextLength).toBeUndefined();
      expect((await engine.prepare(chatRequest())).maxCompletionTokens).toBe(4096);
      await collectParts(engine);
      expect(lastMaxTokens(upstream)).toBe(4096);
    }
  });

  it("takes a 404 as no list, asked again at the refresh, and a 500 as a failure, asked again soon", async () => {
    const pauses = { retryMs: 50, refreshMs: 60_000 };
    const absent = await startTestMock();
    absent.handleModelList(answerError(404, { error: { message: "no such route" } }));
    const failing = await startTestMock();
    failing.handleModelList(answerError(500, { error: { message: "broken" } }));
    createTestEngine({ model: upstreamModel([absent.baseUrl]), contextLengthLearning: pauses });
    createTestEngine({ model: upstreamModel([failing.baseUrl]), contextLengthLearning: pauses });
    await until(() => failing.modelListRequests.length >= 3, "the failing list's retries");
    expect(absent.modelListRequests).toHaveLength(1);
  });

  it("asks the next endpoint when one cannot answer, and asks again later after a failure", async () => {
    const down = await startTestMock();
    down.handleModelList(answerError(503, { error: { message: "starting" } }));
    const up = await startTestMock();
    up.handleModelList(answerError(503, { error: { message: "starting" } }));
    const engine: ChatEngine = createTestEngine({
      model: upstreamModel([down.baseUrl, up.baseUrl]),
      contextLengthLearning: { retryMs: 100 },
    });
    await until(() => up.modelListRequests.length === 1, "the second endpoint's model list");
    expect(down.modelListRequests).toHaveLength(1);
    expect(engine.contextLength).toBeUndefined();
    // The server is up now: asked again after the pause, with no request to prompt it (regression:
    // only a request did, which went out without the length and could be refused).
    up.handleModelList(answerJson(vllmList(2048)));
    await until(() => engine.contextLength !== undefined, "the context length");
    expect(engine.contextLength).toBe(2048);
    expect(up.requests).toHaveLength(0);
  });

  it("keeps a learned length when the list later answers 404, reads again soon, and asks the next endpoint (regression: dropped)", async () => {
    const gateway = await startTestMock();
    gateway.handleModelList(answerJson(vllmList(1000)));
    const other = await startTestMock();
    other.handleModelList(answerError(404, { error: { message: "no such route" } }));
    const engine = createTestEngine({
      model: upstreamModel([gateway.baseUrl, other.baseUrl]),
      contextLengthLearning: { refreshMs: 100, retryMs: 100 },
    });
    await until(() => engine.contextLength === 1000, "the first length");
    gateway.handleModelList(answerError(404, { error: { message: "no such route" } }));
    const asked = other.modelListRequests.length;
    await until(() => other.modelListRequests.length >= asked + 2, "readings past the 404");
    expect(engine.contextLength).toBe(1000);
    // The other endpoint has the list now: its length is taken.
    other.handleModelList(answerJson(vllmList(2000)));
    await until(() => engine.contextLength === 2000, "the other endpoint's length");
  });

  it("shows in /v1/models once learned", async () => {
    const upstream = await startTestMock();
    upstream.handleModelList(
      answerJson({ object: "list", data: [{ id: "served-name", object: "model", max_model_len: 4000 }] }),
    );
    const folder = mkdtempSync(join(tmpdir(), "tollgate-context-length-"));
    const server = await startServer({
      config: createTestConfig({
        database: `sqlite:${join(folder, "tollgate.db")}`,
        models: [
          {
            ...createUpstreamModelEntry("vllm-model", upstream.baseUrl, { upstreamModel: "served-name" }),
            contextLength: undefined,
          },
        ],
      }),
      logger: false,
    });
    try {
      const read = async () => {
        const response = await fetch(`${server.baseUrl}/models/vllm-model`, {
          headers: { authorization: `Bearer ${server.createdKeys.starterKey}` },
        });
        return ((await response.json()) as { context_length: number | null }).context_length;
      };
      let contextLength = await read();
      for (let attempt = 0; attempt < 100 && contextLength === null; attempt++) {
        await sleep(20);
        contextLength = await read();
      }
      expect(contextLength).toBe(4000);
    } finally {
      await server.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("is not asked for where the catalogue gives a context length", async () => {
    const upstream = await startTestMock();
    upstream.handleModelList(answerJson(vllmList(300)));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl], { contextLength: 1000 }) });
    await collectParts(engine);
    expect(upstream.modelListRequests).toHaveLength(0);
    expect(engine.contextLength).toBe(1000);
  });
});

describe("reading a model list", () => {
  it("reads the known fields of the named model only, as positive integers", () => {
    expect(readContextLengthFromModelList(vllmList(32768), "upstream-model")).toBe(32768);
    expect(readContextLengthFromModelList({ data: [{ id: "m", context_length: 128000 }] }, "m")).toBe(128000);
    expect(readContextLengthFromModelList([{ id: "m", context_window: 8192 }], "m")).toBe(8192);
    expect(readContextLengthFromModelList({ data: [{ id: "m", context_length: 100 }] }, "n")).toBeUndefined();
    for (const bad of [0, -5, 1.5, "4096", null, 1e300])
      expect(
        readContextLengthFromModelList({ data: [{ id: "m", max_model_len: bad }] }, "m"),
      ).toBeUndefined();
    expect(readContextLengthFromModelList({ data: "none" }, "m")).toBeUndefined();
    expect(readContextLengthFromModelList("text", "m")).toBeUndefined();
  });
});
