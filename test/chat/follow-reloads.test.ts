/**
 * Regression: a reload that gave a local model a new engine (its `parallel` raised to clear a
 * backlog) left the requests queued on the old engine waiting for the old engine's streams, which
 * may run for an hour, while the new engine sat idle and requests sent after the reload were
 * served at once. A queued request now moves to the new engine, unless it cannot take it.
 */

import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { AdmissionRequest, ChatAdmission, RunOutcome } from "../../src/chat/chat-admission.ts";
import { ChatService, type StartedChat } from "../../src/chat/chat-service.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import type { ChatEngine, ChatRequest, StreamPart } from "../../src/engine/engine.ts";
import { createLlamaEngine } from "../../src/engine/llama/create-llama-engine.ts";
import { closeWhenIdle } from "../../src/models/close-when-idle.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { createTestCatalogModel, createTestRequest, readEnd } from "../engine/llama/llama-test-support.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { until } from "../support/until.ts";

/** The test model's catalogue id (llama-test-support.ts). */
const ID = "test/tiny:f32";
const engines: ChatEngine[] = [];

afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close()));
});

const key: RequestKey = {
  publicId: "test",
  accountId: "account",
  role: "user",
  allowedModels: undefined,
  rpm: undefined,
  tpm: undefined,
};

/**
 * The small endless model (about 400 tokens/s here, 4096 tokens of context): a long request on it
 * holds its sequence for seconds, and is stopped by its client once the test has seen enough.
 */
async function endlessModel(options: { parallel: number; maxQueue?: number; contextLength?: number }) {
  const path = await getTestModelPath({ size: "small", endless: true });
  return createTestCatalogModel({ path, maxQueue: 4, ...options });
}

/** A service on real llama engines, with an admission that records what it admits and settles. */
function createService(model: CatalogModel) {
  const closed = new Set<ChatEngine>();
  /** What server.ts does with an engine a reload replaced: closes it once idle. */
  const retire = (engine: ChatEngine) =>
    closeWhenIdle(engine, {
      isHeld: (held) => registry.isHeld(held),
      onError: (error) => {
        throw error;
      },
      onClosed: () => {
        registry.forgetRetired(engine);
        closed.add(engine);
      },
    });
  const registry: ModelRegistry = new ModelRegistry(
    [model],
    (entry) => {
      const engine = createLlamaEngine({ model: entry });
      engines.push(engine);
      return engine;
    },
    { onRetired: retire },
  );
  const admitted: AdmissionRequest[] = [];
  const settled = new Map<string, RunOutcome>();
  const admission: ChatAdmission = {
    async checkRequestRate() {},
    async checkTokenRate() {},
    async admit(request) {
      admitted.push(request);
      return {
        async settle(outcome) {
          if (settled.has(request.requestId)) throw new Error(`${request.requestId} settled twice`);
          settled.set(request.requestId, outcome);
        },
      };
    },
  };
  const service = new ChatService({ registry, admission });
  return {
    registry,
    admitted,
    settled,
    closed,
    engine: () => {
      const engine = registry.get(model.id)?.engine;
      if (engine === undefined) throw new Error("no engine");
      return engine;
    },
    start: (requestId: string, request: Partial<ChatRequest>, signal = new AbortController().signal) =>
      service.start({
        requestId,
        key,
        options: {
          model: model.id,
          stream: true,
          includeUsage: false,
          choices: 1,
          user: undefined,
          request: createTestRequest({ messages: [{ role: "user", content: requestId }], ...request }),
        },
        signal,
        setHeader: () => {},
        annotate: () => {},
      }),
    /** What server.ts does on SIGHUP. */
    reload: (models: CatalogModel[]) => {
      for (const engine of registry.replace(models)) retire(engine);
    },
    /** {@link reload}, to the model's new engine, which takes over once it has loaded (ModelRegistry.replace). */
    reloadTo: (models: CatalogModel[]): ChatEngine => {
      for (const engine of registry.replace(models)) retire(engine);
      const replacement = registry.getReplacement(ID);
      if (replacement === undefined) throw new Error("the reload made no replacement that loads");
      return replacement;
    },
  };
}

/** Reads a started chat to its end, marking `done` when it gets there. */
function readAll(started: StartedChat): { parts: Promise<StreamPart[]>; done: () => boolean } {
  let ended = false;
  const parts = (async () => {
    const all: StreamPart[] = [];
    for await (const batch of started.parts) all.push(...batch);
    ended = true;
    return all;
  })();
  return { parts, done: () => ended };
}

function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    sleep(timeoutMs, undefined, { ref: false }).then(() => {
      throw new Error(`${what} after ${timeoutMs} ms`);
    }),
  ]);
}

describe("a request queued on a local engine that a reload replaces", () => {
  it("moves to the new engine and is served while the old engine's stream still runs", async () => {
    const test = createService(await endlessModel({ parallel: 1 }));
    const old = test.engine();
    const longClient = new AbortController();
    const long = readAll(await test.start("long", { maxTokens: 4000 }, longClient.signal));
    const queued = test.start("queued", { maxTokens: 5 });
    await until(() => test.registry.loadOf(ID)?.waiting === 1, "queued");
    await sleep(200);

    const replacement = test.reloadTo([await endlessModel({ parallel: 2 })]);
    expect(replacement).not.toBe(old);
    // The old engine serves until the new one has loaded; then the queued request moves.
    expect(test.engine()).toBe(old);
    expect(test.registry.loadOf(ID)).toEqual({ running: 1, waiting: 1 });
    await until(() => test.engine() === replacement, "the new engine took over");

    const parts = await within(
      queued.then((started) => readAll(started).parts),
      5000,
      "the queued request still waits for the old engine's stream",
    );
    expect(readEnd(parts)).toMatchObject({
      type: "finish",
      reason: "length",
      usage: { completionTokens: 5 },
    });
    expect(long.done()).toBe(false);
    expect(old.load?.()).toEqual({ running: 1, waiting: 0 });
    expect(test.registry.loadOf(ID)).toEqual({ running: 1, waiting: 0 });
    expect(test.registry.isHeld(replacement)).toBe(false);
    // Billed once, as admitted, with its wait on the old engine in its queue time.
    const outcome = test.settled.get("queued");
    expect(outcome).toMatchObject({ errorCode: undefined, usage: { completionTokens: 5 } });
    expect(outcome?.timings.queueMs).toBeGreaterThanOrEqual(200);

    longClient.abort();
    await long.parts;
    await until(() => test.closed.has(old), "the old engine closed");
    expect(test.closed.has(replacement)).toBe(false);
    expect(test.admitted.map((request) => request.requestId)).toEqual(["long", "queued"]);
    expect([...test.settled.keys()].sort()).toEqual(["long", "queued"]);
  });

  it("ends as a client's stop when its client leaves while the new engine loads", async () => {
    const test = createService(await endlessModel({ parallel: 1 }));
    const old = test.engine();
    const longClient = new AbortController();
    const long = readAll(await test.start("long", { maxTokens: 4000 }, longClient.signal));
    const queuedClient = new AbortController();
    const queued = test.start("queued", { maxTokens: 5 }, queuedClient.signal);
    await until(() => test.registry.loadOf(ID)?.waiting === 1, "queued");

    const replacement = test.reloadTo([await endlessModel({ parallel: 2 })]);
    // The new engine still loads: the request waits on the old one, which still serves.
    expect(replacement.status()).toBe("loading");
    expect(test.engine()).toBe(old);
    queuedClient.abort();

    const parts = await readAll(await queued).parts;
    expect(readEnd(parts)).toMatchObject({ type: "finish", unstarted: true, usage: { completionTokens: 0 } });
    expect(test.settled.get("queued")).toMatchObject({ errorCode: "client_closed", unstarted: true });
    await until(() => test.engine() === replacement, "the new engine took over");
    expect(test.registry.isHeld(replacement)).toBe(false);
    expect(test.registry.loadOf(ID)).toEqual({ running: 1, waiting: 0 });
    expect(long.done()).toBe(false);

    longClient.abort();
    await long.parts;
    await until(() => test.closed.has(old), "the old engine closed");
    expect(test.settled.size).toBe(2);
  });

  it("keeps its place on the old engine when the reload removed the model", async () => {
    const test = createService(await endlessModel({ parallel: 1 }));
    const old = test.engine();
    const longClient = new AbortController();
    const long = readAll(await test.start("long", { maxTokens: 4000 }, longClient.signal));
    let started = false;
    const queued = test.start("queued", { maxTokens: 5 }).then((chat) => {
      started = true;
      return chat;
    });
    await until(() => test.registry.loadOf(ID)?.waiting === 1, "queued");

    test.reload([]);
    expect(test.registry.listRemovedIds()).toEqual([ID]);
    await sleep(300);
    expect(started).toBe(false);
    expect(test.registry.loadOf(ID)).toEqual({ running: 1, waiting: 1 });

    // Served by the old engine once its sequence is free, as a reload never drops a request.
    longClient.abort();
    await long.parts;
    const parts = await readAll(await queued).parts;
    expect(readEnd(parts)).toMatchObject({ type: "finish", usage: { completionTokens: 5 } });
    await until(() => test.closed.has(old), "the old engine closed");
    expect(test.settled.get("queued")).toMatchObject({ errorCode: undefined });
  });

  it("keeps its place on the old engine when its request no longer fits the new context", async () => {
    const test = createService(await endlessModel({ parallel: 1 }));
    const old = test.engine();
    const longClient = new AbortController();
    const long = readAll(await test.start("long", { maxTokens: 4000 }, longClient.signal));
    let started = false;
    const queued = test.start("queued", { maxTokens: 100 }).then((chat) => {
      started = true;
      return chat;
    });
    await until(() => test.registry.loadOf(ID)?.waiting === 1, "queued");

    const replacement = test.reloadTo([await endlessModel({ parallel: 2, contextLength: 64 })]);
    await until(() => test.engine() === replacement && !test.registry.isHeld(replacement), "move tried");
    expect(started).toBe(false);
    expect(test.registry.loadOf(ID)).toEqual({ running: 1, waiting: 1 });

    longClient.abort();
    await long.parts;
    const parts = await readAll(await queued).parts;
    expect(readEnd(parts)).toMatchObject({ type: "finish", usage: { completionTokens: 100 } });
    await until(() => test.closed.has(old), "the old engine closed");
  });
});
